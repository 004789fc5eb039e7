"""Graph reuse between moves: keep the part of a search graph below the move played.

After a search chose `action` and the game moved on, `reroot(graph, action)` returns a
graph whose root (node 0) is the child that `action` led to, holding everything the
search learned below it. Hand it to the next search (`search(..., graph=...)`,
`muzero_policy(..., graph=...)`): its playouts add to the statistics that are
already there, so the root starts with the child's visits instead of one.

Conventions of `reroot`:
  * Kept nodes are the new root and every node reachable from it through
    `children_index` (in graph mode a transposition may lead back into a part of the
    old graph that was reached first by another move order: such nodes are kept too,
    since they are reachable). Each keeps its visits, values, own evaluation, key,
    terminal flag, prior logits, embedding and all its edges (visits, rewards,
    discounts) unchanged; only node indices are renumbered.
  * New numbering: the new root is node 0; the other kept nodes follow in their old
    index order (`new = rank among kept nodes`, plus one for the nodes that were
    below the new root's old index). In tree mode every node's index stays larger
    than its parent's. Freed rows are reset to the empty value of each table,
    as every `mcgs_jax.Graph` field declares it (children and path marks -1,
    everything else 0).
  * The hash table is rebuilt from the kept nodes' keys with the probe rule of
    `hashing.probe`: a node goes into a free slot of the `probe_window` slots that
    start at `key[0] mod C`. Nodes are inserted in rounds; where two nodes want the
    same slot, the smaller new index wins and the other tries again, so the root
    always gets its first slot. The table is valid for lookups (every entry lies in
    its key's window) but need not be slot-for-slot the table a sequential insert
    would build. Nodes whose window is full are left out and counted in
    `dropped_inserts`, which is *reset* to that count: after `reroot`, as after a
    search, `number of filled slots + dropped_inserts == num_nodes`.
  * Every other counter (`transposition_hits`, `capacity_overflows`,
    `parallel_collisions`, `folded_evaluations`, `non_finite_evaluations`,
    `non_finite_roots`, `playouts_started`, `root_key_mismatches`) is kept: they
    count over the whole life of the graph. `path_marks` are reset to -1. Node
    evaluation counts, stored edge values and `edge_non_finite` marks move with
    their rows. `root_invalid_actions` is reset to all False (the next search
    replaces it, and the root's prior logits, with the new root's). `extra_data` is
    kept as it is.
  * With `max_nodes`, a game whose kept nodes outnumber it keeps only its most
    visited ones (`drop_least_visited`), so that a search continuing it has
    room for its new nodes: with `capacity - num_simulations`, no playout finds
    the graph full.
  * A game gets an *empty* graph (`num_nodes == 0`, visits 0, children -1, slots -1,
    counters 0) when its graph was empty, its root is terminal, the chosen edge was
    never expanded (with compact edges: or no root slot holds it), its child is
    terminal (the game is over), or `action` is out of `[0, A)` at run time. A
    search continuing the graph starts such a game afresh from its new root.
"""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax._src import checks, hashing
from mcgs_jax._src.batched import set_at, take
from mcgs_jax._src.graph import (
  COUNTER_FIELDS,
  EMPTY_VALUES,
  NODE_FIELDS,
  ROOT_INDEX,
  ROW_FIELDS,
  UNEXPANDED,
  Graph,
)
from mcgs_jax._src.kept_nodes import drop_least_visited, reachable_nodes


def _check_graph(caller: str, graph: Any) -> None:
  """TypeError unless `graph` is a `Graph` (a search's `search_graph`)."""
  if not isinstance(graph, Graph):
    hint = " (pass policy_output.search_graph)" if hasattr(graph, "search_graph") else ""
    raise TypeError(f"{caller}: graph must be a mcgs_jax.Graph{hint}, got {type(graph).__name__}")


def _check_action(graph: Graph, action: Any) -> jax.Array:
  """`action` as int32 `[B]` for `reroot(graph, action)`; TypeError unless `graph` is a
  `Graph`, ValueError for a wrong shape or dtype, or, when its values are known at
  trace time, for a value outside `[0, A)`."""
  _check_graph("reroot", graph)
  batch_size, num_actions = graph.batch_size, graph.num_actions
  if not isinstance(action, jax.core.Tracer):
    values = np.asarray(action)
    if values.shape != (batch_size,):
      raise ValueError(f"action must have shape [B] = ({batch_size},), got {values.shape}")
    if not np.issubdtype(values.dtype, np.integer):
      raise ValueError(f"action must be integer, got dtype {values.dtype}")
    bad = np.flatnonzero((values < 0) | (values >= num_actions))
    if bad.size:
      raise ValueError(
        f"action {values[bad[0]]} of game {bad[0]} is out of range [0, {num_actions})"
      )
    return jnp.asarray(values, jnp.int32)
  if action.shape != (batch_size,):
    raise ValueError(f"action must have shape [B] = ({batch_size},), got {action.shape}")
  if not jnp.issubdtype(action.dtype, jnp.integer):
    raise ValueError(f"action must be integer, got dtype {action.dtype}")
  return action.astype(jnp.int32)


def _check_max_nodes(max_nodes: Any) -> int | None:
  """`max_nodes` as an int, or None; ValueError unless it is None or an int >= 1."""
  if max_nodes is None:
    return None
  if isinstance(max_nodes, bool) or not isinstance(max_nodes, (int, np.integer)):
    raise ValueError(f"max_nodes must be None or an int >= 1, got {max_nodes!r}")
  if max_nodes < 1:
    raise ValueError(f"max_nodes must be None or an int >= 1, got {max_nodes}")
  return int(max_nodes)


def _rebuilt_hash_slots(
  graph: Graph, node_keys: jax.Array, num_kept: jax.Array, probe_window: int
) -> tuple[jax.Array, jax.Array]:
  """`rebuild_hash_slots` of the kept nodes, or in tree mode (no table) the empty
  table and no drop."""
  if graph.hash_slots.shape[1]:
    return hashing.rebuild_hash_slots(node_keys, num_kept, graph.hash_slots.shape[1], probe_window)
  return graph.hash_slots, jnp.zeros((graph.batch_size,), jnp.int32)


def _kept_nodes(
  graph: Graph, new_root: jax.Array, active: jax.Array, max_nodes: int | None
) -> tuple[Graph, jax.Array]:
  """`(graph, kept [B, N])`: the nodes reachable from `new_root` in the `active`
  games, at most `max_nodes` of them (`drop_least_visited`, whose edits the graph
  carries)."""
  kept = reachable_nodes(graph.children_index, new_root, active)
  if max_nodes is None or max_nodes >= graph.capacity:
    return graph, kept
  return drop_least_visited(graph, kept, new_root, active, max_nodes)


def _renumbering(kept: jax.Array, new_root: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
  """`(new_index [B, N], source [B, N], num_kept [B])` of the nodes `kept [B, N]`:
  the new index of every old node (-1 when freed; `new_root [B]` becomes 0, the
  others keep their order), the old index of every new row (0 past `num_kept`), and
  the number of nodes kept."""
  batch_size, capacity = kept.shape
  rank = jnp.cumsum(kept, axis=1, dtype=jnp.int32) - 1
  root_rank = take(rank, new_root)[:, None]
  old_index = jnp.arange(capacity, dtype=jnp.int32)[None]
  new_index = jnp.where(
    old_index == new_root[:, None], 0, jnp.where(rank < root_rank, rank + 1, rank)
  )
  new_index = jnp.where(kept, new_index, -1)
  num_kept = jnp.sum(kept, axis=1, dtype=jnp.int32)
  source = set_at(
    jnp.zeros((batch_size, capacity), jnp.int32),
    jnp.where(kept, new_index, capacity),
    jnp.broadcast_to(old_index, kept.shape),
    mode="drop",
  )
  return new_index, source, num_kept


def _root_child(graph: Graph, action: jax.Array) -> jax.Array:
  """`[B]` int32, the child of the root edge of `action [B]` (clipped to `[0, A)`),
  -1 if unexpanded; with compact edges the edge is the slot holding the action, and
  where no slot does (an action the search left out) the child is -1 too."""
  children = graph.children_index[:, ROOT_INDEX]
  if graph.children_actions is None:
    return take(children, jnp.clip(action, 0, graph.num_actions - 1))
  held = graph.children_actions[:, ROOT_INDEX] == action[:, None]  # [B, K]
  return jnp.where(jnp.any(held, axis=-1), take(children, jnp.argmax(held, axis=-1)), -1)


def _new_root(graph: Graph, action: jax.Array) -> tuple[jax.Array, jax.Array]:
  """`(child [B] int32, keep_game [B] bool)`: the child of the root edge of `action
  [B]` (0 where there is none), the new root, and whether the game keeps its graph:
  it has one, `action` is in `[0, A)`, and neither the root nor that child is
  terminal."""
  in_range = (action >= 0) & (action < graph.num_actions)
  child = _root_child(graph, action)
  clamped_child = jnp.maximum(child, 0)
  keep_game = (
    (graph.num_nodes > 0)
    & in_range
    & (child >= 0)
    & ~graph.node_terminal[:, ROOT_INDEX]
    & ~take(graph.node_terminal, clamped_child)
  )
  return clamped_child, keep_game


def _moved_rows(
  graph: Graph, new_index: jax.Array, source: jax.Array, num_kept: jax.Array
) -> dict[str, Any]:
  """Every `[B, N, ...]` table of `graph` in the new numbering (`_renumbering`'s
  `new_index [B, N]`, `source [B, N]` and `num_kept [B]`): row j holds old row
  `source[b, j]`, children point to the new indices, and the rows past `num_kept`
  and every path mark hold their empty values."""
  capacity = graph.capacity
  in_use = jnp.arange(capacity, dtype=jnp.int32)[None] < num_kept[:, None]  # new rows

  def move(table: jax.Array, fill: int | float) -> jax.Array:
    """Row `source[b, j]` of `table [B, N, ...]` at row j; `fill` past `num_kept`."""
    moved = take(table, source)
    mask = in_use.reshape(in_use.shape + (1,) * (table.ndim - 2))
    return jnp.where(mask, moved, jnp.asarray(fill, table.dtype))

  old_children = move(graph.children_index, UNEXPANDED)
  children_index = jnp.where(
    old_children >= 0, take(new_index, jnp.maximum(old_children, 0)), UNEXPANDED
  )
  moved = {
    name: jax.tree_util.tree_map(lambda table, fill=fill: move(table, fill), getattr(graph, name))
    for name, fill in ROW_FIELDS.items()
  }
  moved.update(
    node_keys=move(graph.node_keys, 0),
    children_index=children_index,
    path_marks=jnp.full_like(graph.path_marks, NODE_FIELDS["path_marks"]),
  )
  return moved


def reroot(
  graph: Graph,
  action: jax.Array,
  *,
  probe_window: int = hashing.DEFAULT_PROBE_WINDOW,
  max_nodes: int | None = None,
) -> Graph:
  """The graph below the move played, with that move's child as the new root.

  Jittable, for the whole batch at once; see the module docstring for what is kept,
  the new numbering and the games that come back empty.

  Args:
    graph: a searched `Graph` of `B` games (e.g. `policy_output.search_graph`).
    action: `[B]` int, the action played from each game's root.
    probe_window: the `probe_window` of the searches that built and will continue
      the graph (default: the search's default). The rebuilt table puts every key in
      that window, so the next search finds it.
    max_nodes: keep at most this many nodes per game, the most visited
      (`drop_least_visited`; None: all). With `capacity - num_simulations` (twice
      that with chance nodes) no playout of the next search finds the graph full;
      a game with no more nodes is rerooted as with None, bit for bit.

  Returns:
    A `Graph` with the same shapes, to pass as `graph=` to the next search.

  Raises:
    TypeError: for `graph` not a `Graph`.
    ValueError: for `probe_window` < 1, `max_nodes` not None or an int >= 1, `action`
      not an integer `[B]` array, or its values known at trace time and one outside
      `[0, A)` (under `jit` a game whose action is out of range gets an empty graph).
  """
  checks.check_int("probe_window", probe_window, minimum=1)
  max_nodes = _check_max_nodes(max_nodes)
  action = _check_action(graph, action)
  child, keep_game = _new_root(graph, action)
  graph, kept = _kept_nodes(graph, child, keep_game, max_nodes)  # kept: [B, N]
  new_index, source, num_kept = _renumbering(kept, child)
  moved = _moved_rows(graph, new_index, source, num_kept)
  hash_slots, dropped = _rebuilt_hash_slots(graph, moved["node_keys"], num_kept, probe_window)

  def counter(values: jax.Array) -> jax.Array:
    return jnp.where(keep_game, values, 0).astype(values.dtype)

  counters = {name: counter(getattr(graph, name)) for name in COUNTER_FIELDS}
  counters.update(dropped_inserts=dropped)
  return graph.replace(
    **moved,
    **counters,
    hash_slots=hash_slots,
    num_nodes=num_kept,
    root_invalid_actions=jnp.zeros_like(graph.root_invalid_actions),
  )


def empty_like(graph: Any) -> Graph:
  """A graph of `graph`'s shapes in which every game is empty (`num_nodes == 0`):
  every table holds its empty value (children -1, hash slots -1, path marks -1,
  everything else 0), as the rows `reroot` frees.

  `graph` may be a `Graph` or its `jax.eval_shape`. A search continuing it starts each
  game afresh from its root, so it is the first `graph=` of a jitted self-play loop
  that reroots after every move: every move then runs the same compiled function.
  """
  _check_graph("empty_like", graph)

  def empty(name: str, fill: Any) -> Any:
    return jax.tree_util.tree_map(
      lambda leaf: jnp.full(leaf.shape, fill, leaf.dtype), getattr(graph, name)
    )

  return Graph(**{name: empty(name, fill) for name, fill in EMPTY_VALUES.items()})
