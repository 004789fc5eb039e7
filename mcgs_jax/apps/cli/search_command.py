"""`mcgs-jax search`: search positions and print the root statistics.

Searches one position (`--moves`) or every position of a file (`--positions`, one
comma-separated move list per line, an empty line being the start position). All
positions are stacked along the batch axis and searched in ONE jitted call. For each
position it prints a classic MCTS root table (action, visits, Q, prior, share of the
visits) and, when an exact solver can decide the position, a minimax column with the
exact value of every legal action for the player to move (+1 win, 0 draw, -1 loss;
`*` marks the optimal actions).

Solvers used for the minimax column:
  * `nim:...`: memoised minimax over the heaps (any heaps; meant for small ones).
  * `tic_tac_toe`: full minimax.
  * `connect_four`: negamax, only with at most `root_report.CONNECT_FOUR_MAX_EMPTY`
    empty cells.
  * `dag:...`: the game's own exact values.

With `--json` every position gives one JSON object on its own line, in input order.
Bad input (unknown game, illegal or malformed moves, unreadable file, bad numbers)
exits with status 2 and a single line `mcgs-jax search: error: ...` on stderr.
"""

import argparse
import dataclasses
import functools
import json
import os
import sys
from collections.abc import Sequence

from mcgs_jax.apps.cli import program_cache, root_report
from mcgs_jax.apps.cli.arena_parser import BUILTIN_NETWORKS, builtin_checkpoint
from mcgs_jax.apps.cli.args import (
  OneLineErrorParser,
  add_key_history_arguments,
  add_seed_argument,
  int_at_least,
  key_history_options,
  parse_or_status,
)
from mcgs_jax.apps.cli.positions import parse_moves, play_moves, read_positions
from mcgs_jax.apps.registry import EVALUATOR_NAMES, POLICY_NAMES

PROG = "mcgs-jax search"

_positive_int = int_at_least(1, 1_000_000)

EPILOG = """\
columns of the table:
  action   the action (for nim also a label: heap i take k)
  visits   simulations that went through the action (the search's choice is the
           most visited one, except gumbel, and with --solver a move proven lost
           while another is not, or a solved root, whose best proven move it plays)
  Q        mean value of the action for the player to move, -1 (loss) .. +1 (win);
           with --evaluator uniform every leaf is worth 0, so Q stays near 0
  prior    the evaluator's prior probability of the action (uniform here)
  share    the action's visits as a share of all root visits
  proven   (--solver) the value the search proved for the action
  minimax  the exact value from a solver (+1 win, 0 draw, -1 loss), where one applies
  *        marks the minimax-optimal actions

With few simulations, or with random rollouts in games where random play misleads
(nim), the most visited action may not be minimax-optimal; the output then says so.
More --simulations, or --solver, help.
"""


def build_parser() -> argparse.ArgumentParser:
  parser = OneLineErrorParser(
    prog=PROG,
    formatter_class=argparse.RawDescriptionHelpFormatter,
    description=("Search positions with Monte-Carlo Graph Search and print the root statistics."),
    epilog=EPILOG,
  )
  parser.add_argument(
    "--game",
    default="tic_tac_toe",
    help="nim:3,4,5, tic_tac_toe, connect_four, another pgx id with a "
    "transposition key, or dag:actions=3,depth=6,... "
    "(default: %(default)s)",
  )
  where = parser.add_mutually_exclusive_group()
  where.add_argument(
    "--moves",
    default="",
    help="comma-separated actions played from the start, e.g. 3,2,4 (default: the start position)",
  )
  where.add_argument(
    "--positions",
    metavar="FILE",
    help="file with one comma-separated move list per line (an empty "
    "line is the start position); all are searched in one batch",
  )
  _add_search_arguments(parser)
  return parser


def _add_search_arguments(parser) -> None:
  """The search of every position: policy, evaluator, simulations, seed, graph options, output."""
  parser.add_argument(
    "--policy",
    choices=list(POLICY_NAMES),
    default="muzero",
    help="search policy (default: %(default)s)",
  )
  parser.add_argument(
    "--evaluator",
    choices=list(EVALUATOR_NAMES),
    help="leaf evaluator: network (--checkpoint FILE, or the network shipped for "
    f"the game: {', '.join(BUILTIN_NETWORKS)}), rollout (random playouts to the end) or "
    "uniform (value 0 everywhere: every Q stays near 0) (default: network where "
    "one is shipped or given, else rollout)",
  )
  parser.add_argument(
    "--checkpoint",
    metavar="FILE",
    help="network for --evaluator network (a mcgs-jax train checkpoint; default: "
    "the game's shipped network)",
  )
  parser.add_argument(
    "--rollouts",
    type=_positive_int,
    default=1,
    help="random playouts per evaluation with --evaluator rollout (default: %(default)s)",
  )
  parser.add_argument(
    "--simulations",
    type=_positive_int,
    default=400,
    help="simulations per position (default: %(default)s)",
  )
  add_seed_argument(parser)
  parser.add_argument(
    "--no-transpositions", action="store_true", help="search a tree instead of a graph"
  )
  parser.add_argument(
    "--solver",
    action="store_true",
    help="prove exact values during the search (MCTS-solver); the "
    "output then says which root actions are proven",
  )
  parser.add_argument(
    "--max-children",
    type=int_at_least(0),
    default=None,
    help="compact edges: K slots per node, the K most likely valid actions (0: dense edge "
    "tables; default: 96 for chess and shogi, dense otherwise)",
  )
  add_key_history_arguments(parser)
  parser.add_argument(
    "--json", action="store_true", help="one JSON object per position and line instead of tables"
  )


# ---------------------------------------------------------------------------------
# Search


def resolve_evaluator(args) -> None:
  """Sets `args.evaluator` (when not given: network with a checkpoint, given or
  shipped for the game, else rollout) and `args.checkpoint` (the shipped network
  for `--evaluator network` without `--checkpoint`); ValueError naming the flag for
  a network without a checkpoint or a checkpoint without the network."""
  checkpoint = args.checkpoint or builtin_checkpoint(args.game)
  if args.evaluator is None:
    args.evaluator = "network" if checkpoint else "rollout"
  if args.evaluator == "network" and not checkpoint:
    raise ValueError(
      f"--evaluator network needs --checkpoint FILE (no network is shipped for "
      f"{args.game}; shipped: {', '.join(BUILTIN_NETWORKS)})"
    )
  if args.checkpoint and args.evaluator != "network":
    raise ValueError(f"--checkpoint is for --evaluator network, not {args.evaluator}")
  args.checkpoint = checkpoint if args.evaluator == "network" else None


@functools.lru_cache(maxsize=8)
def cached_game(
  spec: str, evaluator: str, rollouts: int, key_options: tuple = (), checkpoint: str | None = None
):
  """The `Game` for `spec` with the named evaluator (`"network"`: the network in
  `checkpoint`, whose weights `_network_params` reads) and the key's history options
  (`(name, value)` pairs of `make_game` keywords). Cached, so repeated in-process
  calls reuse the env and hence the compiled search."""
  from mcgs_jax.apps import registry
  from mcgs_jax.games import adapter

  try:
    game = adapter.make_game(spec, **dict(key_options))
  except ValueError as error:
    if str(error).startswith("unknown game"):
      raise ValueError(f"--game: {error}") from None
    raise ValueError(f"--game {spec!r}: {error}") from None
  if not isinstance(game, adapter.Game):
    raise ValueError(f"--game {spec!r}: a game with chance; play it with mcgs-jax play")
  apply_fn = None
  if evaluator == "network" and checkpoint is not None:  # `resolve_evaluator` gives one
    from mcgs_jax.apps.train.checkpoint_files import load_network  # flax: the train extra

    apply_fn, _, _ = load_network(checkpoint, game.env)
  if evaluator != "uniform":  # make_game's default evaluator is the uniform one
    game = dataclasses.replace(
      game,
      evaluator=registry.make_evaluator(
        evaluator, game.env, num_rollouts=rollouts, apply_fn=apply_fn
      ),
    )
  return game


def _network_params(game, checkpoint: str | None):
  """The weights of the network in `checkpoint` (None without one)."""
  if checkpoint is None:
    return None
  from mcgs_jax.apps.train.checkpoint_files import load_network

  return load_network(checkpoint, game.env)[1]


@functools.lru_cache(maxsize=8)
def _jitted_search(
  game,
  policy: str,
  simulations: int,
  transpositions: bool,
  solver: bool,
  max_children: int | None,
):
  """`(seed, states [B, ...], params) -> the root's arrays (`_root_arrays`)`, the
  whole search from the seed to what the report reads in one program, jitted once
  per configuration (a warm run reads one program from the compilation cache, not
  dozens). `params` are the network's weights, None for the other evaluators."""
  import jax

  from mcgs_jax.apps import registry

  # No root noise: a report of the search, not self-play exploration.
  search = registry.playing_policy(
    policy,
    hash_fn=game.hash_fn,
    solver=solver,
    transpositions=transpositions,
    capacity=simulations + 1,
    max_children=max_children,
  )

  def run(seed, state, params):
    root_key, search_key = jax.random.split(jax.random.PRNGKey(seed))
    root = game.root(params, root_key, state)
    output = search(
      params,
      search_key,
      root,
      game.recurrent_fn,
      simulations,
      invalid_actions=game.invalid_actions(state),
    )
    return root_report.root_arrays(game, output, state)

  return jax.jit(run)


def search_positions(args, positions: list[list[int]]) -> list[dict]:
  """Searches every position in one batch; returns one report dict per position."""
  import numpy as np

  from mcgs_jax.apps import registry

  evaluator = args.evaluator
  game_options = (
    args.game,
    evaluator,
    args.rollouts if evaluator == "rollout" else 1,
    tuple(sorted(key_history_options(args).items())),
    args.checkpoint,
  )
  game = cached_game(*game_options)
  params = _network_params(game, args.checkpoint)
  states, batch = _position_batch(game, args, positions)
  max_children = registry.default_max_children(args.game, args.max_children)
  _check_search_memory(game, batch, args.simulations, max_children)
  transpositions = not args.no_transpositions
  search_options = (args.policy, args.simulations, transpositions, args.solver, max_children)
  seed = np.uint32(args.seed)
  search = program_cache.cached_program(
    _jitted_search(game, *search_options),
    repr((game_options, search_options)),
    seed,
    batch,
    params,
  )
  roots = {name: np.asarray(value) for name, value in search(seed, batch, params).items()}
  return [
    root_report.position_report(
      game, args, moves, state, {name: value[b] for name, value in roots.items()}
    )
    for b, (moves, state) in enumerate(zip(positions, states, strict=True))
  ]


def _check_search_memory(game, batch, simulations: int, max_children: int | None) -> None:
  """`memory_estimates.InsufficientMemoryError` (a `ValueError`: exit status 2) before any work
  when the search's graphs cannot fit, with the estimate; a warning above
  `memory_estimates.WARN_FRACTION` of the memory available."""
  from mcgs_jax.apps import memory_estimates

  graph = memory_estimates.graph_bytes(game, batch, simulations + 1, max_children=max_children)
  memory_estimates.check_memory(
    {"graphs": memory_estimates.GRAPHS_PER_SEARCH * graph},
    owner="the search",
    users="graphs",
    held="its graphs",
    advice="fewer --simulations or positions, or compact edges (--max-children)",
  )


def _position_batch(game, args, positions: list[list[int]]):
  """`(states, batch)`: the state after each position's moves, and all of them
  stacked; ValueError naming a position whose game is over."""
  import jax
  import numpy as np

  states = []
  for number, moves in enumerate(positions, start=1):
    where = ",".join(map(str, moves)) or "the start"
    source = f"--positions {args.positions}:{number}" if args.positions is not None else "--moves"
    state = play_moves(game, args.game, moves, source)
    if bool(state.terminated) or bool(getattr(state, "truncated", False)):
      raise ValueError(f"{source}: position {where}: the game is over, nothing to search")
    states.append(state)
  # Stacked on the host: one small program per leaf otherwise.
  return states, jax.tree.map(lambda *leaves: np.stack(leaves), *states)


def main(argv: Sequence[str] | None = None) -> int:
  """Runs `mcgs-jax search`; returns the exit status (0 ok, 2 bad input)."""
  args = parse_or_status(build_parser(), argv)
  if isinstance(args, int):
    return args
  try:
    resolve_evaluator(args)
    if args.positions is not None:
      positions = read_positions(args.positions)
    else:
      positions = [parse_moves(args.moves)]
    reports = search_positions(args, positions)
  except (ValueError, OSError) as error:
    message = " ".join(str(error).split()) or type(error).__name__
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2
  try:
    for index, report in enumerate(reports):
      if args.json:
        print(json.dumps(report))
      else:
        if index:
          print()
        print(root_report.format_table(report))
    sys.stdout.flush()
  except BrokenPipeError:  # e.g. `mcgs-jax search ... | head`
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 1
  return 0
