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
  * `connect_four`: negamax, only with at most `CONNECT_FOUR_MAX_EMPTY` empty cells.
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
from typing import Any

from mcgs_jax.apps.cli import program_cache
from mcgs_jax.apps.cli.arena_parser import BUILTIN_NETWORKS, builtin_checkpoint
from mcgs_jax.apps.cli.args import (
  OneLineErrorParser,
  add_key_history_arguments,
  add_seed_argument,
  int_at_least,
  key_history_options,
  parse_or_status,
)
from mcgs_jax.apps.registry import EVALUATOR_NAMES, POLICY_NAMES

PROG = "mcgs-jax search"
# Exact solving is quick up to this many empty cells.
CONNECT_FOUR_MAX_EMPTY = 16
_CONNECT_FOUR_CELLS = 42


_positive_int = int_at_least(1, 1_000_000)

LEGEND = (
  "visits: simulations through the action; Q: its mean value for the player "
  "to move (-1 loss .. +1 win); prior: the evaluator's prior; share: visits / "
  "all root visits; minimax: exact value (+1 win, 0 draw, -1 loss); * = "
  "optimal action"
)
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
# Input


def parse_moves(text: str) -> list[int]:
  """`"3, 2,4"` -> `[3, 2, 4]`; `""` -> `[]`; ValueError for anything malformed."""
  text = text.strip()
  if not text:
    return []
  moves = []
  for part in text.split(","):
    part = part.strip()
    try:
      moves.append(int(part))
    except ValueError:
      raise ValueError(f"malformed move list {text!r}: {part!r} is not an integer") from None
  return moves


def read_positions(path: str) -> list[list[int]]:
  """The move lists of a positions file, one per line (ValueError naming
  `--positions` if unreadable)."""
  try:
    with open(path, encoding="utf-8") as file:
      lines = file.read().splitlines()
  except FileNotFoundError:
    raise ValueError(f"--positions: file not found: {path}") from None
  except (OSError, UnicodeDecodeError) as error:
    reason = getattr(error, "strerror", None) or str(error)
    raise ValueError(f"--positions: cannot read {path}: {reason}") from None
  if not lines:
    raise ValueError(f"--positions: file {path} is empty")
  positions = []
  for number, line in enumerate(lines, start=1):
    try:
      positions.append(parse_moves(line))
    except ValueError as error:
      raise ValueError(f"--positions {path}:{number}: {error}") from None
  return positions


@functools.lru_cache(maxsize=8)
def _jitted_step(env):
  import jax

  return jax.jit(env.step)


@functools.lru_cache(maxsize=8)
def _jitted_start(env):
  """The start state (key 0) in one compiled program: run eagerly, pgx's `init` is
  dozens of small programs, each a read of the compilation cache."""
  import jax

  return jax.jit(lambda: env.init(jax.random.PRNGKey(0)))


def _illegal_reason(game, spec: str, state, action: int) -> str:
  """Why `action` is illegal in `state`, in the game's words where known."""
  name = spec.partition(":")[0]
  if name == "connect_four":
    return f"column {action} is full"
  if name == "tic_tac_toe":
    return f"cell {action} is already taken"
  if name == "nim":
    heap = action // game.env.max_heap
    heaps = [int(h) for h in state.heaps]
    return f"{game.env.describe_action(action)}: heap {heap} has only {heaps[heap]} stone(s)"
  return "it is not a legal move there"


def play_moves(game, spec: str, moves: Sequence[int], source: str = "--moves"):
  """The state after `moves` from the start (key 0), or ValueError naming `source`,
  the move's number (from 1) and the game's reason."""
  import numpy as np

  state = _jitted_start(game.env)()
  step = _jitted_step(game.env)
  for number, action in enumerate(moves, start=1):
    where = f"move {number} of {source}"
    if not 0 <= action < game.num_actions:
      raise ValueError(f"{where}: action {action} is out of range [0, {game.num_actions})")
    if bool(state.terminated) or bool(getattr(state, "truncated", False)):
      raise ValueError(f"{where}: action {action} is played after the game ended")
    if not np.asarray(state.legal_action_mask)[action]:
      raise ValueError(
        f"{where}: action {action} is illegal: {_illegal_reason(game, spec, state, action)}"
      )
    state = step(state, np.int32(action))
  return state


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
    return _root_arrays(game, output, state)

  return jax.jit(run)


def _exact_action_values(game, spec: str, moves: Sequence[int], state) -> dict[int, int] | None:
  """Exact value of every legal action for the player to move, or None if no solver
  applies (see the module docstring)."""
  from mcgs_jax.games import solvers

  name = spec.partition(":")[0]
  if name == "nim":
    heaps = [int(h) for h in state.heaps]
    return solvers.nim_action_values(heaps, game.env.max_heap)
  if name == "tic_tac_toe":
    return solvers.tic_tac_toe_values(state)[1]
  if name == "connect_four" and _CONNECT_FOUR_CELLS - len(moves) <= CONNECT_FOUR_MAX_EMPTY:
    return solvers.connect_four_values(moves)[1]
  if name == "dag":
    return game.env.exact_action_values(int(state.layer), int(state.index))
  return None


def _action_label(game, spec: str, action: int) -> str:
  """A human name for the action (Nim only: `heap 0 take 2`), else ''."""
  if spec.partition(":")[0] == "nim":
    return game.env.describe_action(action)
  return ""


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
    _position_report(game, args, moves, state, {name: value[b] for name, value in roots.items()})
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


def _root_arrays(game, output, batch) -> dict[str, Any]:
  """The root statistics of the batch's search (traced with it), `[B, ...]`: per
  action (`visits`, `q`, `prior`, `legal`, `proven`, `proven_value`, `[B, A]`) and per
  root (`root_value`, `num_nodes`, `hits`, `dropped`, `chosen`, `root_proven`,
  `root_proven_value`)."""
  import jax

  from mcgs_jax._src import proofs

  graph = output.search_graph
  summary = graph.summary()
  proven, proven_values = jax.vmap(proofs.proven_edges, in_axes=(0, None))(graph, 0)
  # By action (with compact edges, an action no slot holds has no prior or proof).
  proven = graph.root_row_to_actions(proven, False)
  proven_values = graph.root_row_to_actions(proven_values, 0.0)
  prior = graph.root_row_to_actions(jax.nn.softmax(graph.children_prior_logits[:, 0], axis=-1), 0)
  arrays = dict(
    visits=summary.visit_counts,
    q=summary.qvalues,
    prior=prior,
    legal=~game.invalid_actions(batch),
    proven=proven,
    proven_value=proven_values,
    root_value=summary.value,
    num_nodes=graph.num_nodes,
    hits=graph.transposition_hits,
    dropped=graph.dropped_actions,
    chosen=output.action,
    root_proven=graph.node_proven[:, 0],
    root_proven_value=graph.proven_values[:, 0],
  )
  return arrays


def _position_report(game, args, moves: list[int], state, root: dict[str, Any]) -> dict:
  """The report dict of one position, `root` its `_root_arrays` (numpy)."""
  from mcgs_jax.apps import registry

  exact = _exact_action_values(game, args.game, moves, state)
  best = max(exact.values()) if exact else None
  # The policy's own choice (muzero's at temperature 0: the most visited): with the
  # solver never a move it proved lost while another is not (the most visited may be).
  action = int(root["chosen"])
  report = {
    "game": args.game,
    "moves": list(moves),
    "policy": args.policy,
    "evaluator": args.evaluator,
    "checkpoint": args.checkpoint,
    "rollouts": args.rollouts,
    "simulations": args.simulations,
    "transpositions": not args.no_transpositions,
    "action": action,
    "root_value": float(root["root_value"]),
    "num_nodes": int(root["num_nodes"]),
    "transposition_hits": int(root["hits"]),
    "actions": _action_rows(game, args, root, exact, best),
  }
  max_children = registry.default_max_children(args.game, args.max_children)
  if max_children is not None:
    report["max_children"] = max_children
    report["dropped_actions"] = int(root["dropped"])
  if args.solver:
    report["root_proven"] = bool(root["root_proven"])
    if report["root_proven"]:
      report["root_proven_value"] = float(root["root_proven_value"])
  if exact is not None and best is not None:
    report["minimax_value"] = int(best)
    report["optimal_actions"] = sorted(a for a, v in exact.items() if v == best)
    report["action_is_optimal"] = action in report["optimal_actions"]
  return report


def _action_rows(game, args, root: dict[str, Any], exact, best) -> list[dict]:
  """The rows of one position's legal actions, most visited first; `exact` the
  minimax values where known (`best` the largest)."""
  import numpy as np

  rows = []
  for a in np.flatnonzero(root["legal"]):
    row: dict[str, Any] = {
      "action": int(a),
      "visits": int(root["visits"][a]),
      "q": float(root["q"][a]),
      "prior": float(root["prior"][a]),
    }
    label = _action_label(game, args.game, int(a))
    if label:
      row["label"] = label
    if args.solver:
      row["proven"] = bool(root["proven"][a])
      if root["proven"][a]:
        row["proven_value"] = float(root["proven_value"][a])
    if exact is not None:
      row["minimax"] = int(exact[int(a)])
      row["optimal"] = exact[int(a)] == best
    rows.append(row)
  rows.sort(key=lambda row: (-row["visits"], row["action"]))
  return rows


# ---------------------------------------------------------------------------------
# Output


def _evaluator_text(report: dict) -> str:
  """The report's evaluator as the table's first line names it: its name, and what it
  does at a leaf (or its checkpoint's file)."""
  evaluator = report["evaluator"]
  if evaluator == "rollout":
    count = report.get("rollouts", 1)
    evaluator += f" ({count} random playout{'s' if count > 1 else ''} per leaf)"
  elif evaluator == "uniform":
    evaluator += " (value 0 at every leaf)"
  elif evaluator == "network":
    evaluator += f" ({os.path.basename(report['checkpoint'])})"
  return evaluator


def format_table(report: dict) -> str:
  """The root table of one report, as printed without `--json`."""
  moves = ",".join(map(str, report["moves"])) or "(start)"
  mode = "graph" if report["transpositions"] else "tree"
  evaluator = _evaluator_text(report)
  lines = [
    f"game {report['game']}  moves {moves}  policy {report['policy']}  "
    f"evaluator {evaluator}  {mode}  simulations {report['simulations']}",
    f"root value {report['root_value']:+.3f}  nodes {report['num_nodes']}  "
    f"transposition hits {report['transposition_hits']}  action {report['action']}",
  ]
  if "max_children" in report:
    lines[0] += f"  slots {report['max_children']} (dropped {report['dropped_actions']})"
  if "minimax_value" in report:
    lines[-1] += f"  minimax {report['minimax_value']:+d}"
  if report.get("root_proven"):
    lines[-1] += f"  proven {report['root_proven_value']:+.0f}"
  rows = report["actions"]
  has_label = any("label" in row for row in rows)
  has_minimax = "minimax_value" in report
  has_proofs = "root_proven" in report
  total = max(sum(row["visits"] for row in rows), 1)
  header = f"{'action':>6}"
  if has_label:
    header += f"  {'label':<16}"
  header += f"  {'visits':>7}  {'Q':>7}  {'prior':>6}  {'share':>6}"
  if has_proofs:
    header += "  proven"
  if has_minimax:
    header += "  minimax"
  lines.append(header)
  for row in rows:
    line = f"{row['action']:>6}"
    if has_label:
      line += f"  {row.get('label', ''):<16}"
    line += (
      f"  {row['visits']:>7}  {row['q']:>+7.3f}  {row['prior']:>6.3f}  "
      f"{100 * row['visits'] / total:>5.1f}%"
    )
    if has_proofs:
      line += f"  {row['proven_value']:>+6.0f}" if row["proven"] else f"  {'':>6}"
    if has_minimax:
      line += f"  {row['minimax']:>+4d}" + (" *" if row["optimal"] else "")
    lines.append(line)
  legend = LEGEND if has_minimax else LEGEND.split("; minimax")[0]
  lines.append(f"({legend})")
  if report.get("action_is_optimal") is False:
    lines.append(
      f"note: the chosen action {report['action']} is not minimax-optimal "
      f"after {report['simulations']} simulations; more --simulations or "
      "--solver may fix it"
    )
  return "\n".join(lines)


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
        print(format_table(report))
    sys.stdout.flush()
  except BrokenPipeError:  # e.g. `mcgs-jax search ... | head`
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 1
  return 0
