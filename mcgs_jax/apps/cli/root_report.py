"""What `mcgs-jax search` reports of a searched position: the root statistics read
out of the searched graph (`root_arrays`), the exact value of every legal action
where a solver decides the position, one report dict per position
(`position_report`), and the root table printed without `--json` (`format_table`)."""

import os
from collections.abc import Sequence
from typing import Any

# Exact solving is quick up to this many empty cells.
CONNECT_FOUR_MAX_EMPTY = 16
_CONNECT_FOUR_CELLS = 42

LEGEND = (
  "visits: simulations through the action; Q: its mean value for the player "
  "to move (-1 loss .. +1 win); prior: the evaluator's prior; share: visits / "
  "all root visits; minimax: exact value (+1 win, 0 draw, -1 loss); * = "
  "optimal action"
)


def _exact_action_values(game, spec: str, moves: Sequence[int], state) -> dict[int, int] | None:
  """Exact value of every legal action for the player to move, or None if no solver
  applies (the solvers `search_command`'s docstring lists)."""
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


def root_arrays(game, output, batch) -> dict[str, Any]:
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


def position_report(game, args, moves: list[int], state, root: dict[str, Any]) -> dict:
  """The report dict of one position, `root` its `root_arrays` (numpy)."""
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
