"""The nodes of a graph reachable from a node, in every game (what `reroot` keeps)."""

import jax
import jax.numpy as jnp

from mcgs_jax._src.batched import set_at, take


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
