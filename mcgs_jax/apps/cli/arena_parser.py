"""The parser of `mcgs-jax arena` (`build_parser`): the match's flags and each
side's (`--a-...`, `--b-...`), their defaults (`DEFAULTS`), and the networks shipped
with the package (`builtin_checkpoint`)."""

import argparse
import os
from typing import Any

from mcgs_jax.apps import engines
from mcgs_jax.apps.cli.args import (
  OneLineErrorParser,
  add_key_history_arguments,
  add_seed_argument,
  int_at_least,
)
from mcgs_jax.apps.registry import EVALUATOR_NAMES, POLICY_NAMES

PROG = "mcgs-jax arena"
EVALUATORS = EVALUATOR_NAMES  # "network" needs a checkpoint (or the game's built-in one)
ENGINES = engines.ENGINE_NAMES
DEFAULTS: dict[str, Any] = dict(
  game="connect_four",
  policy="muzero",
  evaluator="network",  # with the game's built-in network; "rollout" without one
  fallback_evaluator="rollout",
  simulations=64,
  games=128,
  openings=3,
  engine_a="mcgs",
  engine_b="mctx",
)
MAX_SIMULATIONS = 1_000_000
# Trained networks shipped with the package, by game (see `builtin_checkpoint`): the
# arena's connect four, go 9x9 (a residual network, docs/training.md), and the
# planning problems `mcgs-jax evaluate` measures.
BUILTIN_NETWORKS = {
  "connect_four": "connect_four.msgpack",
  "go_9x9": "go_9x9.msgpack",
  "jumanji:Knapsack-v1": "jumanji_knapsack.msgpack",
  "jumanji:TSP-v1": "jumanji_tsp.msgpack",
}


_positive_int = int_at_least(1)
_non_negative_int = int_at_least(0)
_simulations_int = int_at_least(1, MAX_SIMULATIONS)


def builtin_checkpoint(game: str) -> str | None:
  """The path of the trained network shipped for `game` (connect four, go 9x9,
  jumanji's Knapsack and TSP: `mcgs-jax train` runs, docs/training.md and
  docs/planning.md give their commands), or None."""
  name = BUILTIN_NETWORKS.get(game)
  if name is None:
    return None
  apps = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # mcgs_jax/apps
  return os.path.join(apps, "checkpoints", name)


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
      "difference. Default: this library's default agent (muzero on a graph kept "
      "between moves) against mctx's muzero_policy, the same built-in network, 64 "
      "simulations each, on connect four."
    ),
  )
  _add_match_arguments(parser)
  parser.add_argument(
    "--simulations",
    type=_simulations_int,
    help="simulations per move of both agents (--a-simulations and "
    f"--b-simulations override it; default: "
    f"{DEFAULTS['simulations']})",
  )
  for side, mode in (("a", "graph"), ("b", "tree")):
    _add_agent_arguments(parser.add_argument_group(f"agent {side.upper()}"), side, mode)
  parser.add_argument(
    "--json", action="store_true", help="print one JSON object with the result instead of text"
  )
  parser.add_argument(
    "--plot",
    metavar="FILE.png",
    help="save a figure: the score with its 95%% interval and the nodes per move of both agents",
  )
  return parser


def _add_match_arguments(parser) -> None:
  """The match: game, games, openings, seed, edges and keys, equal time."""
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
  add_seed_argument(parser)
  parser.add_argument(
    "--max-children",
    type=int_at_least(0),
    default=None,
    help="compact edges for this library's agents: K slots per node, the K most likely "
    "valid actions (0: dense edge tables; default: 96 for chess and shogi, dense otherwise)",
  )
  add_key_history_arguments(parser)
  parser.add_argument(
    "--equal-time",
    action="store_true",
    help="choose B's simulations so that B's search takes A's time per move, measured "
    "before the match on its positions (both printed)",
  )


def _add_agent_arguments(group, side: str, mode: str) -> None:
  """The `--SIDE-*` flags of one agent (`side` "a" or "b"; `mode` its default search,
  "graph" or "tree", as the help says)."""
  upper = side.upper()
  group.add_argument(
    f"--{side}-engine",
    choices=ENGINES,
    default=DEFAULTS[f"engine_{side}"],
    help=f"{upper}'s search: this library (mcgs) or DeepMind's mctx (a tree searched "
    "from scratch every move; muzero and gumbel only) (default: %(default)s)",
  )
  group.add_argument(
    f"--{side}-policy",
    choices=list(POLICY_NAMES),
    default=DEFAULTS["policy"],
    help=f"{upper}'s search policy (default: %(default)s)",
  )
  group.add_argument(
    f"--{side}-evaluator",
    choices=list(EVALUATORS),
    help=f"{upper}'s leaf evaluator (default: network, with --{side}-checkpoint or the "
    f"game's built-in network; {DEFAULTS['fallback_evaluator']} for a game without one)",
  )
  group.add_argument(
    f"--{side}-checkpoint",
    metavar="FILE",
    help=f"network weights for {upper}'s network evaluator (a checkpoint of "
    "mcgs_jax.apps.train; default: the game's built-in network, connect four only)",
  )
  group.add_argument(
    f"--{side}-rollouts",
    type=_positive_int,
    default=1,
    help=f"random playouts per evaluation for {upper}'s rollout evaluator (default: %(default)s)",
  )
  group.add_argument(
    f"--{side}-simulations",
    type=_simulations_int,
    help=f"{upper}'s simulations per move (default: --simulations, else {DEFAULTS['simulations']})",
  )
  group.add_argument(
    f"--{side}-mode",
    choices=("graph", "tree"),
    help=f"{upper} searches a graph (MCGS) or a tree (MCTS) (default: {mode}; mctx "
    "searches a tree)",
  )
  _add_agent_switches(group, side, upper)


def _add_agent_switches(group, side: str, upper: str) -> None:
  """The `--SIDE-*` switches of one agent's search (`upper`: the side's letter in
  capitals): transpositions, solver, reuse, make-room, parallel."""
  group.add_argument(
    f"--{side}-no-transpositions", action="store_true", help=f"same as --{side}-mode tree"
  )
  group.add_argument(
    f"--{side}-solver",
    action="store_true",
    default=None,
    help=f"{upper} proves exact values during its searches (default: on for engine "
    "mcgs; mctx cannot)",
  )
  group.add_argument(
    f"--{side}-no-solver",
    dest=f"{side}_solver",
    action="store_false",
    help=f"{upper} searches without the solver",
  )
  group.add_argument(
    f"--{side}-reuse",
    action="store_true",
    default=None,
    help=f"{upper} keeps its graph between moves (reroot) and continues it "
    "(default: on for engine mcgs; mctx cannot)",
  )
  group.add_argument(
    f"--{side}-no-reuse",
    dest=f"{side}_reuse",
    action="store_false",
    default=None,
    help=f"{upper} searches every move from scratch",
  )
  group.add_argument(
    f"--{side}-make-room",
    action="store_true",
    help=f"{upper} reroots its kept graph to the capacity - simulations most visited "
    "nodes, so that no playout finds it full (default: every reachable node is kept)",
  )
  group.add_argument(
    f"--{side}-parallel",
    type=_positive_int,
    default=1,
    help=f"{upper}'s playouts per search step (virtual visits); must "
    f"divide its simulations (default: %(default)s)",
  )
