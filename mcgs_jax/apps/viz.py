"""Pictures of one game's search graph: Graphviz DOT text and a matplotlib drawing.

Both views show the part of the graph a reader can take in: the `max_nodes` most
visited nodes reachable from the root (grown best-first from the root, so the kept
nodes always form a connected piece that contains the root) and, optionally, only
nodes within `max_depth` edges of it. Every node shows its visits `N(n)` and value
`Q(n)` (for the player to move at `n`), every edge its action and its own visits
`N(n, a)`. A *shared* node is one that two or more edges of the graph lead to (a
transposition: the same state reached by different move orders); both views mark it.

Nothing here needs the graphviz binary or networkx: `to_dot` returns a string (render
it with `dot -Tsvg` or any online viewer), `plot_graph` lays the graph out by depth
itself. `matplotlib` is imported only by `plot_graph`.

Example:
  out = mg.muzero_policy(..., hash_fn=game.hash_fn)
  print(viz.to_dot(out.search_graph, game_index=0, max_nodes=30))
  viz.plot_graph(out.search_graph, game_index=0)
"""

import dataclasses
import heapq
from collections.abc import Callable, Sequence

import numpy as np

from mcgs_jax import ROOT_INDEX

ActionLabels = Sequence[str] | Callable[[int], str] | None

SHARED_COLOR = "#f4a261"  # orange: a node with two or more incoming edges
NODE_COLOR = "#a8c5e6"  # light blue: every other node
TERMINAL_COLOR = "#d9d9d9"  # grey: terminal nodes (no playout continues below)
PROVEN_WIN_COLOR = "#2a9d8f"  # outline of nodes proven +1 (solver)
PROVEN_LOSS_COLOR = "#e63946"  # outline of nodes proven -1 (solver)


@dataclasses.dataclass(frozen=True)
class SubGraph:
  """The part of one game's graph that `to_dot` and `plot_graph` show.

  Attributes:
    nodes: kept node indices, root first, in the order they were taken (most visited
      frontier node first).
    depth: shortest number of edges from the root, for every kept node.
    edges: `(parent, action, child, edge_visits)` for every expanded edge whose two
      ends are kept, sorted.
    in_degree: incoming edges of every kept node in the *whole* graph (a node with 2
      or more is shared).
    visits, values, terminal, proven, proven_values: per node of the whole game
      (`[N]` numpy arrays), read from the graph.
    total_nodes: nodes in use in this game (`num_nodes`).
  """

  nodes: list[int]
  depth: dict[int, int]
  edges: list[tuple[int, int, int, int]]
  in_degree: dict[int, int]
  visits: np.ndarray
  values: np.ndarray
  terminal: np.ndarray
  proven: np.ndarray
  proven_values: np.ndarray
  total_nodes: int

  def is_shared(self, node: int) -> bool:
    return self.in_degree.get(node, 0) >= 2


def _one_game(array, game_index: int, unbatched_ndim: int) -> np.ndarray:
  """`array[game_index]` as numpy, or `array` itself when it has no batch axis."""
  array = np.asarray(array)
  return array if array.ndim == unbatched_ndim else array[game_index]


def subgraph(
  graph, game_index: int = 0, *, max_nodes: int | None = 60, max_depth: int | None = None
) -> SubGraph:
  """Selects the nodes to show of game `game_index` (see the module docstring).

  Args:
    graph: a `mcgs_jax.Graph` (batched, `[B, N, ...]`, or one game, `[N, ...]`).
    game_index: which game of the batch.
    max_nodes: keep at most this many nodes (None: no limit). Nodes are taken
      best-first from the root: the most visited node adjacent to the kept ones comes
      next, so the kept set is connected and holds the root.
    max_depth: keep only nodes at most this many edges from the root (None: any).
  """
  if max_nodes is not None and max_nodes < 1:
    raise ValueError(f"max_nodes must be >= 1 or None, got {max_nodes}")
  if max_depth is not None and max_depth < 0:
    raise ValueError(f"max_depth must be >= 0 or None, got {max_depth}")
  children = _one_game(graph.children_index, game_index, 2)
  edge_visits = _one_game(graph.edge_visits, game_index, 2)
  visits = _one_game(graph.node_visits, game_index, 1)
  num_nodes = int(_one_game(graph.num_nodes, game_index, 0))

  in_degree, depth = _in_degrees_and_depths(children, num_nodes)

  # Best-first by visits from the root, within max_depth.
  limit = num_nodes if max_nodes is None else min(max_nodes, num_nodes)
  kept: list[int] = []
  seen = {ROOT_INDEX}
  queue = [(-int(visits[ROOT_INDEX]), ROOT_INDEX)]
  while queue and len(kept) < limit:
    _, node = heapq.heappop(queue)
    kept.append(node)
    for child in children[node].tolist():
      if child < 0 or child in seen:
        continue
      if max_depth is not None and depth[child] > max_depth:
        continue
      seen.add(child)
      heapq.heappush(queue, (-int(visits[child]), child))

  kept_set = set(kept)
  # With compact edges an edge's column is a slot; its action is the slot's.
  if graph.children_actions is None:
    edge_actions = np.broadcast_to(np.arange(children.shape[1]), children.shape)
  else:
    edge_actions = _one_game(graph.children_actions, game_index, 2)
  edges = sorted(
    (node, int(edge_actions[node, edge]), child, int(edge_visits[node, edge]))
    for node in kept
    for edge, child in enumerate(children[node].tolist())
    if child in kept_set
  )
  return SubGraph(
    nodes=kept,
    depth={n: depth[n] for n in kept},
    edges=edges,
    in_degree={n: in_degree.get(n, 0) for n in kept},
    visits=visits,
    values=_one_game(graph.node_values, game_index, 1),
    terminal=_one_game(graph.node_terminal, game_index, 1),
    proven=_one_game(graph.node_proven, game_index, 1),
    proven_values=_one_game(graph.proven_values, game_index, 1),
    total_nodes=num_nodes,
  )


def _in_degrees_and_depths(children, num_nodes: int) -> tuple[dict[int, int], dict[int, int]]:
  """`(in_degree, depth)` of one game's graph (`children` `[N, A]`): incoming edges
  of every node over the whole game, and the shortest depth from the root of every
  node it reaches (plain BFS)."""
  used = children[:num_nodes]
  in_degree: dict[int, int] = {}
  for child in used[used >= 0].tolist():
    in_degree[child] = in_degree.get(child, 0) + 1
  depth = {ROOT_INDEX: 0}
  frontier = [ROOT_INDEX]
  while frontier:
    next_frontier = []
    for node in frontier:
      for child in children[node].tolist():
        if child >= 0 and child not in depth:
          depth[child] = depth[node] + 1
          next_frontier.append(child)
    frontier = next_frontier
  return in_degree, depth


def _action_label(action: int, action_labels: ActionLabels) -> str:
  if action_labels is None:
    return str(action)
  if callable(action_labels):
    return str(action_labels(action))
  return str(action_labels[action])


def _node_lines(sub: SubGraph, node: int) -> list[str]:
  """Label lines of a node: name, visits and value, terminal / proven flags."""
  lines = [
    "root" if node == ROOT_INDEX else f"#{node}",
    f"N={int(sub.visits[node])} Q={float(sub.values[node]):+.2f}",
  ]
  if sub.terminal[node]:
    lines.append("terminal")
  if sub.proven[node]:
    lines.append(f"proven {float(sub.proven_values[node]):+g}")
  if sub.is_shared(node):
    lines.append(f"shared ({sub.in_degree[node]} parents)")
  return lines


def _dot_escape(text: str) -> str:
  """A DOT string literal's content: quotes and backslashes escaped, newlines as `\\n`."""
  return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def to_dot(
  graph,
  game_index: int = 0,
  *,
  max_nodes: int | None = 60,
  max_depth: int | None = None,
  action_labels: ActionLabels = None,
) -> str:
  """Graphviz DOT text of one game's search graph.

  Nodes are named `n<index>` and labelled with `N` and `Q` (plus "terminal",
  "proven +1/-1" and "shared (k parents)" when they apply); shared nodes are filled
  orange, terminal ones grey, proven ones get a green (+1) or red (-1) outline. Edges
  are labelled with the action and `N(n, a)`, and drawn wider with more visits.

  Args:
    graph: a `mcgs_jax.Graph`, e.g. `policy_output.search_graph`.
    game_index: which game of the batch.
    max_nodes, max_depth: which nodes to keep (see `subgraph`).
    action_labels: names of the actions, a sequence indexed by action or a function
      of the action; default: the action number.

  Returns:
    The DOT source, a `digraph` string.
  """
  sub = subgraph(graph, game_index, max_nodes=max_nodes, max_depth=max_depth)
  shared = sum(sub.is_shared(n) for n in sub.nodes)
  root_visits = max(int(sub.visits[ROOT_INDEX]), 1)
  out = [
    "digraph mcgs {",
    f"  // game {game_index}: {len(sub.nodes)} of {sub.total_nodes} nodes shown "
    f"(max_nodes={max_nodes}, max_depth={max_depth}), {len(sub.edges)} edges, "
    f"{shared} shared",
    "  // legend: orange fill = shared node (2+ incoming edges: a transposition); "
    "grey = terminal; green / red outline = proven +1 / -1;",
    "  // N = visits, Q = value for the player to move; edge label: action, N(n,a) = edge visits",
    '  graph [rankdir=TB, labelloc=t, fontsize=11, label="search graph, game '
    f'{game_index}: orange = shared node (transposition)"];',
    f'  node [shape=box, style="rounded,filled", fontsize=10, fillcolor="{NODE_COLOR}"];',
    "  edge [fontsize=9];",
  ]
  for node in sub.nodes:
    attributes = [f'label="{_dot_escape(chr(10).join(_node_lines(sub, node)))}"']
    if sub.is_shared(node):
      attributes.append(f'fillcolor="{SHARED_COLOR}"')
    elif sub.terminal[node]:
      attributes.append(f'fillcolor="{TERMINAL_COLOR}"')
    if sub.proven[node]:
      color = PROVEN_WIN_COLOR if sub.proven_values[node] > 0 else PROVEN_LOSS_COLOR
      attributes.append(f'color="{color}", penwidth=2.5')
    out.append(f"  n{node} [{', '.join(attributes)}];")
  for parent, action, child, visits in sub.edges:
    label = _dot_escape(f"{_action_label(action, action_labels)}\nN={visits}")
    width = 0.5 + 4.0 * np.sqrt(visits / root_visits)
    out.append(f'  n{parent} -> n{child} [label="{label}", penwidth={width:.2f}];')
  out.append("}")
  return "\n".join(out) + "\n"


def layered_layout(sub: SubGraph) -> dict[int, tuple[float, float]]:
  """`(x, y)` of every kept node: `y = -depth`; within a layer nodes are ordered by the
  mean x of their kept parents (one sweep down from the root) and spread evenly over
  [0, 1]."""
  layers: dict[int, list[int]] = {}
  for node in sub.nodes:
    layers.setdefault(sub.depth[node], []).append(node)
  parents: dict[int, list[int]] = {}
  for parent, _, child, _ in sub.edges:
    if sub.depth[parent] < sub.depth[child]:
      parents.setdefault(child, []).append(parent)
  position: dict[int, tuple[float, float]] = {}
  for level in sorted(layers):

    def order_key(node, level=level):
      xs = [position[p][0] for p in parents.get(node, []) if p in position]
      return (np.mean(xs) if xs else 0.5, -int(sub.visits[node]), node)

    layer = sorted(layers[level], key=order_key)
    for i, node in enumerate(layer):
      position[node] = ((i + 1) / (len(layer) + 1), -float(level))
  return position


def _edge_path(start, end, bend: bool, points: int = 16):
  """Points of an edge's line: straight down to a deeper layer; a downward arc
  (quadratic Bezier) for an edge within a layer or back up, so it does not run
  through the nodes between its ends."""
  if not bend:
    return [start, end]
  (x0, y0), (x1, y1) = start, end
  control = (0.5 * (x0 + x1), min(y0, y1) - 0.3 - 0.4 * abs(x1 - x0))
  t = np.linspace(0.0, 1.0, points)[:, None]
  curve = (
    (1 - t) ** 2 * np.array(start) + 2 * (1 - t) * t * np.array(control) + t**2 * np.array(end)
  )
  return [tuple(p) for p in curve]


def plot_graph(
  graph,
  game_index: int = 0,
  *,
  ax=None,
  max_nodes: int | None = 40,
  max_depth: int | None = None,
  action_labels: ActionLabels = None,
  show_labels: bool = True,
):
  """Draws one game's search graph with matplotlib, layered by depth from the root.

  Node area grows with visits; shared nodes (2+ incoming edges) are orange, terminal
  nodes grey squares, the rest blue; proven nodes get a green (+1) or red (-1) rim.
  Edge width grows with edge visits `N(n, a)`. With `show_labels`, every node is
  labelled `N` / `Q` and, when at most 30 edges are shown, every edge with its
  action. The nodes are drawn as scatter points (one `PathCollection` per kind), one
  point per kept node.

  Args:
    graph: a `mcgs_jax.Graph`.
    game_index: which game of the batch.
    ax: matplotlib axes to draw on (default: a new figure's).
    max_nodes, max_depth: which nodes to keep (see `subgraph`).
    action_labels: names of the actions (sequence or function), default numbers.
    show_labels: write N/Q next to nodes and actions on edges.

  Returns:
    The matplotlib `Axes`.
  """
  import matplotlib.pyplot as plt

  sub = subgraph(graph, game_index, max_nodes=max_nodes, max_depth=max_depth)
  position = layered_layout(sub)
  if ax is None:
    depth_count = max(sub.depth.values()) + 1
    widest = max(list(sub.depth.values()).count(d) for d in range(depth_count))
    _, ax = plt.subplots(figsize=(min(18, 2 + 1.1 * widest), 1.2 + 1.4 * depth_count))
  root_visits = max(int(sub.visits[ROOT_INDEX]), 1)
  _draw_edges(ax, sub, position, root_visits, action_labels, show_labels)
  _draw_nodes(ax, sub, position, root_visits, show_labels)
  _draw_legend_and_axes(ax, sub, game_index)
  return ax


def _draw_edges(ax, sub: SubGraph, position, root_visits: int, action_labels, show_labels):
  """`plot_graph`'s edges, their width growing with their visits, and with
  `show_labels` and at most 30 of them their actions."""
  from matplotlib.collections import LineCollection

  segments = [
    _edge_path(position[p], position[c], sub.depth[c] <= sub.depth[p]) for p, _, c, _ in sub.edges
  ]
  widths = [0.4 + 5.0 * np.sqrt(v / root_visits) for _, _, _, v in sub.edges]
  ax.add_collection(
    LineCollection(segments, linewidths=widths, colors="#6c757d", alpha=0.6, zorder=1)
  )
  if show_labels and len(sub.edges) <= 30:
    for (_, action, _, _), path in zip(sub.edges, segments, strict=True):
      x, y = path[len(path) // 2]
      ax.text(
        x,
        y,
        _action_label(action, action_labels),
        fontsize=7,
        color="#495057",
        ha="center",
        va="center",
        zorder=2,
        bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.8),
      )


def _draw_nodes(ax, sub: SubGraph, position, root_visits: int, show_labels: bool):
  """`plot_graph`'s nodes, one scatter of each kind, and with `show_labels` their
  `N` / `Q` labels."""
  kinds: dict[str, list[int]] = {"node": [], "shared": [], "terminal": []}
  for node in sub.nodes:
    kind = "shared" if sub.is_shared(node) else "terminal" if sub.terminal[node] else "node"
    kinds[kind].append(node)
  styles = {
    "node": (NODE_COLOR, "o"),
    "shared": (SHARED_COLOR, "o"),
    "terminal": (TERMINAL_COLOR, "s"),
  }
  for kind, nodes in kinds.items():
    if not nodes:
      continue
    color, marker = styles[kind]
    rims = [
      (PROVEN_WIN_COLOR if sub.proven_values[n] > 0 else PROVEN_LOSS_COLOR)
      if sub.proven[n]
      else "#343a40"
      for n in nodes
    ]
    ax.scatter(
      [position[n][0] for n in nodes],
      [position[n][1] for n in nodes],
      s=[40 + 600 * np.sqrt(sub.visits[n] / root_visits) for n in nodes],
      c=color,
      marker=marker,
      edgecolors=rims,
      linewidths=[2.5 if sub.proven[n] else 0.8 for n in nodes],
      zorder=3,
    )
  if show_labels:
    for node in sub.nodes:
      x, y = position[node]
      ax.text(
        x,
        y - 0.18,
        f"{int(sub.visits[node])}\n{float(sub.values[node]):+.2f}",
        fontsize=7,
        ha="center",
        va="top",
        zorder=4,
      )


def _draw_legend_and_axes(ax, sub: SubGraph, game_index: int):
  """`plot_graph`'s legend of the node kinds, depth axis and title."""
  from matplotlib.lines import Line2D

  handles = [
    Line2D([], [], marker="o", ls="", color=NODE_COLOR, mec="#343a40", label="node"),
    Line2D(
      [], [], marker="o", ls="", color=SHARED_COLOR, mec="#343a40", label="shared (2+ parents)"
    ),
    Line2D([], [], marker="s", ls="", color=TERMINAL_COLOR, mec="#343a40", label="terminal"),
  ]
  if sub.proven[sub.nodes].any():
    handles += [
      Line2D(
        [], [], marker="o", ls="", color="white", mec=PROVEN_WIN_COLOR, mew=2.5, label="proven +1"
      ),
      Line2D(
        [], [], marker="o", ls="", color="white", mec=PROVEN_LOSS_COLOR, mew=2.5, label="proven -1"
      ),
    ]
  ax.legend(handles=handles, loc="upper right", fontsize=8, framealpha=0.9)
  deepest = max(sub.depth.values())
  ax.set_xlim(0, 1)
  ax.set_ylim(-deepest - 0.6, 0.4)
  ax.set_yticks([-d for d in range(deepest + 1)])
  ax.set_yticklabels([str(d) for d in range(deepest + 1)])
  ax.set_ylabel("depth")
  ax.set_xticks([])
  for side in ("top", "right", "bottom"):
    ax.spines[side].set_visible(False)
  ax.set_title(
    f"game {game_index}: {len(sub.nodes)} of {sub.total_nodes} nodes (labels: N, Q; width: visits)",
    fontsize=10,
  )
