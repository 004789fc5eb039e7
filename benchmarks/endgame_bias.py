"""Is the graph behind the tree on solved connect-four end games? Noise or bias.

Earlier single runs of `benchmarks/endgame_accuracy.py` (one search per position, 160
positions) put UCT + random rollouts on a graph 1-3 points behind the same search on
a tree at 256 simulations. One search per position cannot tell a bias from the
search's own randomness, so this script measures the difference the way a paired
experiment does:

  * positions: from random play with 10-14 empty cells, quiet (no four available at
    once), with exactly one optimal move by the exact solver (`--single-best`, the
    default; `--any-best` keeps every position whose moves are not all equal), drawn
    from position seeds `--position-seeds` that no other benchmark uses;
  * searches: every position is searched `--searches` times by every variant, each
    search with its own key (one jitted batch of positions x searches per variant);
  * score: per position, the share of its searches whose most visited root action is
    optimal; a variant's accuracy is the mean over positions, and its difference from
    the tree is the mean of the per-position differences with a 95% interval from
    their standard error (positions are the independent unit; searches only lower
    each position's noise).

Variants: `tree` (`transpositions=False`), `graph` (the default graph search), and
graph searches that change one thing about how a child known from other parents is
treated: `graph catch_up` (stop a playout at a child visited more often than its
edge, KataGo's rule), `graph fold` (`fold_evaluations`: a playout ending at an
existing node adds its rollout to that node), `graph solver` (exact values proven and
used; both the tree and the graph may use it: `tree solver`).

Usage:
  python -m benchmarks.endgame_bias [--positions 160] [--searches 8]
      [--position-seeds 101,102,103] [--simulations 256] [--variants ...] [--write]
"""

import argparse
import datetime
import os
import platform
import time

import jax
import numpy as np

from benchmarks import endgame_accuracy, results_section
from mcgs_jax.games import evaluators
from mcgs_jax.games.adapter import make_game

C = endgame_accuracy.C
VARIANTS = {
  "tree": {"transpositions": False},
  "graph": {},
  "graph catch_up": {"stop_rule": "catch_up"},
  "graph fold": {"fold_evaluations": True},
  "graph solver": {"solver": True},
  "tree solver": {"transpositions": False, "solver": True},
}


def single_best(positions):
  """The positions with exactly one optimal move."""
  kept = []
  for moves, values in positions:
    best = max(values.values())
    if sum(value == best for value in values.values()) == 1:
      kept.append((moves, values))
  return kept


def draw_positions(count: int, seeds: list[int], single: bool):
  """`count` positions per seed (solver-checked), in seed order."""
  drawn = []
  for seed in seeds:
    found: list = []
    batch_seed = seed
    # Draw in rounds with derived seeds until `count` positions pass the filter.
    while len(found) < count:
      candidates = endgame_accuracy.random_positions(2 * count, seed=batch_seed)
      found += single_best(candidates) if single else candidates
      batch_seed += 100_003
    drawn += found[:count]
  return drawn


def interval(differences: np.ndarray) -> tuple[float, float, float]:
  """Mean and 95% normal interval of per-position differences, in points (x100)."""
  mean = float(differences.mean())
  error = float(differences.std(ddof=1) / np.sqrt(len(differences)))
  return 100 * mean, 100 * (mean - 1.96 * error), 100 * (mean + 1.96 * error)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--positions", type=int, default=160, help="positions per seed")
  parser.add_argument("--searches", type=int, default=8, help="searches per position")
  parser.add_argument("--position-seeds", default="101,102,103")
  parser.add_argument("--simulations", default="256")
  parser.add_argument("--variants", default="tree,graph,graph catch_up,graph fold")
  parser.add_argument("--seed", type=int, default=0, help="search key")
  parser.add_argument("--any-best", action="store_true")
  parser.add_argument("--write", action="store_true")
  args = parser.parse_args(argv)
  seeds = [int(s) for s in args.position_seeds.split(",")]
  variants = [v.strip() for v in args.variants.split(",") if v.strip()]
  unknown = sorted(set(variants) - set(VARIANTS))
  if unknown or "tree" not in variants:
    parser.error(f"variants must include 'tree' and come from {sorted(VARIANTS)}")
  simulations = [int(s) for s in args.simulations.split(",")]

  started = time.perf_counter()
  positions = draw_positions(args.positions, seeds, single=not args.any_best)
  solve_seconds = time.perf_counter() - started
  import pgx

  env = pgx.make("connect_four")
  game = make_game(env, evaluators.rollout_evaluator(env))
  move_lists = [moves for moves, _ in positions]
  state = endgame_accuracy.batch_states(game, move_lists * args.searches)
  optimal = [{a for a, v in values.items() if v == max(values.values())} for _, values in positions]
  legal_share = np.mean([len(o) / len(v) for o, (_, v) in zip(optimal, positions)])
  count = len(positions)
  load = os.getloadavg()

  rows = []
  for num_simulations in simulations:
    scores = {}
    for name in variants:
      search = endgame_accuracy.make_search(game, num_simulations, **VARIANTS[name])
      start = time.perf_counter()
      actions, nodes, hits = jax.block_until_ready(search(jax.random.PRNGKey(args.seed), state))
      seconds = time.perf_counter() - start
      actions = np.asarray(actions).reshape(args.searches, count)
      correct = np.array(
        [[int(actions[r, p]) in optimal[p] for p in range(count)] for r in range(args.searches)]
      )
      scores[name] = correct.mean(axis=0)  # [positions]: share of searches right
      per_seed = [
        100 * scores[name][i * args.positions : (i + 1) * args.positions].mean()
        for i in range(len(seeds))
      ]
      rows.append(
        {
          "simulations": num_simulations,
          "variant": name,
          "accuracy": 100 * scores[name].mean(),
          "per_seed": per_seed,
          "difference": None if name == "tree" else interval(scores[name] - scores["tree"]),
          "nodes": float(np.mean(nodes)),
          "hits": float(np.mean(hits)),
          "seconds": seconds,
        }
      )
      print(rows[-1], flush=True)

  header = (
    f"## Connect-four end games: is the graph behind the tree? (`benchmarks/endgame_bias.py`, "
    f"date {datetime.date.today().isoformat()}, {os.cpu_count()}-core CPU "
    f"({platform.processor() or platform.machine()}), load average before {load[0]:.1f}, "
    f"jax {jax.__version__})"
  )
  filter_text = "exactly one optimal move" if not args.any_best else "moves not all equal"
  lines = [
    header,
    "",
    f"{count} positions ({args.positions} from each of the position seeds "
    f"{', '.join(map(str, seeds))}, seeds no other benchmark uses): random play to 10-14 "
    f"empty cells, quiet, {filter_text} by the exact solver (a random legal move is "
    f"optimal {100 * legal_share:.0f}% of the time). `uct_policy`, c = {C}, one random "
    f"rollout per evaluation, capacity S + 1; every position searched {args.searches} "
    f"times with independent keys by every variant. Accuracy: mean over positions of "
    f"the share of searches choosing an optimal move; the difference from the tree is "
    f"paired by position, 95% interval from the standard error over positions. "
    f"Solving took {solve_seconds:.0f} s. Regenerate: `python -m benchmarks.endgame_bias "
    f"--positions {args.positions} --searches {args.searches} --position-seeds "
    f"{args.position_seeds} --simulations {args.simulations} --variants "
    f'"{",".join(variants)}"{" --any-best" if args.any_best else ""}`.',
    "",
    "| S | variant | optimal (%) | per position seed (%) | minus tree, points [95%] "
    "| nodes / search | hits / search | time |",
    "|---|---|---|---|---|---|---|---|",
  ]
  for row in rows:
    difference = row["difference"]
    difference_text = ""
    if difference is not None:
      difference_text = f"{difference[0]:+.1f} [{difference[1]:+.1f}, {difference[2]:+.1f}]"
    lines.append(
      f"| {row['simulations']} | {row['variant']} | {row['accuracy']:.1f} | "
      f"{' / '.join(f'{s:.1f}' for s in row['per_seed'])} | {difference_text} | "
      f"{row['nodes']:.0f} | {row['hits']:.0f} | {row['seconds']:.0f} s |"
    )
  results_section.emit(lines, write=args.write)


if __name__ == "__main__":
  main()
