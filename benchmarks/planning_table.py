"""The planning table: graph, tree and mctx on jumanji's environments, against exact
optima, at equal simulations and at equal time per step, in one run
(`mcgs-jax evaluate` for every row; docs/planning.md shows the table).

Each case is an environment, an evaluator (random rollouts, or a network trained by
`mcgs-jax train` and shipped under `mcgs_jax/apps/checkpoints/`) and a list of
simulation budgets. For every budget S the three engines play the same instances
(seed `--seed`, which no training run used): at S each (equal simulations), and with
`--equal-time` tree and mctx also at the simulations that take the graph's time per
step at S (measured first, `arena.calibrate_simulations`). Each row reports the mean
return, the solved share or the mean gap to the optimum, the transposition hits per
simulation and the search time per step; paired differences over the instances
(graph minus tree, graph minus mctx at equal simulations, with a 95% interval) say
whether a difference is more than the instances' spread. "4S": the graph at S
against the others at 4S, where both are in the list.

Run it alone on the machine (the load average is printed and written):

    python -m benchmarks planning --part planning_table --cases knapsack-network,sudoku-rollout
"""

import argparse
import datetime
import os
import platform

import numpy as np

from benchmarks import record
from mcgs_jax.apps.cli import evaluate_command

CHECKPOINTS = os.path.join(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mcgs_jax", "apps", "checkpoints"
)
# name -> (env id, evaluator, checkpoint file or None, simulations)
CASES = {
  "knapsack-rollout": ("Knapsack-v1", "rollout", None, (16, 64, 256)),
  "knapsack-network": ("Knapsack-v1", "network", "jumanji_knapsack.msgpack", (8, 32, 128)),
  "tsp-rollout": ("TSP-v1", "rollout", None, (16, 64, 256)),
  "tsp-network": ("TSP-v1", "network", "jumanji_tsp.msgpack", (8, 32, 128)),
  "sudoku-easy-rollout": ("Sudoku-very-easy-v0", "rollout", None, (16, 64)),
  "sudoku-rollout": ("Sudoku-v0", "rollout", None, (64, 256)),
  "rubiks-rollout": ("RubiksCube-partly-scrambled-v0", "rollout", None, (64, 256)),
}


def run_case(name: str, simulations: int, args, equal_time: bool) -> dict:
  env, evaluator, checkpoint, _ = CASES[name]
  argv = ["--game", f"jumanji:{env}", "--instances", str(args.instances)]
  argv += ["--simulations", str(simulations), "--evaluator", evaluator, "--seed", str(args.seed)]
  if checkpoint is not None:
    argv += ["--checkpoint", os.path.join(CHECKPOINTS, checkpoint)]
  if equal_time:
    argv.append("--equal-time")
  report = evaluate_command.evaluate(evaluate_command.build_parser().parse_args(argv))
  report["load"] = os.getloadavg()[0]
  return report


def paired(report: dict, first: str, second: str) -> str:
  """`mean [low, high]` of the per-instance return difference `first - second` (95%,
  normal approximation), or '-' when either engine is missing."""
  rows = {row["agent"]: np.asarray(row["returns"]) for row in report["engines"]}
  if first not in rows or second not in rows:
    return "-"
  difference = rows[first] - rows[second]
  mean = float(np.mean(difference))
  half = 1.96 * np.std(difference, ddof=1) / np.sqrt(len(difference)) if len(difference) > 1 else 0
  return f"{mean:+.4f} [{mean - half:+.4f}, {mean + half:+.4f}]"


def quality(row: dict) -> str:
  if row["solved"] is not None:
    return f"{100 * row['solved']:.1f}% solved"
  if row["mean_gap"] is not None:
    return f"gap {100 * row['mean_gap']:.2f}%"
  return "-"


def table_lines(results: list[tuple[str, int, str, dict]]) -> list[str]:
  lines = [
    "| case | S | held equal | engine | sims | return | solved or gap | hits/sim | ms/step |",
    "|---|---|---|---|---|---|---|---|---|",
  ]
  for name, simulations, held, report in results:
    for row in report["engines"]:
      lines.append(
        f"| {name} | {simulations} | {held} | {row['agent']} | {row['simulations']} | "
        f"{row['mean_return']:.4f} | {quality(row)} | {row['hits_per_simulation']:.3f} | "
        f"{1000 * row['search_seconds']:.1f} |"
      )
  lines += [
    "",
    "Paired return differences over the instances at equal simulations (95%):",
    "",
    "| case | S | graph - tree | graph - mctx |",
    "|---|---|---|---|",
  ]
  for name, simulations, held, report in results:
    if held == "simulations":
      lines.append(
        f"| {name} | {simulations} | {paired(report, 'graph', 'tree')} | "
        f"{paired(report, 'graph', 'mctx')} |"
      )
  return lines


def run(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--cases", default=",".join(CASES))
  parser.add_argument("--instances", type=int, default=64)
  parser.add_argument("--seed", type=int, default=7)
  parser.add_argument("--equal-time", action="store_true", help="also at equal time per step")
  args = parser.parse_args(argv)
  names = [name for name in args.cases.split(",") if name]
  if set(names) - set(CASES):
    parser.error(f"--cases: unknown {sorted(set(names) - set(CASES))}; known {list(CASES)}")
  results = []
  for name in names:
    for simulations in CASES[name][3]:
      for equal_time in (False, True) if args.equal_time else (False,):
        report = run_case(name, simulations, args, equal_time)
        results.append((name, simulations, "time" if equal_time else "simulations", report))
        print(f"{name} S={simulations} {'time' if equal_time else 'sims'} done", flush=True)
  loads = [report["load"] for *_, report in results]
  lines = [
    f"## Planning on jumanji: graph, tree and mctx against exact optima "
    f"({datetime.date.today().isoformat()})",
    "",
    f"`python -m benchmarks planning --part planning_table --cases {','.join(names)} --instances "
    f"{args.instances} --seed {args.seed}{' --equal-time' if args.equal_time else ''}` on "
    f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, alone (load "
    f"average {min(loads):.2f}-{max(loads):.2f}). Every engine plays the same "
    f"{args.instances} instances to their end, one search per step, the most visited move: "
    "graph (this library, transpositions merged, the graph kept between steps, the "
    "solver with the game's value bounds), tree (the same with transpositions=False), "
    "mctx (mctx.muzero_policy, a tree afresh every step). Held equal: simulations per "
    "step, or (time) the graph's time per step at S, the others given the simulations "
    "that take it. ms/step: one search of the whole batch.",
    "",
    *table_lines(results),
  ]
  return record.section(lines)
