"""MCTS-solver proofs on the graph: exact values proven from terminal states upwards.

A terminal node is proven with value 0 (its outcome is the reward of the edge that
leads there). An edge into a proven child has the exact value
`r(n, a) + discount(n, a) * proven(child)`. A node is proven when one of its edges is
proven to be worth `WIN` (nothing can beat it) or when every legal edge is proven; its
proven value is then the best exact edge value, and its `Q` is that value. A legal
edge is one with a positive prior probability (the game adapters give illegal
actions a zero prior) and, at the root, not in `invalid_actions`.

Values are assumed to lie in [LOSS, WIN] = [-1, 1], as two-player zero-sum game
outcomes do. Proofs reach a shared node's other parents when those are next on a
playout path: a stale proof is a missing proof, never a wrong one.
"""

import jax
import jax.numpy as jnp

from mcgs_jax._src.graph import Graph, ROOT_INDEX

WIN = 1.0
LOSS = -1.0


def legal_edges(graph: Graph, node_index):
  """`[A]` bool: actions with a positive prior (and valid at the root)."""
  legal = jax.nn.softmax(graph.children_prior_logits[node_index]) > 0
  return legal & ~(graph.root_invalid_actions & (node_index == ROOT_INDEX))


def proven_edges(graph: Graph, node_index):
  """`([A] bool, [A] float)`: which edges lead to a proven child, and their exact
  values (meaningful where proven)."""
  children = graph.children_index[node_index]
  known = jnp.maximum(children, 0)
  proven = (children >= 0) & graph.node_proven[known]
  exact = (graph.edge_rewards[node_index]
           + graph.edge_discounts[node_index] * graph.proven_values[known])
  return proven, exact


def prove_node(graph: Graph, node_index):
  """`(proven, value)` of one game's non-terminal node from its edges."""
  legal = legal_edges(graph, node_index)
  proven, exact = proven_edges(graph, node_index)
  proven &= legal
  wins = jnp.any(proven & (exact >= WIN))
  settled = jnp.any(legal) & jnp.all(proven | ~legal)
  value = jnp.max(jnp.where(proven, exact, -jnp.inf))
  is_proven = wins | settled
  return is_proven, jnp.where(is_proven, value, 0.0).astype(graph.proven_values.dtype)


def excluded_edges(graph: Graph, node_index):
  """`[A]` bool: proven edges that selection should not spend playouts on: those
  proven worth `LOSS` and those beaten by another proven edge, unless that would
  exclude every legal edge."""
  legal = legal_edges(graph, node_index)
  proven, exact = proven_edges(graph, node_index)
  proven &= legal
  best_proven = jnp.max(jnp.where(proven, exact, -jnp.inf))
  excluded = proven & ((exact <= LOSS) | (exact < best_proven))
  return excluded & jnp.any(legal & ~excluded)


def best_proven_action(graph: Graph):
  """`([B] bool, [B] int32)`: whether the root has a proven winning edge or is proven,
  and the best proven root action."""
  def one(graph):
    legal = legal_edges(graph, ROOT_INDEX)
    proven, exact = proven_edges(graph, ROOT_INDEX)
    proven &= legal
    scores = jnp.where(proven, exact, -jnp.inf)
    decided = graph.node_proven[ROOT_INDEX] | jnp.any(proven & (exact >= WIN))
    return decided, jnp.argmax(scores).astype(jnp.int32)
  return jax.vmap(one)(graph)


def prefer_proven(graph: Graph, action):
  """`action` `[B]`, replaced by the best proven root action where the root is decided
  (proven, or holding an edge proven worth `WIN`)."""
  decided, best = best_proven_action(graph)
  return jnp.where(decided, best, action)
