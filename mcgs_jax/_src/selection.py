"""Selection rules. Each picks one action at one node of one game's graph.

A root rule is called as `fn(rng_key, graph, node_index)`, an interior rule as
`fn(rng_key, graph, node_index, depth)`, with an unbatched graph (the search vmaps
them), exactly as in mctx, so custom mctx rules port by renaming
`tree.children_visits` to `graph.edge_visits`.
"""

import functools

import jax
import jax.numpy as jnp

from mcgs_jax._src import proofs, qtransforms, random_bits
from mcgs_jax._src.graph import Graph

# Scale of the random tie-break added to every score (as mctx, so that equal scores
# are broken the same way for the same key).
TIE_BREAK_SCALE = 1e-7


def masked_argmax(scores, invalid_actions):
  """The valid action with the highest score (action 0 when none is valid)."""
  if invalid_actions is not None:
    # -inf only reaches argmax, never a softmax, so it cannot produce NaN.
    scores = jnp.where(invalid_actions, -jnp.inf, scores)
  return jnp.argmax(scores, axis=-1).astype(jnp.int32)


def excluded_actions(graph: Graph, node_index, depth, solver: bool):
  """`[A]` bool: the root's invalid actions at depth 0, edges whose evaluation was
  not finite (`graph.edge_non_finite`), and with `solver` the proven edges not worth
  a playout (`proofs.excluded_edges`)."""
  excluded = (graph.root_invalid_actions & (depth == 0)) | graph.edge_non_finite[node_index]
  if solver:
    excluded |= proofs.excluded_edges(graph, node_index)
  return excluded


def muzero_action_selection(
  rng_key,
  graph: Graph,
  node_index,
  depth,
  *,
  pb_c_init: float = 1.25,
  pb_c_base: float = 19652.0,
  qtransform=qtransforms.qtransform_by_parent_and_siblings,
  solver: bool = False,
):
  """PUCT on edge visits:
  `argmax_a  qtransform(Q)(n, a) + c(n) * P(n, a) * sqrt(N(n)) / (1 + N(n, a))`
  with `c(n) = pb_c_init + log((N(n) + pb_c_base + 1) / pb_c_base)`.

  `N(n) = k(n) + sum_b N(n, b)` (`graph.node_visits`; `k(n)`, the node's own
  evaluations, is 1 unless `fold_evaluations`), as in mctx, so in tree mode this is
  mctx's rule exactly.
  At depth 0 the root's invalid actions are never chosen; with `solver`, neither are
  proven edges that another edge beats.
  """
  value_score, policy_score = puct_terms(graph, node_index, pb_c_init, pb_c_base, qtransform)
  tie_break = TIE_BREAK_SCALE * random_bits.uniform(rng_key, (graph.num_actions,))
  return masked_argmax(
    value_score + policy_score + tie_break, excluded_actions(graph, node_index, depth, solver)
  )


def puct_terms(graph: Graph, node_index, pb_c_init: float, pb_c_base: float, qtransform):
  """`([A] value score, [A] policy score)` of PUCT at one game's node: the
  `qtransform`ed Q and `c(n) * P(n, a) * sqrt(N(n)) / (1 + N(n, a))`."""
  edge_visits = graph.edge_visits[node_index]
  node_visits = graph.node_visits[node_index]
  exploration = pb_c_init + jnp.log((node_visits + pb_c_base + 1.0) / pb_c_base)
  prior = jax.nn.softmax(graph.children_prior_logits[node_index])
  policy_score = jnp.sqrt(node_visits) * exploration * prior / (edge_visits + 1)
  return qtransform(graph, node_index), policy_score


def muzero_root_action_selection(rng_key, graph: Graph, node_index, **kwargs):
  """`muzero_action_selection` at depth 0 (root invalid actions masked)."""
  return muzero_action_selection(rng_key, graph, node_index, 0, **kwargs)


def make_muzero_selection(*, pb_c_init: float, pb_c_base: float, qtransform, solver: bool = False):
  """The (root, interior) pair of PUCT rules with these hyperparameters."""
  interior = functools.partial(
    muzero_action_selection,
    pb_c_init=pb_c_init,
    pb_c_base=pb_c_base,
    qtransform=qtransform,
    solver=solver,
  )
  root = functools.partial(
    muzero_root_action_selection,
    pb_c_init=pb_c_init,
    pb_c_base=pb_c_base,
    qtransform=qtransform,
    solver=solver,
  )
  return root, interior


def uct_action_selection(
  rng_key, graph: Graph, node_index, depth, *, c: float = 1.41, solver: bool = False
):
  """UCB1 on edges, as in UCT (Kocsis and Szepesvari, "Bandit based Monte-Carlo
  Planning", 2006): `argmax_a  w(n, a) + c * sqrt(ln N(n) / N(n, a))`.

  `w = (Q(n, a) + 1) / 2` is the win rate of a value in [-1, 1] for the player at n,
  `N(n)` is the sum of its edge visits. Unvisited legal edges come first (a random
  one among them). An action whose prior probability is zero is illegal here: the
  game adapters give illegal actions the lowest finite logit.
  """
  edge_visits = graph.edge_visits[node_index]
  total = jnp.maximum(jnp.sum(edge_visits), 1)
  win_rate = (graph.qvalues(node_index) + 1.0) / 2.0
  bonus = c * jnp.sqrt(jnp.log(total.astype(win_rate.dtype)) / jnp.maximum(edge_visits, 1))
  # Unvisited edges outrank every visited one (scores of visited edges stay below 1e6).
  scores = jnp.where(edge_visits > 0, win_rate + bonus, 1e6)
  tie_break = TIE_BREAK_SCALE * random_bits.uniform(rng_key, (graph.num_actions,))
  illegal = jax.nn.softmax(graph.children_prior_logits[node_index]) == 0
  return masked_argmax(
    scores + tie_break * jnp.maximum(scores, 1.0),
    illegal | excluded_actions(graph, node_index, depth, solver),
  )
