"""Q-value transforms for selection, as in mctx, on one game's graph.

Each takes `(graph, node_index)` for one game (a scalar node) and returns `[A]`
scores. They read `Q(n, a)` and `N(n, a)` from edges, so in graph mode they see the
current value of a shared child, not the one its last visit through this edge left.
"""

import chex
import jax.numpy as jnp
import numpy as np

from mcgs_jax._src import checks, rows
from mcgs_jax._src.graph import Graph


def qtransform_by_min_max(
  graph: Graph, node_index: chex.Array, *, min_value: float, max_value: float
) -> chex.Array:
  """`(Q - min_value) / (max_value - min_value)`; unvisited actions score 0."""
  checks.check_real("min_value", min_value)
  checks.check_real("max_value", max_value)
  known_min, known_max = checks.concrete(min_value), checks.concrete(max_value)
  if known_min is not None and known_max is not None and not np.all(known_min < known_max):
    raise ValueError(f"min_value must be < max_value, got {min_value!r} and {max_value!r}")
  qvalues = graph.qvalues(node_index)
  visited = graph.edge_visits[node_index] > 0
  return (jnp.where(visited, qvalues, min_value) - min_value) / (max_value - min_value)


def qtransform_by_parent_and_siblings(
  graph: Graph, node_index: chex.Array, *, epsilon: float = 1e-8
) -> chex.Array:
  """Q normalised to [0, 1] by the min and max over `Q(n)` and the visited `Q(n, a)`.

  Unvisited actions score 0 (the minimum).
  """
  checks.check_real("epsilon", epsilon, low=0, low_open=True)
  qvalues = graph.qvalues(node_index)
  visited = graph.edge_visits[node_index] > 0
  node_value = graph.node_values[node_index]
  low = jnp.minimum(node_value, rows.row_min(jnp.where(visited, qvalues, node_value)))
  high = jnp.maximum(node_value, rows.row_max(jnp.where(visited, qvalues, node_value)))
  # epsilon keeps 0/0 out when every value is equal.
  return (jnp.where(visited, qvalues, low) - low) / jnp.maximum(high - low, epsilon)


def qtransform_completed_by_mix_value(
  graph: Graph,
  node_index: chex.Array,
  *,
  value_scale: float = 0.1,
  maxvisit_init: float = 50.0,
  rescale_values: bool = True,
  use_mixed_value: bool = True,
  epsilon: float = 1e-8,
) -> chex.Array:
  """Completed Q-values of Gumbel MuZero (Danihelka et al. 2022, appendix D).

  Unvisited actions get the mixed value (or `U(n)` when `use_mixed_value=False`);
  the result is optionally rescaled to [0, 1], then multiplied by
  `(maxvisit_init + max_a N(n, a)) * value_scale`.
  """
  checks.check_real("value_scale", value_scale, low=0)
  checks.check_real("maxvisit_init", maxvisit_init, low=0)
  checks.check_real("epsilon", epsilon, low=0, low_open=True)
  qvalues = graph.qvalues(node_index)
  visit_counts = graph.edge_visits[node_index]
  visited = visit_counts > 0
  raw_value = graph.raw_values[node_index]
  if use_mixed_value:
    prior_probs = rows.softmax(graph.children_prior_logits[node_index])
    # tiny keeps the weights finite when the prior of every visited action underflows.
    prior_probs = jnp.maximum(prior_probs, jnp.finfo(prior_probs.dtype).tiny)
    visited_mass = rows.row_sum(jnp.where(visited, prior_probs, 0.0))
    weighted_q = rows.row_sum(jnp.where(visited, prior_probs * qvalues, 0.0)) / jnp.where(
      jnp.any(visited), visited_mass, 1.0
    )
    total_visits = jnp.sum(visit_counts)
    value = (raw_value + total_visits * weighted_q) / (total_visits + 1)
  else:
    value = raw_value
  completed = jnp.where(visited, qvalues, value)
  if rescale_values:
    low, high = rows.row_min(completed), rows.row_max(completed)
    completed = (completed - low) / jnp.maximum(high - low, epsilon)
  return (maxvisit_init + jnp.max(visit_counts)) * value_scale * completed
