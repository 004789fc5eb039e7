"""Compact edges (`max_children=K`) against dense edge tables and mctx, in one run.

For each game (uniform evaluator, random positions up to 10 plies in):
  * bytes per node of each search, from XLA's compiled program: the growth of its
    temporary and output bytes from `S` to `2S` simulations (capacity `S + 1`), per
    game and node; and what share of a compact node is the stored pgx state;
  * the games times capacity that fit in 16 GB and in 80 GB at that size, and the
    compiled program's estimate for one AlphaZero move of `--move-batch` games of
    `--move-simulations` simulations (shapes only: nothing is allocated);
  * with `--parts time`, the median time of one search at each `--time-sizes` B x S, ours
    dense, ours compact and `mctx.muzero_policy`, each compiled first, timed alone and
    one after another in this process (run it alone on the machine; the load average
    is printed beside the table); the compact search's `dropped_actions`.

    python -m benchmarks memory --games chess:96 shogi:96 go_19x19:362
    python -m benchmarks memory --games chess:96 --parts time
"""

import argparse
import os
import platform
import time

import jax
import numpy as np

from mcgs_jax.apps.benchmark.timing import make_policy, random_positions, time_policy
from mcgs_jax.games import make_game

GIGABYTE = 1e9


def _compiled_bytes(policy, state) -> int:
  """Temporary plus output bytes of `policy`'s program for `state`'s shapes."""
  key = jax.random.PRNGKey(0)
  shapes = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), state)
  analysis = policy.lower(None, key, shapes).compile().memory_analysis()
  return int(analysis.temp_size_in_bytes + analysis.output_size_in_bytes)


def _policies(game, num_simulations: int, max_children: int) -> dict:
  return {
    "dense": make_policy(game, "graph", num_simulations),
    "compact": make_policy(game, "graph", num_simulations, max_children=max_children),
    "mctx": make_policy(game, "mctx", num_simulations),
  }


def node_bytes(game, state, max_children: int, simulations: int) -> dict[str, float]:
  """Bytes per node of each search: the compiled program's growth from
  `simulations` to twice as many, per game and node."""
  batch_size = int(state.current_player.shape[0])
  small = _policies(game, simulations, max_children)
  large = _policies(game, 2 * simulations, max_children)
  return {
    name: (_compiled_bytes(large[name], state) - _compiled_bytes(small[name], state))
    / (batch_size * simulations)
    for name in small
  }


def move_bytes(game, max_children: int, batch_size: int, simulations: int) -> dict[str, int]:
  """The compiled program's bytes for one move of `batch_size` games."""
  state = jax.eval_shape(lambda key: game.init(key, batch_size), jax.random.PRNGKey(0))
  policies = _policies(game, simulations, max_children)
  return {name: _compiled_bytes(policy, state) for name, policy in policies.items()}


def search_times(game, state, max_children: int, simulations: int) -> dict:
  """Median seconds of one search of each kind (3 runs; 1 for mctx above 256
  simulations, which takes minutes), and the compact search's dropped actions."""
  timed = {}
  for name, policy in _policies(game, simulations, max_children).items():
    repeats = 1 if name == "mctx" and simulations > 256 else 3
    _, seconds = time_policy(policy, None, jax.random.PRNGKey(1), state, repeats)
    timed[name] = seconds
  compact = _policies(game, simulations, max_children)["compact"]
  output = compact(None, jax.random.PRNGKey(1), state)
  timed["dropped"] = int(np.sum(output.search_graph.dropped_actions))
  return timed


def stored_state_bytes(game, state) -> float:
  """Bytes of one game's stored state (what a node keeps as its embedding)."""
  stored = jax.eval_shape(game.stored, state)
  leaves = jax.tree_util.tree_leaves(stored)
  batch_size = int(state.current_player.shape[0])
  return sum(int(np.prod(leaf.shape)) * leaf.dtype.itemsize for leaf in leaves) / batch_size


def _report_memory(name, game, state, max_children, args) -> None:
  per_node = node_bytes(game, state, max_children, args.simulations)
  stored = stored_state_bytes(game, state)
  print(f"\n{name}: A = {game.num_actions}, K = {max_children}")
  print("| search | bytes per node | games x capacity in 16 GB | in 80 GB |")
  print("|---|---|---|---|")
  for search, size in per_node.items():
    print(
      f"| {search} | {size / 1e3:.2f} KB | {16 * GIGABYTE / size:,.0f} | "
      f"{80 * GIGABYTE / size:,.0f} |"
    )
  print(
    f"stored state: {stored / 1e3:.2f} KB, {stored / per_node['compact']:.0%} of a compact node"
  )
  if args.move_batch:
    moves = move_bytes(game, max_children, args.move_batch, args.move_simulations)
    sizes = ", ".join(f"{search} {size / GIGABYTE:.1f} GB" for search, size in moves.items())
    print(f"one move, B = {args.move_batch}, S = {args.move_simulations}: {sizes}")


def _report_times(game, max_children, args) -> None:
  print(f"load average before timing: {os.getloadavg()}")
  print("| B x S | dense | compact | mctx | mctx / compact | dense / compact | dropped |")
  print("|---|---|---|---|---|---|---|")
  for size in args.time_sizes:
    batch_size, simulations = (int(part) for part in size.split("x"))
    state = random_positions(game, jax.random.PRNGKey(0), batch_size, 10)
    timed = search_times(game, state, max_children, simulations)
    print(
      f"| {size} | {timed['dense']:.2f} s | {timed['compact']:.2f} s | {timed['mctx']:.2f} s | "
      f"{timed['mctx'] / timed['compact']:.1f} | {timed['dense'] / timed['compact']:.1f} | "
      f"{timed['dropped']} |"
    )


def run(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--games", nargs="+", default=["chess:96", "shogi:96", "go_19x19:362"])
  parser.add_argument("--batch-size", type=int, default=8, help="games in the memory part")
  parser.add_argument("--simulations", type=int, default=64, help="S of the memory part")
  parser.add_argument("--move-batch", type=int, default=1024, help="0: skip the move estimate")
  parser.add_argument("--move-simulations", type=int, default=800)
  parser.add_argument(
    "--parts", nargs="+", choices=("memory", "time"), default=["memory"], help="what to measure"
  )
  parser.add_argument("--time-sizes", nargs="+", default=["32x256", "8x800"])
  args = parser.parse_args(argv)
  print(f"{time.strftime('%Y-%m-%d')}, jax {jax.__version__}, {platform.processor() or 'cpu'}")
  for spec in args.games:
    name, _, width = spec.partition(":")
    game = make_game(name)
    max_children = int(width)
    if "memory" in args.parts:
      state = random_positions(game, jax.random.PRNGKey(0), args.batch_size, 10)
      _report_memory(name, game, state, max_children, args)
    if "time" in args.parts:
      print(f"\n{name}: time per search, K = {max_children}")
      _report_times(game, max_children, args)
