"""The graph on pgx games besides connect four: where transpositions occur, what they buy.

Each row is one arena match at equal simulations per move between agent A, a graph
(MCGS) kept between moves, and agent B, a tree: kept between moves (`tree + reuse`,
the graph's own effect) or searched from scratch every move (`tree`, as mctx
searches). Both agents use the same policy and evaluator:

  * `uct`: `uct_policy` (c = 1.41) with one uniformly random rollout per evaluation;
  * `uniform`: `muzero_policy` with the uniform evaluator (zero logits, zero value:
    only terminal rewards inform the search), greedy, no root noise.

Games: `tic_tac_toe` (9 cells; every pair of move orders that place the same stones
meets) and `othello` (flips make fewer move orders meet). Every row reports nodes
and transposition hits per search of both agents beside the result (hits are 0 for
a tree by construction). Games start from `--openings` random plies, each opening
played with both colours.

Usage:
  python -m benchmarks.transposing_games [--games 256] [--seed 23]
      [--rows tic_tac_toe:uct:16,...] [--write]
"""

import argparse
import dataclasses
import datetime
import os
import platform
import time

import jax

from benchmarks import results_section
from mcgs_jax.apps.arena import match as arena

# game:evaluator:simulations:opening plies.
DEFAULT_ROWS = (
  "tic_tac_toe:uct:32:2",
  "tic_tac_toe:uct:128:2",
  "tic_tac_toe:uniform:128:2",
  "othello:uct:128:3",
)
OPPONENTS = ("tree+reuse", "tree")


def agents(evaluator: str, simulations: int) -> dict[str, arena.Agent]:
  """A (graph + reuse) and the two trees, with `evaluator` at `simulations` per move."""
  policy = "uct" if evaluator == "uct" else "muzero"
  base = arena.Agent(
    policy=policy,
    evaluator="rollout" if evaluator == "uct" else "uniform",
    num_simulations=simulations,
    reuse=True,
    solver=False,  # the graph against the tree, nothing else changed
    name="graph + reuse",
  )
  return {
    "graph+reuse": base,
    "tree+reuse": dataclasses.replace(base, transpositions=False, name="tree + reuse"),
    "tree": dataclasses.replace(base, transpositions=False, reuse=False, name="tree"),
  }


def parse_row(text: str) -> tuple[str, str, int, int]:
  game, evaluator, simulations, openings = text.split(":")
  if evaluator not in ("uct", "uniform"):
    raise ValueError(f"evaluator must be uct or uniform in row {text!r}")
  return game, evaluator, int(simulations), int(openings)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--games", type=int, default=256)
  parser.add_argument("--seed", type=int, default=23)
  parser.add_argument("--rows", default=",".join(DEFAULT_ROWS))
  parser.add_argument("--opponents", default=",".join(OPPONENTS))
  parser.add_argument("--write", action="store_true")
  args = parser.parse_args(argv)
  rows = [parse_row(text) for text in args.rows.split(",") if text]
  opponents = [name for name in args.opponents.split(",") if name]
  if not set(opponents) <= set(OPPONENTS):
    parser.error(f"--opponents must come from {OPPONENTS}")

  load = os.getloadavg()
  lines = [
    f"## The graph on other pgx games (`benchmarks/transposing_games.py`, date "
    f"{datetime.date.today().isoformat()}, {os.cpu_count()}-core CPU "
    f"({platform.processor() or platform.machine()}), load average before {load[0]:.1f}, "
    f"jax {jax.__version__})",
    "",
    f"A: a graph kept between moves; B: a tree, kept between moves or searched from "
    f"scratch; same policy, evaluator and simulations per move. {args.games} games per "
    f"row from {args.games // 2} random openings, each with both colours, seed "
    f"{args.seed}. `uct`: `uct_policy`, c = 1.41, one random rollout; `uniform`: "
    f"`muzero_policy` greedy with zero logits and value. Nodes and hits: mean per "
    f"search. Regenerate: `python -m benchmarks.transposing_games --games {args.games} "
    f"--seed {args.seed} --rows {args.rows} --opponents {args.opponents}`.",
    "",
    "| game | search | S | openings | B | A's W-D-L | score | Elo of graph over B [95%] "
    "| nodes / search, A / B | hits / search, A / B | search s / ply, A / B | match time |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  started = time.perf_counter()
  for game_name, evaluator, simulations, openings in rows:
    game = arena.two_player_game(game_name)
    team = agents(evaluator, simulations)
    for opponent in opponents:
      result = arena.play_match(
        game,
        team["graph+reuse"],
        team[opponent],
        num_games=args.games,
        seed=args.seed,
        opening_moves=openings,
      )
      a, b = result.agents["a"], result.agents["b"]
      low, high = result.elo_ci95
      lines.append(
        f"| {game_name} | {evaluator} | {simulations} | {openings} | {team[opponent].name} | "
        f"{result.wins}-{result.draws}-{result.losses} | {result.score:.3f} | "
        f"{result.elo:+.0f} [{low:+.0f}, {high:+.0f}] | "
        f"{a['mean_nodes']:.1f} / {b['mean_nodes']:.1f} | "
        f"{a['mean_transposition_hits']:.1f} / {b['mean_transposition_hits']:.1f} | "
        f"{result.timing['a']['search_seconds_per_ply']:.3f} / "
        f"{result.timing['b']['search_seconds_per_ply']:.3f} | {result.seconds:.0f} s |"
      )
      print(lines[-1], flush=True)
  lines += ["", f"Total {time.perf_counter() - started:.0f} s."]
  results_section.emit(lines, write=args.write)


if __name__ == "__main__":
  main()
