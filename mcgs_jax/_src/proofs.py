"""MCTS-solver proofs on the graph: exact values proven from terminal states upwards.

A terminal node is proven with value 0 (its outcome is the reward of the edge that
leads there). An edge into a proven child has the exact value
`r(n, a) + discount(n, a) * proven(child)`. A node is proven when

  * every legal edge is proven (full expansion; sound for any game), its value the
    best exact edge value; or
  * early, when one legal edge is proven worth exactly the highest value the game
    allows (`graph.value_bounds[..., 1]`, from `GraphOptions.value_bounds`; (-1, 1)
    by default, as two-player zero-sum outcomes are): nothing can beat it.

A legal edge is one with a positive prior probability (the game adapters give
illegal actions a zero prior) and, at the root, not in `invalid_actions`.

With compact edges a node may have more valid actions than slots; those left out
(`Graph.node_dropped_actions`) are never searched, so nothing is known of them:
such a node is proven early by a winning edge (nothing beats the highest value)
but never by full expansion, which would take its best slot for its best move and
could prove a loss while a winning move went unexamined.

Only exact values that lie within the stated bounds take a shortcut. An exact value
above the highest bound (or below the lowest) means the bounds are wrong, e.g. a
single-player game with rewards run with the default (-1, 1): such an edge never
proves its node early, and a node holding one proves only by full expansion. (A
coincidence, a wrongly bounded game whose edge is worth exactly the highest bound,
cannot be told apart; give `value_bounds=None` for games without bounds, then every
proof is by full expansion.) With `value_bounds=None` the bounds are -inf and +inf
and no shortcut ever fires.

Proofs reach a shared node's other parents when those are next on a playout path:
a stale proof is a missing proof, never a wrong one.

With `GraphOptions.proof_first`, backup also keeps each node's count of legal edges
into no proven child (`prove_and_count`, `Graph.node_unproven_edges`), and selection
takes only the edges cheapest to prove by it (`proof_order_excluded`); it reads the
proofs, never writes one.
"""

import chex
import jax
import jax.numpy as jnp

from mcgs_jax._src import rows
from mcgs_jax._src.graph import ROOT_INDEX, Graph

# Relative tolerance within which an exact value counts as equal to a bound: exact
# values are sums and products of float32 rewards and discounts (e.g. `0 + -1 * -1`),
# so a value meant to be the bound may miss it by a few ulps below. Never above:
# a value past a bound is out of bounds, not rounding.
BOUND_TOLERANCE = 1e-5


def at_bound(exact: chex.Array, bound: chex.Array, side: float) -> chex.Array:
  """`[A]` bool: `exact` equals the finite `bound` within `BOUND_TOLERANCE` on the
  inside (`side` +1: the highest bound, values just below it; -1: the lowest)."""
  finite = jnp.isfinite(bound)
  # Where the bound is infinite the tolerance is 0 (inf * 0 would be NaN, and
  # inf - inf too); `finite` rules those rows out anyway.
  tolerance = jnp.where(finite, BOUND_TOLERANCE * jnp.maximum(1.0, jnp.abs(bound)), 0.0)
  gap = side * (bound - exact)  # >= 0 inside the bound, < 0 past it
  return finite & (gap >= 0) & (gap <= tolerance)


def legal_edges(graph: Graph, node_index: chex.Array) -> chex.Array:
  """`[W]` bool: edges with a positive prior (and valid at the root; an empty slot
  of compact edges has a zero prior)."""
  legal = rows.positive_probability(graph.children_prior_logits[node_index])
  return legal & ~(graph.root_invalid_edges & (node_index == ROOT_INDEX))


def has_dropped_actions(graph: Graph, node_index: chex.Array) -> chex.Array:
  """Scalar bool: one game's node has valid actions that got no slot (compact
  edges; never in a dense graph)."""
  if graph.node_dropped_actions is None:
    return jnp.array(False)
  return graph.node_dropped_actions[node_index] > 0


def proven_edges(graph: Graph, node_index: chex.Array) -> tuple[chex.Array, chex.Array]:
  """`([A] bool, [A] float)`: which edges lead to a proven child, and their exact
  values (meaningful where proven)."""
  children = graph.children_index[node_index]
  clamped_children = jnp.maximum(children, 0)
  proven = (children >= 0) & graph.node_proven[clamped_children]
  exact = (
    graph.edge_rewards[node_index]
    + graph.edge_discounts[node_index] * graph.proven_values[clamped_children]
  )
  return proven, exact


def in_bounds(graph: Graph, proven: chex.Array, exact: chex.Array) -> chex.Array:
  """Scalar bool: every proven legal edge (`proven`, `[A]`) has an exact value within
  `graph.value_bounds` (one game's `[2]`). False means the bounds are wrong for this
  game (e.g. rewards along the way): the node then takes no shortcut."""
  return ~jnp.any(proven & ~_inside_bounds(graph, exact))


def _inside_bounds(graph: Graph, exact: chex.Array) -> chex.Array:
  """`[A]` bool: `exact` lies within `graph.value_bounds`; a NaN does not."""
  return (exact >= graph.value_bounds[0]) & (exact <= graph.value_bounds[1])


def winning_edges(graph: Graph, proven: chex.Array, exact: chex.Array) -> chex.Array:
  """`[A]` bool: the proven legal edges (`proven`, `[A]`) that prove their node at
  once: worth exactly the highest bound (`graph.value_bounds[1]` of one game), while
  every proven edge of the node is within the bounds (`in_bounds`)."""
  return proven & at_bound(exact, graph.value_bounds[1], 1.0) & in_bounds(graph, proven, exact)


@chex.dataclass(frozen=True)
class _NodeProof:
  """What the proofs read of one game's node (`A` actions)."""

  legal: chex.Array  # [A] bool, `legal_edges`.
  proven: chex.Array  # [A] bool, legal edges into a proven child.
  exact: chex.Array  # [A] float, their exact values (meaningful where proven).
  best: chex.Array  # [] float, the best exact value of a proven edge; -inf if none.
  unproven: chex.Array  # [] int32, legal edges into no proven child.
  settled: chex.Array  # [] bool, it has legal edges, every one is proven, none dropped.
  in_bounds: chex.Array  # [] bool, `in_bounds`.
  wins: chex.Array  # [] bool, a `winning_edges` edge proves it at once.


def _max_sum_then_ors(
  first: tuple[chex.Array, ...], second: tuple[chex.Array, ...]
) -> tuple[chex.Array, ...]:
  """The combining step of `_node_proof`'s reduction: the maximum of the first
  operands, the sum of the second, the or of the others."""
  ors = tuple(a | b for a, b in zip(first[2:], second[2:], strict=True))
  return (jax.lax.max(first[0], second[0]), first[1] + second[1]) + ors


def _node_proof(
  graph: Graph, node_index: chex.Array, legal: chex.Array | None = None
) -> _NodeProof:
  """`_NodeProof` of one game's non-terminal node; `legal` `[A]` its `legal_edges`
  where the caller has them."""
  if legal is None:
    legal = legal_edges(graph, node_index)
  proven, exact = proven_edges(graph, node_index)
  proven &= legal
  # One reduction over the actions for the five: on the CPU each reduction that XLA
  # does not merge is a loop of its own, run at every depth of selection and backup.
  # Maximum, integer sum and or are exact in any order, so the values are those of
  # `jnp.max`, `jnp.sum` and `jnp.any`.
  best, unproven, any_legal, any_outside, any_winning = jax.lax.reduce(
    (
      jnp.where(proven, exact, -jnp.inf),
      (legal & ~proven).astype(jnp.int32),
      legal,
      proven & ~_inside_bounds(graph, exact),
      proven & at_bound(exact, graph.value_bounds[1], 1.0),
    ),
    (jnp.array(-jnp.inf, exact.dtype), jnp.array(0, jnp.int32)) + (jnp.array(False),) * 3,
    _max_sum_then_ors,
    (0,),
  )
  return _NodeProof(
    legal=legal,
    proven=proven,
    exact=exact,
    best=best,
    unproven=unproven,
    settled=any_legal & (unproven == 0) & ~has_dropped_actions(graph, node_index),
    in_bounds=~any_outside,
    wins=any_winning & ~any_outside,
  )


def prove_node(
  graph: Graph, node_index: chex.Array, legal: chex.Array | None = None
) -> tuple[chex.Array, chex.Array]:
  """`(proven, value)` of one game's non-terminal node from its edges (`legal` `[A]`:
  its `legal_edges`, computed here when None)."""
  proven, value, _ = prove_and_count(graph, node_index, legal)
  return proven, value


def prove_and_count(
  graph: Graph, node_index: chex.Array, legal: chex.Array | None = None
) -> tuple[chex.Array, chex.Array, chex.Array]:
  """`prove_node`'s `(proven, value)` and the node's legal edges into no proven child
  (`[]` int32, what `Graph.node_unproven_edges` stores)."""
  proof = _node_proof(graph, node_index, legal)
  is_proven = proof.wins | proof.settled
  value = jnp.where(is_proven, proof.best, 0.0).astype(graph.proven_values.dtype)
  return is_proven, value, proof.unproven


def excluded_edges(graph: Graph, node_index: chex.Array) -> chex.Array:
  """`[A]` bool: proven edges that selection should not spend playouts on: those
  proven worth exactly the lowest bound (`graph.value_bounds[0]`; nothing is worse)
  and those beaten by another proven edge, unless that would exclude every legal
  edge. The first rule holds only while every proven edge is within the bounds
  (`in_bounds`); the second always does (an exact value beats it)."""
  proof = _node_proof(graph, node_index)
  losing = at_bound(proof.exact, graph.value_bounds[0], -1.0) & proof.in_bounds
  excluded = proof.proven & (losing | (proof.exact < proof.best))
  return excluded & jnp.any(proof.legal & ~excluded)


def proof_order_excluded(graph: Graph, node_index: chex.Array, excluded: chex.Array) -> chex.Array:
  """`[W]` bool: with `GraphOptions.proof_first`, the edges of one game's node that
  selection leaves for later: the illegal ones, and those of its candidates (its
  legal edges not in `excluded`, `[W]` bool) that are not among the cheapest to
  prove. An unexpanded edge costs 1 (one playout may prove it), an edge into an
  unproven child the child's `node_unproven_edges` (each needs a playout before the
  child is settled), an edge into a proven child +inf (nothing is left to prove
  there). A proof-number order of depth one: the cost of a child is the number of
  its open edges, each counted as one leaf. Nothing is excluded at a proven node
  (its playouts go to its best proven edges, as without the order), where every
  candidate costs +inf, or without `proof_first` (`node_unproven_edges` None)."""
  if graph.node_unproven_edges is None:
    return jnp.zeros_like(excluded)
  children = graph.children_index[node_index]
  clamped_children = jnp.maximum(children, 0)
  unproven = graph.node_unproven_edges[clamped_children].astype(jnp.float32)
  cost = jnp.where(graph.node_proven[clamped_children], jnp.inf, unproven)
  cost = jnp.where(children < 0, 1.0, cost)
  legal = legal_edges(graph, node_index)
  cheapest = jnp.min(jnp.where(legal & ~excluded, cost, jnp.inf))
  # Illegal edges are left out too (PUCT does not mask them; their prior is 0).
  open_node = jnp.isfinite(cheapest) & ~graph.node_proven[node_index]
  return open_node & ((cost > cheapest) | ~legal)


def best_proven_action(graph: Graph) -> tuple[chex.Array, chex.Array]:
  """`([B] bool, [B] int32)`: whether the root is proven or has an edge that proves
  it at once (`winning_edges`), and the best proven root edge (its slot, with
  compact edges)."""

  def one(graph: Graph) -> tuple[chex.Array, chex.Array]:
    legal = legal_edges(graph, ROOT_INDEX)
    proven, exact = proven_edges(graph, ROOT_INDEX)
    proven &= legal
    scores = jnp.where(proven, exact, -jnp.inf)
    decided = graph.node_proven[ROOT_INDEX] | jnp.any(winning_edges(graph, proven, exact))
    return decided, jnp.argmax(scores).astype(jnp.int32)

  return jax.vmap(one)(graph)


def prefer_proven(graph: Graph, action: chex.Array) -> chex.Array:
  """`action` `[B]`, replaced by the best proven root action where the root is decided
  (proven, or holding an edge that proves it at once)."""
  decided, best = best_proven_action(graph)
  return jnp.where(decided, graph.root_edge_actions(best), action)
