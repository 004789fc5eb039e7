"""The nodes a rerooted graph keeps, in every game: those reachable from the new
root (`reachable_nodes`), and, under a budget of `max_nodes`, the most visited of
them (`drop_least_visited`), with the nodes above a dropped one recomputed."""

import jax
import jax.numpy as jnp

from mcgs_jax._src.batched import set_at, take
from mcgs_jax._src.graph import ROW_FIELDS, UNEXPANDED, Graph
from mcgs_jax._src.search.backup import node_update, recompute_node_and_edges


def reachable_nodes(children_index: jax.Array, start: jax.Array, active: jax.Array) -> jax.Array:
  """The nodes reachable from `start` in every game.

  Args:
    children_index: `[B, N, A]` int32, child of each edge, -1 when unexpanded.
    start: `[B]` int32, the node to start from (ignored where not `active`).
    active: `[B]` bool, games to search; the others get no node at all.

  Returns:
    `[B, N]` bool, True for `start` and every node reachable from it.

  The set grows by sweeps over the nodes in index order: a reached node marks its
  children, in all games at once. A search numbers a node when it first adds it, so
  most edges lead to a higher index, and one sweep follows them all, however deep
  the graph. An edge to a lower index (a transposition into an older part of the
  graph) whose source was reached late needs another sweep; sweeps repeat until no
  reached node has an unreached child. (Growing the set one edge per step over
  the whole `[B, N, A]` table instead cost a step per level of the graph, which
  made reachability most of `reroot`'s time.)
  """
  batch_size, capacity, _ = children_index.shape
  reached = jnp.zeros((batch_size, capacity), jnp.bool_)
  reached = set_at(reached, jnp.where(active, start, capacity), True, mode="drop")
  expanded = children_index >= 0

  def visit(node: jax.Array, reached: jax.Array) -> jax.Array:
    children = jax.lax.dynamic_index_in_dim(children_index, node, axis=1, keepdims=False)
    marked = jax.lax.dynamic_index_in_dim(reached, node, axis=1, keepdims=True) & (children >= 0)
    return set_at(reached, jnp.where(marked, children, capacity), True, mode="drop")

  def incomplete(reached: jax.Array) -> jax.Array:
    children_reached = take(reached, jnp.maximum(children_index, 0))  # [B, N, A]
    return jnp.any(reached[:, :, None] & expanded & ~children_reached)

  def sweep(carry: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
    reached, _ = carry
    reached = jax.lax.fori_loop(0, capacity, visit, reached)
    return reached, incomplete(reached)

  reached, _ = jax.lax.while_loop(lambda carry: carry[1], sweep, (reached, jnp.array(True)))
  return reached


def drop_least_visited(
  graph: Graph, reached: jax.Array, new_root: jax.Array, active: jax.Array, max_nodes: int
) -> tuple[Graph, jax.Array]:
  """Keeps at most `max_nodes` of the `reached` nodes of every game: the new root
  and those with the most visits.

  Args:
    graph: the graph before renumbering (old node indices).
    reached: `[B, N]` bool, the nodes reachable from `new_root` (`reachable_nodes`).
    new_root: `[B]` int32, the node that becomes the root.
    active: `[B]` bool, the games `reached` was computed for.
    max_nodes: the most nodes a game may keep (at least 1).

  Returns:
    `(graph, kept)`: `kept` `[B, N]` bool, the nodes to keep, and the graph with
    every edge from a kept node to a dropped one made unexpanded (child -1, visits,
    reward, discount and edge value cleared).

  Where a game reached more than `max_nodes` nodes, let `t` be the `max_nodes`-th
  largest visit count among them: edges into nodes with at most `t` visits are cut
  (never an edge into the new root), and the kept nodes are those still reachable
  from the new root, at most `max_nodes` of them (the root and nodes with more
  than `t` visits). A cut edge whose child stays reachable another way stays.

  A kept node that loses an edge loses that edge's visits: `N(n) = k(n) + sum_a
  N(n, a)` over the edges left, and `Q(n)` is recomputed over them (a proven node
  keeps its proven value). In graph mode that is all (edge visits and child visits
  are separate counts, and the parents' edge values are the values they last
  used, as after any change below them). In tree mode (no hash table) the visits
  a node lost are also taken from the edge into it and every edge above it, and
  every node above is recomputed from its children's new values, bottom up, so
  that the tree's counts and values stay exact.
  """
  capacity = graph.capacity
  children = graph.children_index
  clamped_children = jnp.maximum(children, 0)
  visits = jnp.where(reached, graph.node_visits, -1)
  threshold = jnp.sort(visits, axis=1)[:, capacity - max_nodes]
  over = jnp.sum(reached, axis=1) > max_nodes
  threshold = jnp.where(over, threshold, -1)  # -1: no node has fewer visits
  cut = (
    (children >= 0)
    & (take(graph.node_visits, clamped_children) <= threshold[:, None, None])
    & (children != new_root[:, None, None])
  )
  kept = reachable_nodes(jnp.where(cut, UNEXPANDED, children), new_root, active)
  # Edges of kept nodes into dropped ones (the other rows are freed anyway).
  removed = kept[:, :, None] & (children >= 0) & ~take(kept, clamped_children)  # [B, N, A]
  lost_visits = jnp.sum(jnp.where(removed, graph.edge_visits, 0), axis=2)  # [B, N]

  def clear(name: str) -> jax.Array:
    table = getattr(graph, name)
    return jnp.where(removed, jnp.asarray(ROW_FIELDS[name], table.dtype), table)

  names = ("children_index", "edge_visits", "edge_rewards", "edge_discounts", "edge_values")
  graph = graph.replace(**{name: clear(name) for name in names})
  if graph.hash_slots.shape[1]:
    return _recompute_graph_nodes(graph, lost_visits > 0), kept
  return _recompute_tree_nodes(graph, lost_visits), kept


def _recompute_graph_nodes(graph: Graph, changed: jax.Array) -> Graph:
  """`graph` with `N(n)` and `Q(n)` of the `changed [B, N]` nodes recomputed over
  their edges' visits and stored `edge_values` (a proven node keeps its value)."""
  visits, value = node_update(
    graph.node_evaluations, graph.raw_values, graph.edge_visits, graph.edge_values
  )
  value = jnp.where(graph.node_proven, graph.proven_values, value)
  return graph.replace(
    node_visits=jnp.where(changed, visits, graph.node_visits),
    node_values=jnp.where(changed, value.astype(graph.node_values.dtype), graph.node_values),
  )


def _recompute_tree_nodes(graph: Graph, lost_visits: jax.Array) -> Graph:
  """`graph` (a tree) with the visits each node lost (`lost_visits [B, N]`, on its
  own removed edges) taken from every edge above it, and every node that lost
  any recomputed from its children (`backup.recompute_node_and_edges`), children
  first: in a tree a child's index is larger than its parent's."""
  capacity = graph.capacity

  def recompute(step: jax.Array, carry: tuple[Graph, jax.Array]) -> tuple[Graph, jax.Array]:
    graph, lost = carry
    node = jnp.full((graph.batch_size,), capacity - 1 - step, jnp.int32)
    children = take(graph.children_index, node)  # [B, A]
    lost_below = jnp.where(children >= 0, take(lost, jnp.maximum(children, 0)), 0)
    edge_visits = take(graph.edge_visits, node) - lost_below
    lost_here = take(lost, node) + jnp.sum(lost_below, axis=1)
    graph = graph.replace(edge_visits=set_at(graph.edge_visits, node, edge_visits))
    visits, value, edge_values = jax.vmap(recompute_node_and_edges)(graph, node)
    changed = lost_here > 0
    value = jnp.where(take(graph.node_proven, node), take(graph.proven_values, node), value)
    target = jnp.where(changed, node, capacity)
    graph = graph.replace(
      node_visits=set_at(graph.node_visits, target, visits, mode="drop"),
      node_values=set_at(graph.node_values, target, value, mode="drop"),
      edge_values=set_at(graph.edge_values, target, edge_values, mode="drop"),
    )
    return graph, set_at(lost, node, lost_here)

  graph, _ = jax.lax.fori_loop(0, capacity, recompute, (graph, lost_visits))
  return graph
