"""Chance nodes: 2048 played by Stochastic MuZero on a graph, on a tree and by mctx;
speed against `mctx.stochastic_muzero_policy`; convergence to exact expectimax on a
2x2 board.

Three parts, each printing markdown tables (the rows recorded in RESULTS.md):

  --part play         2048 games (4x4) at each of --simulations, same evaluator for
                      graph, tree and mctx: mean score with a 95% interval, largest
                      tiles, moves, nodes and transposition hits per move.
  --part speed        seconds per search, B = --speed-batch, S = --speed-simulations,
                      on random 2048 positions, uniform evaluator (the search's own
                      cost), after compilation; median of --repeats.
  --part convergence  random 2x2 positions: mean |Q(root) - V*| and mean regret of the
                      most visited move against exact expectimax, graph and tree, at
                      each of --convergence-simulations.

Usage: python -m benchmarks.stochastic [--part play,speed,convergence] [--games 32]
         [--simulations 64,256] [--evaluator uniform|rollout] [--max-moves N] ...
"""

import argparse
import json
import os
import platform
import time

import jax
import numpy as np

from mcgs_jax import stochastic_muzero_policy
from mcgs_jax.apps.cli import play as play_command
from mcgs_jax.games import expectimax, play2048


def play_part(args):
  rows = []
  for num_simulations, games in zip(args.simulations, args.games, strict=True):
    config = play_command.PlayConfig(
      num_games=games,
      num_simulations=num_simulations,
      evaluator=args.evaluator,
      rollout_steps=args.rollout_steps,
      modes=tuple(args.modes),
      max_moves=args.max_moves,
      seed=args.seed,
      stop_rule=args.stop_rule,
    )
    result = play_command.play_games(config, progress=True)
    print(play_command.format_results(result), flush=True)
    rows.append(result)
  print(
    "\n| S | games | mode | mean score [95%] | largest tile: games | moves (mean) | "
    "finished | nodes/move | hits/move | seconds |"
  )
  print("|---|---|---|---|---|---|---|---|---|---|")
  for result in rows:
    config = result["config"]
    for mode, stats in result["modes"].items():
      low, high = stats["score_ci95"]
      tiles = ", ".join(
        f"{tile}: {n}"
        for tile, n in sorted(stats["largest_tiles"].items(), key=lambda kv: int(kv[0]))
      )
      print(
        f"| {config['num_simulations']} | {config['num_games']} | {mode} | "
        f"{stats['mean_score']:.0f} [{low:.0f}, {high:.0f}] | {tiles} | "
        f"{stats['mean_moves']:.0f} | {stats['finished']} | "
        f"{stats['nodes_per_move']:.1f} | {stats['transposition_hits_per_move']:.1f} | "
        f"{stats['seconds']:.0f} |"
      )
  return rows


def speed_part(args):
  import mctx

  batch_size, num_simulations = args.speed_batch, args.speed_simulations
  game = play2048.make_2048(play2048.uniform_evaluator())
  chance_game = play2048.make_2048(play2048.uniform_evaluator(), reward_on="chance")
  boards = jax.jit(game.random_positions, static_argnums=(1, 2))(
    jax.random.PRNGKey(args.seed), batch_size, 100
  )

  def ours(transpositions):
    @jax.jit
    def run(key):
      out = stochastic_muzero_policy(
        None,
        key,
        game.root(None, key, boards),
        game.decision_recurrent_fn,
        game.chance_recurrent_fn,
        num_simulations,
        invalid_actions=game.invalid_actions(boards),
        transpositions=transpositions,
        hash_fn=game.hash_fn,
        afterstate_hash_fn=game.afterstate_hash_fn,
        **_graph_keywords(args),
      )
      return out.action, out.search_graph.num_nodes, out.search_graph.transposition_hits

    return run

  @jax.jit
  def theirs(key):
    root = chance_game.root(None, key, boards)
    out = mctx.stochastic_muzero_policy(
      None,
      key,
      mctx.RootFnOutput(prior_logits=root.prior_logits, value=root.value, embedding=root.embedding),
      chance_game.decision_recurrent_fn,
      chance_game.chance_recurrent_fn,
      num_simulations,
      invalid_actions=chance_game.invalid_actions(boards),
    )
    nodes = jax.numpy.sum(out.search_tree.node_visits > 0, axis=-1)
    return out.action, nodes, jax.numpy.zeros_like(nodes)

  rows = []
  runs = {"mctx": theirs, "tree": ours(False), "graph": ours(True)}
  for name, run in ((name, runs[name]) for name in args.modes):
    start = time.perf_counter()
    _, nodes, hits = jax.block_until_ready(run(jax.random.PRNGKey(0)))
    compile_seconds = time.perf_counter() - start
    times = []
    for repeat in range(args.repeats):
      start = time.perf_counter()
      jax.block_until_ready(run(jax.random.PRNGKey(repeat + 1)))
      times.append(time.perf_counter() - start)
    rows.append(
      (name, float(np.median(times)), compile_seconds, float(np.mean(nodes)), float(np.mean(hits)))
    )
    print(
      f"{name}: {np.median(times):.3f} s per search (median of {args.repeats}), "
      f"first call {compile_seconds:.1f} s",
      flush=True,
    )
  base = rows[0][1]  # the first of --modes (mctx by default)
  print(
    "\n| policy | B | S | seconds per search | vs mctx | first call (compile) | "
    "nodes | transposition hits |"
  )
  print("|---|---|---|---|---|---|---|---|")
  for name, seconds, compile_seconds, nodes, hits in rows:
    print(
      f"| {name} | {batch_size} | {num_simulations} | {seconds:.3f} | "
      f"{seconds / base:.2f}x | {compile_seconds:.1f} s | {nodes:.1f} | {hits:.1f} |"
    )
  print(f"(stop_rule: {args.stop_rule or 'library default'})")
  return rows


def convergence_part(args):
  game = play2048.make_2048(play2048.rollout_evaluator(48), size=2)
  positions = args.positions
  boards = jax.jit(game.random_positions, static_argnums=(1, 2))(
    jax.random.PRNGKey(args.seed + 5), positions, 12
  )
  boards_np = np.asarray(boards)
  values = np.array([expectimax.value(board) for board in boards_np])
  action_values = np.stack([expectimax.action_values(board) for board in boards_np])
  print(
    f"{positions} random 2x2 positions; exact values: mean {values.mean():.2f}; "
    f"{expectimax.solver(2).num_states} states solved",
    flush=True,
  )
  rows = []
  for num_simulations in args.convergence_simulations:
    for mode in [mode for mode in ("graph", "tree") if mode in args.modes]:
      run = jax.jit(
        lambda key, s=num_simulations, graph=mode == "graph": stochastic_muzero_policy(
          None,
          key,
          game.root(None, key, boards),
          game.decision_recurrent_fn,
          game.chance_recurrent_fn,
          s,
          invalid_actions=game.invalid_actions(boards),
          transpositions=graph,
          hash_fn=game.hash_fn,
          afterstate_hash_fn=game.afterstate_hash_fn,
          dirichlet_fraction=0.0,
          **_graph_keywords(args),
        )
      )
      out = run(jax.random.PRNGKey(1))
      summary = out.search_graph.summary()
      chosen = np.argmax(np.asarray(summary.visit_counts), axis=-1)
      regret = values - action_values[np.arange(positions), chosen]
      error = np.abs(np.asarray(summary.value) - values)
      rows.append(
        (
          num_simulations,
          mode,
          error.mean(),
          regret.mean(),
          float(np.mean(regret < 1e-6)),
          float(np.mean(out.search_graph.num_nodes)),
          float(np.mean(out.search_graph.transposition_hits)),
        )
      )
      print(rows[-1], flush=True)
  print(
    "\n| S | mode | mean abs(Q(root) - V*) | mean regret of the move | optimal moves | "
    "nodes | transposition hits |"
  )
  print("|---|---|---|---|---|---|---|")
  for num_simulations, mode, error, regret, optimal, nodes, hits in rows:
    print(
      f"| {num_simulations} | {mode} | {error:.2f} | {regret:.3f} | {optimal:.0%} | "
      f"{nodes:.0f} | {hits:.0f} |"
    )
  return rows


def _graph_keywords(args):
  return {} if args.stop_rule is None else {"stop_rule": args.stop_rule}


def _ints(text):
  return [int(x) for x in text.split(",") if x]


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--part", default="play,speed,convergence")
  parser.add_argument("--simulations", type=_ints, default=[64, 256])
  parser.add_argument(
    "--games", type=_ints, default=[32, 32], help="games per mode at each of --simulations"
  )
  parser.add_argument("--evaluator", default="uniform", choices=("uniform", "rollout"))
  parser.add_argument("--rollout-steps", type=int, default=16)
  parser.add_argument("--modes", default="graph,tree,mctx")
  parser.add_argument("--max-moves", type=int, default=None)
  parser.add_argument(
    "--stop-rule",
    choices=("catch_up", "value_lag", "never"),
    help="graph mode's stop_rule (default: the library's)",
  )
  parser.add_argument("--speed-batch", type=int, default=1024)
  parser.add_argument("--speed-simulations", type=int, default=64)
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--positions", type=int, default=64)
  parser.add_argument("--convergence-simulations", type=_ints, default=[16, 64, 256, 1024, 4096])
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
  args = parser.parse_args()
  args.modes = args.modes.split(",")
  if len(args.games) == 1:
    args.games = args.games * len(args.simulations)
  print(
    f"# {time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()}, "
    f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, jax {jax.__version__}, "
    f"{jax.devices()[0].platform}",
    flush=True,
  )
  results = {}
  parts = args.part.split(",")
  if "convergence" in parts:
    results["convergence"] = convergence_part(args)
  if "speed" in parts:
    results["speed"] = speed_part(args)
  if "play" in parts:
    results["play"] = play_part(args)
  if args.json:
    with open(args.json, "w", encoding="utf-8") as file:
      json.dump(results, file, default=float)


if __name__ == "__main__":
  main()
