"""`mcgs-jax evaluate`: search agents on N instances of a planning problem, against its
exact optimum.

    mcgs-jax evaluate --game jumanji:Knapsack-v1 --instances 32 --simulations 64

plays the same N instances of a one-player game (jumanji's environments:
`jumanji:<env id>`) to their end with each engine, in one batch per engine, one
search per step (the most visited move, no root noise):

  * `graph`: this library's search, transpositions merged (MCGS), the graph kept
    between steps (`--no-reuse`: searched afresh) and the MCTS-solver on
    (`--no-solver`: off), the game's value bounds given to it;
  * `tree`: the same search with `transpositions=False`;
  * `mctx`: DeepMind's `mctx.muzero_policy` (or `gumbel_muzero_policy` with
    `--policy gumbel`) on the same evaluator, a tree searched afresh every step.

It prints, per engine: the mean return, the share of instances solved (Sudoku,
Rubik's cube), the mean gap to the exact optimum (Knapsack, TSP: OR-Tools, see
`mcgs_jax.games.optima`) and the share played optimally, the steps per episode, the
nodes and transposition hits per simulation of its searches, and its search time per
step (one search of the whole batch; the first step, which compiles, left out).
`--equal-time` keeps the first engine's simulations and gives every other engine the
simulations that take the first engine's time per step (measured first on the
instances' initial states, `arena.calibrate_simulations`). `--json` prints one JSON
object instead, with every instance's return and optimum (null where unknown). The
evaluator is, by default, the network shipped with the package for the game
(Knapsack-v1, TSP-v1: `mcgs-jax train` runs, docs/planning.md), else random rollouts
(`--rollouts` per leaf); `--evaluator uniform | rollout | network` with
`--checkpoint FILE` (a network `mcgs-jax train` wrote for this game) chooses. Bad
input exits with status 2 and one line, before any search.
"""

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

from mcgs_jax.apps.cli.arena_parser import builtin_checkpoint
from mcgs_jax.apps.cli.args import (
  OneLineErrorParser,
  add_seed_argument,
  int_at_least,
  parse_or_status,
)
from mcgs_jax.apps.extras import missing_extra
from mcgs_jax.apps.registry import EVALUATOR_NAMES, MCTX_POLICY_NAMES

PROG = "mcgs-jax evaluate"
ENGINE_CHOICES = ("graph", "tree", "mctx")
MAX_INSTANCES = 100_000


def build_parser() -> argparse.ArgumentParser:
  parser = OneLineErrorParser(
    prog=PROG,
    description=__doc__.split("\n\n")[0],
    formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  parser.add_argument("--game", default="jumanji:Knapsack-v1", help="jumanji:<env id>")
  parser.add_argument("--instances", type=int_at_least(1, MAX_INSTANCES), default=32)
  parser.add_argument("--simulations", type=int_at_least(1, 100_000), default=64)
  parser.add_argument(
    "--engines",
    default=",".join(ENGINE_CHOICES),
    help="comma-separated, from graph, tree, mctx (default: all three)",
  )
  parser.add_argument("--policy", choices=MCTX_POLICY_NAMES, default="muzero")
  parser.add_argument(
    "--evaluator",
    choices=EVALUATOR_NAMES,
    default=None,
    help="default: network with the network shipped for the game (Knapsack, TSP), else rollout",
  )
  parser.add_argument("--rollouts", type=int_at_least(1, 1024), default=1)
  parser.add_argument("--checkpoint", help="the network of --evaluator network")
  parser.add_argument("--no-reuse", action="store_true", help="graph and tree: search afresh")
  parser.add_argument("--no-solver", action="store_true", help="graph and tree: no solver")
  parser.add_argument(
    "--equal-time",
    action="store_true",
    help="give every engine after the first the simulations that take its time per step",
  )
  add_seed_argument(parser)
  parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
  return parser


def _engines(text: str) -> list[str]:
  names = [name.strip() for name in text.split(",") if name.strip()]
  unknown = sorted(set(names) - set(ENGINE_CHOICES))
  if not names or unknown or len(set(names)) != len(names):
    raise ValueError(
      f"--engines: expected distinct names from {', '.join(ENGINE_CHOICES)}, got {text!r}"
    )
  return names


def _agents(args, apply_fn) -> list:
  """One arena `Agent` per engine of `args.engines`."""
  from mcgs_jax.apps.arena.agent import Agent

  common: dict[str, Any] = dict(
    policy=args.policy,
    evaluator=args.evaluator,
    num_simulations=args.simulations,
    num_rollouts=args.rollouts,
    apply_fn=apply_fn,
  )
  agents = []
  for name in _engines(args.engines):
    if name == "mctx":
      agents.append(Agent(engine="mctx", name="mctx", **common))
    else:
      agents.append(
        Agent(
          transpositions=name == "graph",
          reuse=not args.no_reuse,
          solver=not args.no_solver,
          name=name,
          **common,
        )
      )
  return agents


def _resolve_evaluator(args) -> None:
  """Sets `args.evaluator` where it was not given: `network` with `--checkpoint` or a
  network shipped for the game (`builtin_checkpoint`, then `args.checkpoint`), else
  `rollout`."""
  if args.evaluator is None:
    shipped = builtin_checkpoint(args.game)
    args.evaluator = "network" if args.checkpoint or shipped else "rollout"
  if args.evaluator == "network" and not args.checkpoint:
    args.checkpoint = builtin_checkpoint(args.game)


def _game_and_network(args):
  """`(game, apply_fn, params)`: the one-player game of `--game` and the network of
  `--evaluator network` (None, None otherwise)."""
  from mcgs_jax.apps import registry

  if not args.game.startswith("jumanji:"):
    raise ValueError(f"--game: expected a one-player game 'jumanji:<env id>', got {args.game!r}")
  try:
    game = registry.game_from_spec(args.game)
  except ValueError as error:
    raise ValueError(f"--game: {error}") from None
  if args.evaluator != "network":
    if args.checkpoint:
      raise ValueError("--checkpoint is for --evaluator network")
    return game, None, None
  if not args.checkpoint:
    raise ValueError(
      f"--evaluator network needs --checkpoint FILE (no network is shipped for {args.game})"
    )
  from mcgs_jax.apps.train.checkpoint_files import load_network

  apply_fn, params, _ = load_network(args.checkpoint, game.env)
  return game, apply_fn, params


def evaluate(args) -> dict[str, Any]:
  """Every engine's episodes on the same instances: the report `main` prints."""
  from mcgs_jax.apps import memory_estimates
  from mcgs_jax.apps.arena.calibration import calibrate_simulations
  from mcgs_jax.apps.planning import episodes

  _resolve_evaluator(args)
  game, apply_fn, params = _game_and_network(args)
  agents = _agents(args, apply_fn)
  state = episodes.instances(game, args.instances, args.seed)
  memory_estimates.check_memory(
    {agent.name: memory_estimates.estimated_search_bytes(game, agent, state) for agent in agents},
    owner="the evaluation",
    advice="fewer --instances or --simulations",
  )
  optimal = None
  calibrations = {}
  if args.equal_time:
    for index in range(1, len(agents)):
      agents[index], calibrations[agents[index].name] = calibrate_simulations(
        game, agents[0], agents[index], state, params_a=params, params_b=params, seed=args.seed
      )
  rows = []
  for agent in agents:
    result = episodes.play_episodes(
      game, agent, num_instances=args.instances, seed=args.seed, params=params, optimal=optimal
    )
    optimal = result.optimal  # solved once, for every engine
    rows.append({**result.summary(), "returns": result.returns.tolist()})
  return dict(
    game=args.game,
    optimal=None if optimal is None else [None if math.isnan(v) else v for v in optimal.tolist()],
    instances=args.instances,
    seed=args.seed,
    policy=args.policy,
    evaluator=args.evaluator,
    held_equal="time per step" if args.equal_time else "simulations per step",
    calibration=calibrations or None,
    key_contents=getattr(game.env, "key_contents", None),
    engines=rows,
  )


def _percent(value) -> str:
  return "-" if value is None else f"{100 * value:.1f}%"


def format_report(report: dict[str, Any]) -> str:
  """The report as a table, one row per engine."""
  lines = [
    f"{report['game']}: {report['instances']} instances (seed {report['seed']}), "
    f"{report['policy']} with {report['evaluator']} leaves; held equal: "
    f"{report['held_equal']}",
    f"{'engine':<8}{'sims':>7}{'return':>10}{'solved':>9}{'gap':>9}{'optimal':>9}"
    f"{'steps':>8}{'nodes':>8}{'hits/sim':>10}{'ms/step':>10}",
  ]
  for row in report["engines"]:
    lines.append(
      f"{row['agent']:<8}{row['simulations']:>7}{row['mean_return']:>10.4f}"
      f"{_percent(row['solved']):>9}{_percent(row['mean_gap']):>9}"
      f"{_percent(row['optimal_share']):>9}{row['mean_steps']:>8.1f}{row['nodes']:>8.1f}"
      f"{row['hits_per_simulation']:>10.3f}{1000 * row['search_seconds']:>10.1f}"
    )
  lines.append(
    "gap: mean (optimum - return) / |optimum| (OR-Tools' exact optimum); optimal: the "
    "share of instances at it; ms/step: one search of the whole batch, compiling aside"
  )
  return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
  """Runs `mcgs-jax evaluate`; returns the exit status (0 ok, 2 bad input)."""
  args = parse_or_status(build_parser(), argv)
  if isinstance(args, int):
    return args
  try:
    _engines(args.engines)
    for module in ("jumanji",) + (("mctx",) if "mctx" in args.engines else ()):
      problem = missing_extra(module)
      if problem:
        raise ValueError(f"{module}: {problem}")
    report = evaluate(args)
  except (ValueError, OSError) as error:
    print(f"{PROG}: error: {' '.join(str(error).split())}", file=sys.stderr)
    return 2
  print(json.dumps(report) if args.json else format_report(report))
  return 0
