"""Connect-four end-game accuracy: MCGS (transpositions) vs MCTS (tree), checked by a solver.

Positions come from uniformly random play from the empty board, stopped when 10-14
cells are empty (drawn per position); a position is kept when it is not over and the
exact solver (`solvers.connect_four_values`) says its moves are not all equally good
(some optimal, some not). For each number of simulations S and each mode, one jitted
`uct_policy` call (c = 1.41, random-rollout evaluator, as in `tests/test_nim_uct_findings.py`)
searches all positions as one batch; the score is the share of positions whose chosen
move (the most visited root action) is optimal according to the solver.

Usage:
  python -m benchmarks strength --part endgame_accuracy [--positions 48] [--simulations 64,256,1024]
                                         [--quick]
"""

import argparse
import datetime
import time

import jax
import jax.numpy as jnp
import numpy as np

import mcgs_jax as mg
from benchmarks import record
from mcgs_jax.games import evaluators, search_game, solvers
from mcgs_jax.games.adapter import make_game

C = 1.41


def immediate_wins(position, for_mover=True):
  """Columns where the player to move (or, `for_mover=False`, the other player) would
  complete four at once."""
  if not for_mover:
    position = solvers.ConnectFourPosition(
      mover=position.mover ^ position.occupied,
      occupied=position.occupied,
      num_moves=position.num_moves,
    )
  return [c for c in position.legal_columns() if position.play(c).last_move_won]


def random_positions(count, seed=0, empty_range=(10, 14), quiet=True):
  """`count` move lists with `empty_range` empty cells, not over, not all moves equal.

  `quiet`: also skip positions where either player has a four-in-a-row available at
  once (a win in one, or a forced block): random play leaves many of those, and a
  search finds them with a handful of simulations, which hides any difference.

  Returns a list of `(moves, action_values)` with the solver's values per column.
  """
  rng = np.random.default_rng(seed)
  positions = []
  while len(positions) < count:
    target_empty = int(rng.integers(empty_range[0], empty_range[1] + 1))
    position, moves = solvers.ConnectFourPosition(), []
    while 42 - position.num_moves > target_empty and not position.is_terminal:
      column = int(rng.choice(position.legal_columns()))
      position, moves = position.play(column), moves + [column]
    if position.is_terminal:
      continue
    if quiet and (immediate_wins(position) or immediate_wins(position, False)):
      continue
    _, action_values = solvers.connect_four_values(moves)
    if len(set(action_values.values())) > 1:
      positions.append((moves, action_values))
  return positions


def batch_states(game, move_lists):
  """One batched pgx state holding the position after each move list."""
  states = [game.play(moves) for moves in move_lists]
  return jax.tree.map(lambda *leaves: jnp.stack(leaves), *states)


def make_search(game, num_simulations, **options):
  """A jitted `uct_policy` search (c = C, capacity S + 1) of batched positions with
  the graph keywords `options`; returns `search(key, state) -> (action, nodes, hits)`."""

  @jax.jit
  def search(key, state):
    root_key, search_key = jax.random.split(key)
    out = search_game(
      mg.uct_policy,
      game,
      state,
      num_simulations,
      search_key,
      root_key=root_key,
      c=C,
      capacity=num_simulations + 1,
      **options,
    )
    graph = out.search_graph
    return out.action, graph.num_nodes, graph.transposition_hits

  return search


def run(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--positions", type=int, default=48)
  parser.add_argument("--simulations", default="64,256,1024")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument(
    "--num-parallel", default="1", help="comma-separated K: playouts per game per step (default 1)"
  )
  parser.add_argument("--quick", action="store_true", help="16 positions, S = 64,256")
  parser.add_argument(
    "--all", action="store_true", help="keep positions with a four available at once (not quiet)"
  )
  args = parser.parse_args(argv)
  num_positions = 16 if args.quick else args.positions
  simulations = [64, 256] if args.quick else [int(s) for s in args.simulations.split(",")]

  env_name = "connect_four"
  start = time.perf_counter()
  positions = random_positions(num_positions, seed=args.seed, quiet=not args.all)
  solve_seconds = time.perf_counter() - start
  import pgx

  env = pgx.make(env_name)
  game = make_game(env, evaluators.rollout_evaluator(env))
  state = batch_states(game, [moves for moves, _ in positions])
  optimal = [{a for a, v in values.items() if v == max(values.values())} for _, values in positions]
  share_optimal = np.mean([len(o) / len(v) for o, (_, v) in zip(optimal, positions)])

  rows = []
  parallel = [int(k) for k in args.num_parallel.split(",")]
  for num_simulations in simulations:
    for transpositions, num_parallel in [(t, k) for k in parallel for t in (True, False)]:
      search = make_search(
        game, num_simulations, transpositions=transpositions, num_parallel=num_parallel
      )
      start = time.perf_counter()
      actions, nodes, hits = jax.block_until_ready(search(jax.random.PRNGKey(args.seed), state))
      seconds = time.perf_counter() - start
      correct = np.array([int(a) in o for a, o in zip(np.asarray(actions), optimal)])
      mode = "MCGS" if transpositions else "MCTS"
      rows.append(
        (
          num_simulations,
          mode if num_parallel == 1 else f"{mode}, K={num_parallel}",
          correct.mean(),
          correct.sum(),
          float(np.mean(nodes)),
          float(np.mean(hits)),
          seconds,
        )
      )
      print(rows[-1], flush=True)

  lines = [
    f"## Connect-four end-game accuracy (date {datetime.date.today().isoformat()}, "
    f"2-core CPU, jax {jax.__version__})",
    "",
    f"{num_positions} positions from random play with 10-14 empty cells, not over, "
    f"{'' if args.all else 'quiet (no four available at once to either player), '}"
    f"moves not all equal by the solver (on average {100 * share_optimal:.0f}% of "
    f"the legal moves are optimal, i.e. a random legal move is right that often); "
    f"`uct_policy`, c = {C}, random-rollout evaluator (1 rollout), capacity S + 1, "
    f"all positions in one jitted batch per row. Solving took {solve_seconds:.1f} s. "
    "Regenerate: `python -m benchmarks strength --part endgame_accuracy "
    f"--positions {num_positions} "
    f"--simulations {','.join(map(str, simulations))}{' --all' if args.all else ''} "
    f"--num-parallel {args.num_parallel}`. K: playouts per game per step "
    f"(`num_parallel`, virtual loss).",
    "",
    "| S | mode | optimal move chosen | nodes used (mean) | transposition hits (mean) "
    "| time (compile + run) |",
    "|---|---|---|---|---|---|",
  ]
  for s, mode, accuracy, count, nodes, hits, seconds in rows:
    lines.append(
      f"| {s} | {mode} | {100 * accuracy:.1f}% ({count}/{num_positions}) | "
      f"{nodes:.0f} | {hits:.0f} | {seconds:.1f} s |"
    )
  return record.section(lines)
