"""Selection rules. Each picks one action at one node of one game's graph: PUCT
(`muzero_action_selection`), UCT (`uct_action_selection`), the deterministic interior
rule of Gumbel MuZero (`gumbel_muzero_interior_action_selection`; its root rule,
Sequential Halving, is in `gumbel`), and the rule of a chance node
(`chance_selection`).

A root rule is called as `fn(rng_key, graph, node_index)`, an interior rule as
`fn(rng_key, graph, node_index, depth)`, with an unbatched graph (the search vmaps
them), exactly as in mctx, so custom mctx rules port by renaming
`tree.children_visits` to `graph.edge_visits`.
"""

import functools
from typing import Any

import chex
import jax.numpy as jnp

from mcgs_jax._src import proofs, qtransforms, random_bits, rows, types
from mcgs_jax._src.graph import Graph
from mcgs_jax._src.tie_break import TIE_BREAK_SCALE, masked_argmax, tie_broken_argmax


def excluded_actions(
  graph: Graph, node_index: chex.Array, depth: chex.Array, solver: bool
) -> chex.Array:
  """`[W]` bool: the root's invalid actions at depth 0, edges whose evaluation was
  not finite (`graph.edge_non_finite`), with compact edges the empty slots, and with
  `solver` the proven edges not worth a playout (`proofs.excluded_edges`) and, with
  `GraphOptions.proof_first`, the edges that are not among the cheapest to prove
  (`proofs.proof_order_excluded`)."""
  excluded = (graph.root_invalid_edges & (depth == 0)) | graph.edge_non_finite[node_index]
  if graph.compact:
    excluded |= graph.edge_actions(node_index) < 0
  if solver:
    excluded |= proofs.excluded_edges(graph, node_index)
    excluded |= proofs.proof_order_excluded(graph, node_index, excluded)
  return excluded


def action_uniforms(rng_key: chex.PRNGKey, graph: Graph, node_index: chex.Array) -> chex.Array:
  """`[W]` floats in [0, 1), one per edge of one game's node: `uniform(rng_key, [A])`
  in a dense graph, and with compact edges the float of each slot's action in that
  row (`random_bits.uniform_at`), so a slot's tie-break is its action's."""
  if not graph.compact:
    return random_bits.uniform(rng_key, (graph.max_children,))
  return random_bits.uniform_at(rng_key, jnp.maximum(graph.edge_actions(node_index), 0))


def muzero_action_selection(
  rng_key: chex.PRNGKey,
  graph: Graph,
  node_index: chex.Array,
  depth: chex.Array,
  *,
  pb_c_init: float = 1.25,
  pb_c_base: float = 19652.0,
  qtransform: types.QTransform = qtransforms.qtransform_by_parent_and_siblings,
  solver: bool = False,
) -> chex.Array:
  """PUCT on edge visits:
  `argmax_a  qtransform(Q)(n, a) + c(n) * P(n, a) * sqrt(N(n)) / (1 + N(n, a))`
  with `c(n) = pb_c_init + log((N(n) + pb_c_base + 1) / pb_c_base)`.

  `N(n) = k(n) + sum_b N(n, b)` (`graph.node_visits`; `k(n)`, the node's own
  evaluations, is 1 unless `fold_evaluations`), as in mctx, so in tree mode this is
  mctx's rule exactly.
  At depth 0 the root's invalid actions are never chosen; with `solver`, neither are
  proven edges that another edge beats. Ties are broken as mctx breaks them, by
  `1e-7 * uniform(rng_key, [A])` added to every score (`tie_break`: drawn only where
  it can change the choice); at a terminal node, where no playout continues, the
  first of the best actions is chosen.
  """
  value_score, policy_score = puct_terms(graph, node_index, pb_c_init, pb_c_base, qtransform)
  # No playout continues from a terminal node (the batched selection still asks
  # there for the games whose playout has ended): its choice needs no tie-break.
  return tie_broken_argmax(
    rng_key,
    value_score + policy_score,
    excluded_actions(graph, node_index, depth, solver),
    ~graph.node_terminal[node_index],
    None if graph.children_actions is None else graph.children_actions[node_index],
  )


def puct_terms(
  graph: Graph,
  node_index: chex.Array,
  pb_c_init: float,
  pb_c_base: float,
  qtransform: types.QTransform,
) -> tuple[chex.Array, chex.Array]:
  """`([A] value score, [A] policy score)` of PUCT at one game's node: the
  `qtransform`ed Q and `c(n) * P(n, a) * sqrt(N(n)) / (1 + N(n, a))`."""
  edge_visits = graph.edge_visits[node_index]
  node_visits = graph.node_visits[node_index]
  exploration = pb_c_init + jnp.log((node_visits + pb_c_base + 1.0) / pb_c_base)
  prior = rows.softmax(graph.children_prior_logits[node_index])
  policy_score = jnp.sqrt(node_visits) * exploration * prior / (edge_visits + 1)
  return qtransform(graph, node_index), policy_score


def muzero_root_action_selection(
  rng_key: chex.PRNGKey, graph: Graph, node_index: chex.Array, **kwargs: Any
) -> chex.Array:
  """`muzero_action_selection` at depth 0 (root invalid actions masked)."""
  return muzero_action_selection(rng_key, graph, node_index, 0, **kwargs)


def make_muzero_selection(
  *, pb_c_init: float, pb_c_base: float, qtransform: types.QTransform, solver: bool = False
) -> tuple[types.RootActionSelectionFn, types.InteriorActionSelectionFn]:
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
  rng_key: chex.PRNGKey,
  graph: Graph,
  node_index: chex.Array,
  depth: chex.Array,
  *,
  c: float = 1.41,
  solver: bool = False,
) -> chex.Array:
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
  tie_break = TIE_BREAK_SCALE * action_uniforms(rng_key, graph, node_index)
  illegal = rows.softmax(graph.children_prior_logits[node_index]) == 0
  return masked_argmax(
    scores + tie_break * jnp.maximum(scores, 1.0),
    illegal | excluded_actions(graph, node_index, depth, solver),
  )


def gumbel_muzero_interior_action_selection(
  rng_key: chex.PRNGKey,
  graph: Graph,
  node_index: chex.Array,
  depth: chex.Array,
  *,
  qtransform: types.QTransform = qtransforms.qtransform_completed_by_mix_value,
  solver: bool = False,
) -> chex.Array:
  """The deterministic interior rule of Gumbel MuZero on one game's graph.

  Chooses `argmax_a  pi'(a) - N(n, a) / (1 + sum_b N(n, b))` with
  `pi' = softmax(prior_logits + completed Q)`: the action whose share of the edge
  visits lags its improved-policy probability the most, so repeated choices make
  the visit distribution follow `pi'` (paper, section 5). Invalid actions are not
  masked (as mctx): their prior logit is the lowest float, so `pi'` is 0 there and
  some valid action always scores above 0.

  Args:
    rng_key: unused.
    graph: one game's graph.
    node_index: scalar node.
    depth: scalar, the node's depth; read only with `solver`, whose exclusions
      also skip the root's invalid actions at depth 0 and non-finite edges.
    qtransform: `(graph, node) -> [A]` completed Q-values.
    solver: skip the edges the solver excludes (proven losses, beaten proofs).

  Returns:
    Scalar int32 action.
  """
  del rng_key
  visits = graph.edge_visits[node_index]
  improved = rows.softmax(graph.children_prior_logits[node_index] + qtransform(graph, node_index))
  lag = improved - visits / (1 + jnp.sum(visits))
  if solver:
    # Masked as illegal too: once the solver excludes edges, an unvisited illegal edge
    # (lag 0) may beat every legal edge left (all visited beyond their share).
    illegal = ~proofs.legal_edges(graph, node_index)
    return masked_argmax(lag, excluded_actions(graph, node_index, depth, solver) | illegal)
  return jnp.argmax(lag).astype(jnp.int32)


def chance_selection(graph: Graph, node_index: chex.Array, depth: chex.Array) -> chex.Array:
  """The outcome to follow at a chance node of one game (`graph` sliced to `C`
  columns): `argmax_c P(c) / (N(n, c) + 1)`, as mctx, so edge visits track the
  outcome probabilities. Edges the search excludes (e.g. a non-finite evaluation)
  are skipped."""
  probs = rows.softmax(graph.children_prior_logits[node_index])
  scores = probs / (graph.edge_visits[node_index] + 1)
  return masked_argmax(scores, excluded_actions(graph, node_index, depth, False))
