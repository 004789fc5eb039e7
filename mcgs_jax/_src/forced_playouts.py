"""Forced playouts and policy target pruning at the root (KataGo's, from "Accelerating
Self-Play Learning in Go", David J. Wu, 2019).

With root noise, PUCT alone gives a child whose noised prior is small too few
playouts to learn whether it is good. Forced playouts give each root child `c` that
PUCT has visited at least once at least `n_forced(c) = sqrt(k * P(c) * sum_b N(root,
b))` playouts (`k`: `forced_playouts`, KataGo's 2; `P`: the root's prior, noise
included). As in KataGo's search, a child PUCT has not tried yet is not forced: the
rule funnels playouts down children that get any at all. Those extra
playouts would teach the network the noise, so before the visits become a policy
target they are taken out again: from every child but the most visited one, up to
`n_forced(c)` visits are subtracted as long as its PUCT score stays below the best
child's, and a child left with a single visit is pruned to 0.
"""

from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax._src import checks, rows, types
from mcgs_jax._src.action_selection import action_uniforms, excluded_actions, puct_terms
from mcgs_jax._src.graph import ROOT_INDEX, Graph
from mcgs_jax._src.tie_break import TIE_BREAK_SCALE, masked_argmax


def forced_counts(graph: Graph, node_index: chex.Array, forced_playouts: float) -> jax.Array:
  """`[A]` float: `n_forced` of each edge of one game's node."""
  prior = rows.softmax(graph.children_prior_logits[node_index])
  total = jnp.sum(graph.edge_visits[node_index])
  return jnp.sqrt(forced_playouts * prior * total)


def forced_root_action_selection(
  rng_key: chex.PRNGKey,
  graph: Graph,
  node_index: chex.Array,
  *,
  forced_playouts: float,
  pb_c_init: float,
  pb_c_base: float,
  qtransform: types.QTransform,
  solver: bool,
) -> chex.Array:
  """The root rule of `muzero_policy(..., forced_playouts=k)`: among the edges PUCT
  may choose, a visited one with fewer visits than `n_forced` if there is one (the
  best of those by PUCT), else PUCT's choice."""
  value_score, policy_score = puct_terms(graph, node_index, pb_c_init, pb_c_base, qtransform)
  tie_break = TIE_BREAK_SCALE * action_uniforms(rng_key, graph, node_index)
  scores = value_score + policy_score + tie_break
  excluded = excluded_actions(graph, node_index, 0, solver)
  visits = graph.edge_visits[node_index]
  under = (visits > 0) & (visits < forced_counts(graph, node_index, forced_playouts))
  forced_choice = masked_argmax(scores, excluded | ~under)
  return jnp.where(jnp.any(under & ~excluded), forced_choice, masked_argmax(scores, excluded))


def prune_forced_playouts(
  graph: Graph,
  visits: jax.Array | None = None,
  *,
  forced_playouts: float,
  pb_c_init: float = 1.25,
  pb_c_base: float = 19652.0,
  qtransform: types.QTransform | None = None,
) -> jax.Array:
  """The root's policy target with the forced playouts taken out, `[B, A]`
  (rows sum to 1 over the children left, or to 0 for a root without visits). Where
  pruning would leave none of `visits`, the row is `visits` unpruned, normalised.

  Args:
    graph: a searched `Graph` of `B` games (`PolicyOutput.search_graph` of
      `muzero_policy(..., forced_playouts=k)`).
    visits: `[B, A]` the visits to prune (default: the root's edge visits). With a
      reused graph this may be only this search's own visits: the reductions are
      computed on the root's edge visits and subtracted from `visits`.
    forced_playouts: `k` of the search.
    pb_c_init, pb_c_base, qtransform: the search's PUCT (default qtransform: mctx's
      `qtransform_by_parent_and_siblings`).

  Raises:
    TypeError naming `graph` when it is not a `Graph` (a `PolicyOutput`: give its
    `search_graph`), ValueError naming `visits` when it is not `[B, A]`, and
    `muzero_policy`'s errors for the other arguments (`forced_playouts` a finite
    number >= 0 where known at trace time, and so on).
  """
  from mcgs_jax._src import qtransforms

  _check_pruning(graph, visits, forced_playouts, pb_c_init, pb_c_base, qtransform)
  transform = qtransforms.qtransform_by_parent_and_siblings if qtransform is None else qtransform
  edge_visits = graph.root_row_to_actions(graph.edge_visits[:, ROOT_INDEX], 0)
  visits = edge_visits if visits is None else visits

  def one(graph: Graph) -> jax.Array:
    counts = graph.edge_visits[ROOT_INDEX].astype(jnp.float32)
    value_score, _ = puct_terms(graph, ROOT_INDEX, pb_c_init, pb_c_base, transform)
    node_visits = graph.node_visits[ROOT_INDEX]
    exploration = pb_c_init + jnp.log((node_visits + pb_c_base + 1.0) / pb_c_base)
    # `c(n) * P(n, a) * sqrt(N(n))`: PUCT's policy score is this over `1 + N(n, a)`.
    numerator = (
      jnp.sqrt(node_visits) * exploration * jax.nn.softmax(graph.children_prior_logits[ROOT_INDEX])
    )
    best = jnp.argmax(counts)
    best_score = value_score[best] + numerator[best] / (1.0 + counts[best])
    # The fewest visits that keep a child's score below the best one's: `1 + n >
    # numerator / gap`. A child at or above the best score keeps all its visits.
    gap = best_score - value_score
    fewest = jnp.where(gap > 0, jnp.floor(numerator / jnp.maximum(gap, 1e-30)), counts)
    pruned = jnp.maximum(counts - jnp.floor(forced_counts(graph, ROOT_INDEX, forced_playouts)), 0)
    pruned = jnp.clip(jnp.maximum(pruned, fewest), 0.0, counts)
    pruned = jnp.where(pruned <= 1.0, 0.0, pruned)
    pruned = pruned.at[best].set(counts[best])
    return counts - pruned  # the visits taken out of each child

  removed = graph.root_row_to_actions(jax.vmap(one)(graph), 0.0)
  visits = visits.astype(jnp.float32)
  kept = jnp.maximum(visits - removed, 0.0)
  # With `visits` a part of the root's (a reused search's own), the most visited child
  # may hold none of them, and pruning can take out all the others: the target is
  # then `visits` unpruned rather than empty.
  kept = jnp.where(jnp.sum(kept, axis=-1, keepdims=True) > 0, kept, visits)
  total = jnp.sum(kept, axis=-1, keepdims=True)
  # A root without visits (a finished game) gets zeros, not 0 / 0.
  return jnp.where(total > 0, kept / jnp.maximum(total, 1.0), 0.0)


def _check_pruning(
  graph: Any, visits: Any, forced_playouts: Any, pb_c_init: Any, pb_c_base: Any, qtransform: Any
) -> None:
  """`prune_forced_playouts`'s argument checks: the ranges `muzero_policy` holds its
  PUCT to (values known at trace time only), and the shapes of `graph` and `visits`
  (`[B, A]`, one row per game: a `[A]` row would be broadcast to every game)."""
  if not isinstance(graph, Graph):
    given = type(graph).__name__
    hint = " (give its search_graph)" if hasattr(graph, "search_graph") else ""
    raise TypeError(f"graph must be a searched Graph, got a {given}{hint}")
  checks.check_real("forced_playouts", forced_playouts, low=0)
  checks.check_real("pb_c_init", pb_c_init, expected="a real number")
  checks.check_real("pb_c_base", pb_c_base, low=0, low_open=True)
  if qtransform is not None:
    checks.check_callable("qtransform", qtransform, "(graph, node) -> [A] scores")
  expected = (graph.batch_size, graph.num_actions)
  if visits is not None and tuple(np.shape(visits)) != expected:
    raise ValueError(
      f"visits must have shape [B, A] = {expected} (the graph's games and actions), "
      f"got {tuple(np.shape(visits))}"
    )
