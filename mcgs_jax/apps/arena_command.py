"""`mcgs-jax arena`: a match between two search agents, with its score and Elo.

Without arguments it plays the default match, graph against tree: agent A is UCT
with random-rollout leaves searching a graph (MCGS), agent B the same search on a
tree (MCTS), both with 512 simulations per move, 128 games of connect four from 64
random 3-ply openings, each played once with each colour assignment. Every flag
changes one side of that (`--a-...`, `--b-...`) or the match (`--game`, `--games`,
`--openings`, `--seed`). `--a-checkpoint FILE` gives A a trained network (a file
written by `mcgs_jax.apps.train`: `--checkpoint-dir` or `--save-params`) as its
evaluator, e.g. a trained network searching a graph against the same network on a
tree:

    mcgs-jax arena --a-policy muzero --b-policy muzero --a-simulations 64 \
        --b-simulations 64 --a-checkpoint net.msgpack --b-checkpoint net.msgpack

It prints the match and each agent's settings, the result from A's side (wins,
draws, losses, score, Elo difference with a 95% interval) and what each agent's
searches used (nodes and transposition hits per move). `--json` prints one JSON
object instead; `--plot FILE.png` draws the score with its interval and the nodes
per move of both agents. Progress goes to stderr: a line while the match step
compiles (during the first ply), then a bar of plies with the games finished so far.
`--simulations N` sets both agents' simulations (`--a-simulations`/`--b-simulations`
still override it). The report ends with a verdict from the score's 95% interval:
"A stronger (95%)", "B stronger (95%)" or "no significant difference at 95%".

Bad input exits with status 2 and a single line `mcgs-jax arena: error: ...` on
stderr.
"""

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from typing import Any

from mcgs_jax.apps.cli_args import OneLineErrorParser, int_at_least
from mcgs_jax.apps.registry import EVALUATOR_NAMES, POLICY_NAMES

PROG = "mcgs-jax arena"
EVALUATORS = EVALUATOR_NAMES  # "network" needs --a-checkpoint / --b-checkpoint
DEFAULTS: dict[str, Any] = dict(
  game="connect_four", policy="uct", evaluator="rollout", simulations=512, games=128, openings=3
)


_positive_int = int_at_least(1)
_non_negative_int = int_at_least(0)


def _even_games(text: str) -> int:
  value = _positive_int(text)
  if value % 2:
    raise argparse.ArgumentTypeError(
      f"expected an even number of games (each opening is played with both colour "
      f"assignments), got {text!r}"
    )
  return value


def build_parser() -> argparse.ArgumentParser:
  parser = OneLineErrorParser(
    prog=PROG,
    description=(
      "Play a match between two search agents (A and B) and print A's score and Elo "
      "difference. Default: UCT with rollouts, graph (MCGS) against tree (MCTS), on "
      "connect four."
    ),
  )
  parser.add_argument(
    "--game",
    default=DEFAULTS["game"],
    help="tic_tac_toe, connect_four, another pgx id with a "
    "transposition key, nim:3,4,5 or dag:... "
    "(default: %(default)s)",
  )
  parser.add_argument(
    "--games",
    type=_even_games,
    default=DEFAULTS["games"],
    help="games to play, even: half with A moving first (default: %(default)s)",
  )
  parser.add_argument(
    "--openings",
    type=_non_negative_int,
    default=DEFAULTS["openings"],
    help="plies of uniformly random moves opening every game; game i "
    "and game i + games/2 share their opening "
    "(default: %(default)s)",
  )
  parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
  parser.add_argument(
    "--simulations",
    type=_positive_int,
    help="simulations per move of both agents (--a-simulations and "
    f"--b-simulations override it; default: "
    f"{DEFAULTS['simulations']})",
  )
  for side, mode in (("a", "graph"), ("b", "tree")):
    upper = side.upper()
    group = parser.add_argument_group(f"agent {upper}")
    group.add_argument(
      f"--{side}-policy",
      choices=list(POLICY_NAMES),
      default=DEFAULTS["policy"],
      help=f"{upper}'s search policy (default: %(default)s)",
    )
    group.add_argument(
      f"--{side}-evaluator",
      choices=list(EVALUATORS),
      help=f"{upper}'s leaf evaluator (default: network with "
      f"--{side}-checkpoint, else {DEFAULTS['evaluator']})",
    )
    group.add_argument(
      f"--{side}-checkpoint",
      metavar="FILE",
      help=f"network weights for {upper}'s network evaluator (a checkpoint of mcgs_jax.apps.train)",
    )
    group.add_argument(
      f"--{side}-rollouts",
      type=_positive_int,
      default=1,
      help=f"random playouts per evaluation for {upper}'s rollout evaluator (default: %(default)s)",
    )
    group.add_argument(
      f"--{side}-simulations",
      type=_positive_int,
      help=f"{upper}'s simulations per move (default: --simulations, "
      f"else {DEFAULTS['simulations']})",
    )
    group.add_argument(
      f"--{side}-mode",
      choices=("graph", "tree"),
      default=mode,
      help=f"{upper} searches a graph (MCGS) or a tree (MCTS) (default: %(default)s)",
    )
    group.add_argument(
      f"--{side}-no-transpositions", action="store_true", help=f"same as --{side}-mode tree"
    )
    group.add_argument(
      f"--{side}-solver",
      action="store_true",
      help=f"{upper} proves exact values during its searches",
    )
    group.add_argument(
      f"--{side}-reuse",
      action="store_true",
      help=f"{upper} keeps its graph between moves (reroot) and continues it",
    )
    group.add_argument(
      f"--{side}-parallel",
      type=_positive_int,
      default=1,
      help=f"{upper}'s playouts per search step (virtual visits); must "
      f"divide its simulations (default: %(default)s)",
    )
  parser.add_argument(
    "--json", action="store_true", help="print one JSON object with the result instead of text"
  )
  parser.add_argument(
    "--plot",
    metavar="FILE.png",
    help="save a figure: the score with its 95%% interval and the nodes per move of both agents",
  )
  return parser


def _evaluator(args, side: str) -> str:
  """The side's evaluator name: as given, else network with a checkpoint, else the
  default."""
  name = getattr(args, f"{side}_evaluator")
  checkpoint = getattr(args, f"{side}_checkpoint")
  if name is None:
    name = "network" if checkpoint else DEFAULTS["evaluator"]
  if name == "network" and not checkpoint:
    raise ValueError(f"--{side}-evaluator network needs --{side}-checkpoint FILE")
  if checkpoint and name != "network":
    raise ValueError(f"--{side}-checkpoint is for --{side}-evaluator network, not {name}")
  return name


def _simulations(args, side: str) -> int:
  """The side's simulations: `--SIDE-simulations`, else `--simulations`, else the
  default."""
  for value in (getattr(args, f"{side}_simulations"), args.simulations):
    if value is not None:
      return int(value)
  return int(DEFAULTS["simulations"])


def _check_parallel(args, side: str) -> None:
  """ValueError naming the flags when `--SIDE-parallel` does not divide the
  simulations."""
  parallel, simulations = getattr(args, f"{side}_parallel"), _simulations(args, side)
  if simulations % parallel:
    given = (
      f"--{side}-simulations"
      if getattr(args, f"{side}_simulations") is not None
      else "--simulations"
      if args.simulations is not None
      else "the default simulations"
    )
    raise ValueError(
      f"--{side}-parallel {parallel} must divide the simulations per move ({given}: {simulations})"
    )


def _agent(args, side: str, apply_fn=None):
  """The `Agent` of one side from the parsed flags (`apply_fn`: its network's, with
  a checkpoint)."""
  from mcgs_jax.apps.arena import Agent  # pylint: disable=import-outside-toplevel

  get = lambda name: getattr(args, f"{side}_{name}")
  transpositions = get("mode") == "graph" and not get("no_transpositions")
  evaluator = _evaluator(args, side)
  _check_parallel(args, side)
  simulations = _simulations(args, side)
  name = ""
  if evaluator == "network":
    name = (
      f"{get('policy')}/network {os.path.basename(get('checkpoint'))}/"
      f"{simulations} {'graph' if transpositions else 'tree'}"
    )
  return Agent(
    policy=get("policy"),
    evaluator=evaluator,
    num_simulations=simulations,
    transpositions=transpositions,
    solver=get("solver"),
    reuse=get("reuse"),
    num_parallel=get("parallel"),
    num_rollouts=get("rollouts"),
    apply_fn=apply_fn,
    name=name,
  )


def _network(args, side: str):
  """`(apply_fn, params)` from the side's checkpoint, or `(None, None)`."""
  path = getattr(args, f"{side}_checkpoint")
  if not path:
    return None, None
  from mcgs_jax.apps import arena, train  # pylint: disable=import-outside-toplevel

  env = arena._game_from_spec(args.game).env  # pylint: disable=protected-access
  try:
    apply_fn, params, _ = train.load_network(path, env)
  except OSError as error:
    raise ValueError(f"cannot read --{side}-checkpoint {path!r}: {error.strerror}") from None
  except (KeyError, TypeError, ValueError) as error:
    raise ValueError(
      f"--{side}-checkpoint {path!r} is not a network checkpoint for {args.game}: {error}"
    ) from None
  return apply_fn, params


def verdict(result) -> str:
  """`"A stronger (95%)"`, `"B stronger (95%)"` or `"no significant difference at
  95%"`, from the score's 95% interval."""
  low, high = result.score_ci95
  if low > 0.5:
    return "A stronger (95%)"
  if high < 0.5:
    return "B stronger (95%)"
  return "no significant difference at 95%"


def format_result(game: str, result, openings: int) -> str:
  """The text report of a match."""
  agents = result.agents
  low, high = result.elo_ci95
  score_low, score_high = result.score_ci95
  lines = [
    f"{game}: {result.games} games ({result.games // 2} openings of {openings} random "
    f"plies, each with both colour assignments) on {result.num_devices} device(s), "
    f"{result.seconds:.0f} s",
    f"  A: {agents['a']['name']}",
    f"  B: {agents['b']['name']}",
    f"A: {result.wins} wins, {result.draws} draws, {result.losses} losses  "
    f"score {result.score:.3f} (95% interval {score_low:.3f}-{score_high:.3f})",
    f"Elo of A over B: {result.elo:+.0f} (95% interval {low:+.0f} to {high:+.0f})",
    f"verdict: {verdict(result)}",
    f"mean game length {result.mean_game_length:.1f} plies",
    f"{'':<3}{'searches':>9}  {'nodes/move':>10}  {'transposition hits/move':>23}",
  ]
  for side in ("a", "b"):
    stats = agents[side]
    lines.append(
      f"{side.upper():<3}{stats['searches']:>9}  {stats['mean_nodes']:>10.1f}  "
      f"{stats['mean_transposition_hits']:>23.1f}"
    )
  return "\n".join(lines)


def save_plot(path: str, game: str, result) -> None:
  """Two panels: A's score with its 95% interval, and nodes per move by ply."""
  import matplotlib  # pylint: disable=import-outside-toplevel

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

  figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [1, 2]})
  low, high = result.score_ci95
  left.errorbar(
    [0],
    [result.score],
    yerr=[[result.score - low], [high - result.score]],
    fmt="o",
    capsize=8,
    color="tab:blue",
  )
  left.axhline(0.5, color="grey", linestyle="--", linewidth=1)
  left.set_xlim(-1, 1)
  left.set_ylim(0, 1)
  left.set_xticks([])
  left.set_ylabel("score of A")
  left.set_title(
    f"W {result.wins} D {result.draws} L {result.losses}\n"
    f"Elo {result.elo:+.0f} [{result.elo_ci95[0]:+.0f}, "
    f"{result.elo_ci95[1]:+.0f}]",
    fontsize=9,
  )
  for side, colour in (("a", "tab:blue"), ("b", "tab:orange")):
    stats = result.agents[side]
    nodes = stats["nodes_per_ply"]
    plies = [ply for ply, value in enumerate(nodes) if not math.isnan(value)]
    right.plot(
      plies,
      [nodes[ply] for ply in plies],
      "o-",
      markersize=3,
      color=colour,
      label=f"{side.upper()}: {stats['name']}",
    )
  right.set_xlabel("ply")
  right.set_ylabel("nodes per search (mean over games)")
  right.set_title(f"{game}, {result.games} games", fontsize=9)
  right.legend(fontsize=8)
  figure.tight_layout()
  figure.savefig(path, dpi=100)
  plt.close(figure)


def main(argv: Sequence[str] | None = None) -> int:
  """Runs `mcgs-jax arena`; returns the exit status (0 ok, 2 bad input)."""
  parser = build_parser()
  try:
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
  except SystemExit as exit_:
    return exit_.code if isinstance(exit_.code, int) else 2
  if args.plot is not None:
    directory = os.path.dirname(os.path.abspath(args.plot))
    if not os.path.isdir(directory):
      print(
        f"{PROG}: error: cannot write {args.plot!r}: no directory {directory!r}", file=sys.stderr
      )
      return 2
  try:
    from mcgs_jax.apps import arena  # pylint: disable=import-outside-toplevel

    for side in ("a", "b"):  # flag errors before loading anything
      _evaluator(args, side)
      _check_parallel(args, side)
    (apply_a, params_a), (apply_b, params_b) = _network(args, "a"), _network(args, "b")
    agent_a, agent_b = _agent(args, "a", apply_a), _agent(args, "b", apply_b)
    result = arena.play_match(
      args.game,
      agent_a,
      agent_b,
      num_games=args.games,
      seed=args.seed,
      opening_moves=args.openings,
      params_a=params_a,
      params_b=params_b,
      progress=True,
    )
  except (ValueError, TypeError) as error:
    message = " ".join(str(error).split()) or type(error).__name__
    if message.startswith("openings of"):
      message = f"--openings {args.openings}: {message} for {args.game}"
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2
  if args.plot is not None:
    save_plot(args.plot, args.game, result)
  if args.json:
    report = result.to_dict()
    report["verdict"] = verdict(result)
    report["game"] = args.game
    report["openings_plies"] = args.openings
    report["seed"] = args.seed
    if args.plot is not None:
      report["plot"] = args.plot
    print(json.dumps(report))
  else:
    print(format_result(args.game, result, args.openings))
    if args.plot is not None:
      print(f"plot saved to {args.plot}")
  return 0
