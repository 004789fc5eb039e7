"""Switching from mctx: this library's default agent against the real mctx, one script.

Every match is connect four, the built-in trained network on both sides
(`mcgs_jax.apps.cli.arena_parser.builtin_checkpoint`), muzero playing greedily without
root noise, `--games` games from `--games / 2` random 3-ply openings each played with
both colours, seed `--seed`. The agents:

  * default: this library's default agent, `Agent(policy="muzero", ...)`: a graph
    (MCGS) kept between moves (`reuse`) that proves exact values (`solver`);
  * graph+reuse: the same without the solver;
  * graph: a graph searched from scratch, no solver (the graph alone);
  * tree+reuse: a tree kept between moves, no solver (reuse alone);
  * mctx: `mctx.muzero_policy` on the same network (`Agent(engine="mctx")`).

Tables (`--tables`, comma-separated, default all):

  * `equal-sims`: default, graph+reuse, graph and tree+reuse against mctx, and
    default against tree+reuse, all at `--simulations` (64) per move;
  * `equal-time`: default at `--simulations` against mctx given the simulations that
    take the same time per move (`play_match(..., equal_time=True)`);
  * `per-compute`: default at 8, 16, 32 and 64 simulations against mctx at 256.

Each row prints W-D-L, A's score and Elo over B with 95% intervals, and each side's
search seconds per ply of the whole batch (after the first ply, which compiles).
Simulations are new playouts per move: a kept graph's earlier visits are not counted.
Run it alone on the machine (the seconds are wall time).

    python -m benchmarks strength --part switching [--games 256] [--seed 11] [--tables ...]
"""

import argparse
import dataclasses
import datetime
import os
import platform
import time

import jax

from benchmarks import record
from mcgs_jax.apps import arena, train
from mcgs_jax.apps.cli.arena_parser import builtin_checkpoint

TABLES = ("equal-sims", "equal-time", "per-compute")
MCTX_STRONG = 256


def agents(apply_fn, simulations: int) -> dict[str, arena.Agent]:
  """The agents of the tables at `simulations` per move."""
  base = arena.Agent(
    policy="muzero", evaluator="network", num_simulations=simulations, apply_fn=apply_fn
  )
  return {
    "default": dataclasses.replace(base, name="default (graph + reuse + solver)"),
    "graph+reuse": dataclasses.replace(base, solver=False, name="graph + reuse"),
    "graph": dataclasses.replace(base, reuse=False, solver=False, name="graph, no reuse"),
    "tree+reuse": dataclasses.replace(
      base, transpositions=False, solver=False, name="tree + reuse"
    ),
    "mctx": arena.Agent(
      policy="muzero",
      evaluator="network",
      num_simulations=simulations,
      engine="mctx",
      apply_fn=apply_fn,
      name="mctx.muzero_policy",
    ),
  }


def row(result: arena.MatchResult) -> str:
  a, b = result.agents["a"], result.agents["b"]
  # Labelled with the simulations played (equal time changes B's).
  a_name = f"{a['name']}, {a['num_simulations']}"
  b_name = f"{b['name']}, {b['num_simulations']}"
  a_time = result.timing["a"]["search_seconds_per_ply"]
  b_time = result.timing["b"]["search_seconds_per_ply"]
  low, high = result.elo_ci95
  ratio = a_time / b_time
  return (
    f"| {a_name} | {b_name} | {result.wins}-{result.draws}-{result.losses} | "
    f"{result.score:.3f} | {result.elo:+.0f} [{low:+.0f}, {high:+.0f}] | "
    f"{a['mean_nodes']:.0f} / {b['mean_nodes']:.0f} | "
    f"{a_time:.4f} / {b_time:.4f} ({ratio:.2f}) | "
    f"{result.seconds:.0f} s |"
  )


HEADER = [
  "| A | B | A's W-D-L | score | Elo of A over B [95%] | nodes / move, A / B "
  "| search s / ply, A / B (A/B) | match time |",
  "|---|---|---|---|---|---|---|---|",
]


def run(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--games", type=int, default=256)
  parser.add_argument("--seed", type=int, default=11)
  parser.add_argument("--simulations", type=int, default=64)
  parser.add_argument("--openings", type=int, default=3)
  parser.add_argument("--tables", default=",".join(TABLES))
  args = parser.parse_args(argv)
  tables = [name for name in args.tables.split(",") if name]
  unknown = sorted(set(tables) - set(TABLES))
  if unknown:
    parser.error(f"unknown tables {unknown}; expected some of {TABLES}")

  game = arena.two_player_game("connect_four")
  apply_fn, params, _ = train.load_network(builtin_checkpoint("connect_four"), game.env)
  load = os.getloadavg()
  match = lambda a, b, **kw: arena.play_match(
    game,
    a,
    b,
    num_games=args.games,
    seed=args.seed,
    params_a=params,
    params_b=params,
    opening_moves=args.openings,
    **kw,
  )
  lines = [
    f"## Switching from mctx: the default agent against mctx (`benchmarks/switching.py`, "
    f"date {datetime.date.today().isoformat()}, {os.cpu_count()}-core CPU "
    f"({platform.processor() or platform.machine()}), load average before "
    f"{load[0]:.1f}, jax {jax.__version__})",
    "",
    f"Connect four, the built-in network (40 AlphaZero iterations) on both sides, muzero "
    f"greedy without noise, {args.games} games from {args.games // 2} random "
    f"{args.openings}-ply openings with both colours, seed {args.seed}. Simulations are "
    "new playouts per move (what a kept graph already holds is not counted). Search "
    f"seconds per ply: one search of all {args.games} games, `reroot` included, wall "
    "time, after the first (compiling) ply. Regenerate: "
    "`python -m benchmarks strength --part switching "
    f"--games {args.games} --seed {args.seed} --tables {','.join(tables)}`.",
  ]
  started = time.perf_counter()
  at = agents(apply_fn, args.simulations)
  if "equal-sims" in tables:
    lines += ["", f"Equal simulations ({args.simulations} per move):", ""] + HEADER
    for a_name, b_name in (
      ("default", "mctx"),
      ("graph+reuse", "mctx"),
      ("graph", "mctx"),
      ("tree+reuse", "mctx"),
      ("default", "tree+reuse"),
    ):
      lines.append(row(match(at[a_name], at[b_name])))
      print(lines[-1], flush=True)
  if "equal-time" in tables:
    result = match(at["default"], at["mctx"], equal_time=True)
    calibration = result.calibration
    lines += [
      "",
      f"Equal time per move: A at {args.simulations} simulations, B's simulations chosen "
      f"before the match from timings on its positions (A {calibration['a_seconds']:.4f} s "
      f"per search; B measured at "
      f"{', '.join(f'{int(n)}: {t:.3f} s' for n, t in calibration['measurements'])}; "
      f"chosen {calibration['b_simulations']}):",
      "",
    ] + HEADER
    lines.append(row(result))
    print(lines[-1], flush=True)
  if "per-compute" in tables:
    strong = agents(apply_fn, MCTX_STRONG)["mctx"]
    lines += ["", f"Strength per compute: the default agent against mctx at {MCTX_STRONG}:", ""]
    lines += HEADER
    for simulations in (8, 16, 32, 64):
      lines.append(row(match(agents(apply_fn, simulations)["default"], strong)))
      print(lines[-1], flush=True)
  lines += ["", f"Total {time.perf_counter() - started:.0f} s."]
  return record.section(lines)
