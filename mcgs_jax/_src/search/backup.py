"""Backup, the last step of a simulation: the playout is counted on its edges and
every node on its path is recomputed from its edges (the idempotent update of
Monte-Carlo Graph Search), and with the solver re-proven.
"""

import chex
import jax
import jax.numpy as jnp

from mcgs_jax._src import proofs, rows
from mcgs_jax._src.batched import add_at, drop_unless, set_at, take
from mcgs_jax._src.graph import Graph
from mcgs_jax._src.options import DEFAULT_OPTIONS, GraphOptions
from mcgs_jax._src.search.path import Path


def recompute_node_and_edges(
  graph: Graph, node_index: chex.Array
) -> tuple[chex.Array, chex.Array, chex.Array]:
  """`(N(n), Q(n), [A] Q(n, a))` of one game's node from its edges (the idempotent
  update): `N(n) = k(n) + sum_a N(n, a)`, `Q(n) = (k(n) U(n) + sum_a N(n, a) Q(n, a))
  / N(n)`, with `k(n)` its own evaluations (1 unless `fold_evaluations`), and the
  live edge values `Q(n, a)` it used (what backup stores in `edge_values`)."""
  qvalues = graph.qvalues(node_index)
  visits, value = node_update(
    graph.node_evaluations[node_index],
    graph.raw_values[node_index],
    graph.edge_visits[node_index],
    qvalues,
  )
  return visits, value.astype(graph.node_values.dtype), qvalues.astype(graph.edge_values.dtype)


def node_update(
  evaluations: chex.Array, raw_values: chex.Array, edge_visits: chex.Array, qvalues: chex.Array
) -> tuple[chex.Array, chex.Array]:
  """`(N(n) int32, Q(n))` of the idempotent update, over the last axis of `edge_visits`
  and `qvalues` (`[..., A]`; `evaluations` `k(n)` and `raw_values` `U(n)` are `[...]`):
  `N(n) = k(n) + sum_a N(n, a)`, `Q(n) = (k(n) U(n) + sum_a N(n, a) Q(n, a)) / N(n)`."""
  visits = evaluations + jnp.sum(edge_visits, axis=-1)
  # Unvisited edges weigh 0; where() keeps a NaN in an unexpanded slot out of the sum.
  weighted = jnp.where(edge_visits > 0, edge_visits * qvalues, 0.0)
  own = evaluations.astype(raw_values.dtype) * raw_values
  # max(., 1): an unused row (k = 0, read for a game off the path and then dropped)
  # would divide 0 by 0.
  value = (own + rows.row_sum(weighted)) / jnp.maximum(visits, 1)
  return visits.astype(jnp.int32), value


def _record_leaf_proof(graph: Graph, path: Path) -> Graph:
  """Re-proves the existing non-terminal node a playout stopped at, so a proof its
  children already hold moves up even though the leaf is not re-entered (and, with
  `node_unproven_edges`, recounts its unproven edges)."""
  clamped_leaf = jnp.maximum(path.leaf, 0)
  existing = (path.leaf >= 0) & ~path.leaf_is_new & ~take(graph.node_terminal, clamped_leaf)
  proven, proven_value, unproven = jax.vmap(proofs.prove_and_count)(graph, clamped_leaf)
  target = drop_unless(
    existing & proven & ~take(graph.node_proven, clamped_leaf), clamped_leaf, graph.capacity
  )
  graph = _set_unproven(graph, drop_unless(existing, clamped_leaf, graph.capacity), unproven)
  return graph.replace(
    node_proven=set_at(graph.node_proven, target, True, mode="drop"),
    proven_values=set_at(graph.proven_values, target, proven_value, mode="drop"),
    node_values=set_at(graph.node_values, target, proven_value, mode="drop"),
  )


def _set_unproven(graph: Graph, target: chex.Array, unproven: chex.Array) -> Graph:
  """`graph` with `unproven [B]` written to `node_unproven_edges` at `target [B]`
  (dropped where out of range); unchanged without that table."""
  if graph.node_unproven_edges is None:
    return graph
  counts = set_at(graph.node_unproven_edges, target, unproven, mode="drop")
  return graph.replace(node_unproven_edges=counts)


def backup(graph: Graph, path: Path, *, options: GraphOptions = DEFAULT_OPTIONS) -> Graph:
  """Counts the playout on its edges and recomputes every node on the path.

  Walks the path from its end to the root: `N(n, a) += 1` on each edge (the last one
  only if its child exists), then the idempotent update of `n`, whose edge values it
  stores in `edge_values`. A playout that ended at a terminal node adds one to that
  node's visits; one whose evaluation was folded into its leaf (`path.leaf_folded`)
  recomputes the leaf first. With `options.solver`, each node on the path is also
  re-proven (`proofs.prove_node`, from the legal edges selection recorded in
  `path.legal`); a proven node's `Q` is its proven value.
  """
  capacity = graph.capacity
  clamped_leaf = jnp.maximum(path.leaf, 0)
  arrived = (path.leaf >= 0) & take(graph.node_terminal, clamped_leaf) & ~path.leaf_is_new
  graph = graph.replace(
    node_visits=add_at(
      graph.node_visits, drop_unless(arrived, clamped_leaf, capacity), 1, mode="drop"
    )
  )
  if options.fold_evaluations:
    visits, value, edge_values = jax.vmap(recompute_node_and_edges)(graph, clamped_leaf)
    folded = drop_unless(path.leaf_folded, clamped_leaf, capacity)
    graph = graph.replace(
      node_visits=set_at(graph.node_visits, folded, visits, mode="drop"),
      node_values=set_at(graph.node_values, folded, value, mode="drop"),
      edge_values=set_at(graph.edge_values, folded, edge_values, mode="drop"),
    )
  solver = options.solver
  if solver:
    graph = _record_leaf_proof(graph, path)
  longest = jnp.max(path.length)

  def update(step: chex.Array, graph: Graph) -> Graph:
    depth = longest - 1 - step
    on_path = depth < path.length
    node = path.nodes[:, depth]
    count_edge = on_path & ((depth < path.length - 1) | (path.leaf >= 0))
    edge_visits = add_at(
      graph.edge_visits,
      (drop_unless(count_edge, node, capacity), path.actions[:, depth]),
      1,
      mode="drop",
    )
    graph = graph.replace(edge_visits=edge_visits)
    visits, value, edge_values = jax.vmap(recompute_node_and_edges)(graph, node)
    target = drop_unless(on_path, node, capacity)
    if solver:
      legal = None if path.legal is None else path.legal[:, depth]
      proven, proven_value, unproven = jax.vmap(proofs.prove_and_count)(graph, node, legal)
      value = jnp.where(proven, proven_value, value)
      graph = _set_unproven(graph, target, unproven).replace(
        node_proven=set_at(graph.node_proven, target, proven, mode="drop"),
        proven_values=set_at(graph.proven_values, target, proven_value, mode="drop"),
      )
    return graph.replace(
      node_visits=set_at(graph.node_visits, target, visits, mode="drop"),
      node_values=set_at(graph.node_values, target, value, mode="drop"),
      edge_values=set_at(graph.edge_values, target, edge_values, mode="drop"),
    )

  return jax.lax.fori_loop(0, longest, update, graph)
