"""What every policy reads out of a searched graph: the action to play and its
weights, with the solver's say on both (it never plays a proven loss while a valid
edge is not one)."""

import chex
import jax
import jax.numpy as jnp

from mcgs_jax._src import proofs, tie_break, types
from mcgs_jax._src.graph import ROOT_INDEX, Graph
from mcgs_jax._src.logits import apply_temperature, probs_to_logits
from mcgs_jax._src.options import GraphOptions


def excluded_root_edges(graph: Graph, options: GraphOptions) -> jax.Array:
  """`[B, W]` bool: root edges a policy never plays, the invalid actions (and empty
  slots) and with the solver the edges it rules out (proven losses, proven edges
  another proven edge beats)."""
  excluded = graph.root_invalid_edges
  if options.solver:
    excluded |= jax.vmap(proofs.excluded_edges, in_axes=(0, None))(graph, 0)
  return excluded


def final_action(graph: Graph, action: jax.Array, options: GraphOptions) -> jax.Array:
  """`action [B]`, replaced by the best proven root action where the solver has
  decided the root; unchanged without the solver."""
  if not options.solver:
    return action
  return proofs.prefer_proven(graph, action)


def fallback_action(
  graph: Graph, action: jax.Array, weights: jax.Array, options: GraphOptions
) -> jax.Array:
  """`action [B]`, or where `weights [B, A]` has no positive entry (every playout
  dropped, e.g. a game whose every evaluation is NaN, or with the solver every
  visited edge proven lost) the root action with the highest prior logit among those
  `excluded_root_edges` leaves: a legal action whenever the root has one (action 0
  when every action is invalid), never a proven loss while an edge is not one."""
  best_prior = jax.vmap(tie_break.masked_argmax)(
    graph.children_prior_logits[:, ROOT_INDEX], excluded_root_edges(graph, options)
  )
  best_prior = graph.root_edge_actions(best_prior)
  return jnp.where(jnp.any(weights > 0, axis=-1), action, best_prior).astype(jnp.int32)


def _root_weights(graph: Graph, options: GraphOptions) -> tuple[jax.Array, jax.Array]:
  """`(action_weights, excluded)`, `[B, A]` each: the visit distribution over the
  root's valid edges (a continued graph may hold visits of an edge invalid at this
  root: they are left out), and `excluded_root_edges` by action (with compact edges
  an action no slot holds is excluded)."""
  visit_counts = graph.summary().visit_counts
  num_actions = visit_counts.shape[-1]
  # A stochastic graph's root rows are wider than its `A` decision actions.
  invalid = graph.root_row_to_actions(graph.root_invalid_edges, True)[:, :num_actions]
  excluded = graph.root_row_to_actions(excluded_root_edges(graph, options), True)
  excluded = excluded[:, :num_actions]
  visit_counts = jnp.where(invalid, 0.0, visit_counts)
  total = jnp.sum(visit_counts, axis=-1, keepdims=True)
  # max(., 1): a root with no visited valid edge gets all-zero weights, not 0/0.
  return visit_counts / jnp.maximum(total, 1), excluded


def sample_from_visits(
  rng_key: chex.PRNGKey,
  graph: Graph,
  *,
  options: GraphOptions,
  temperature: float | chex.Array,
) -> types.PolicyOutput:
  """The action sampled from the root visit distribution raised to `1 / temperature`
  (0: the most visited), among the valid edges the solver does not rule out (the
  best proven action where the solver has decided the root): never a proven loss
  while a valid edge is not one. The weights are the visit distribution over the
  root's valid edges, those the solver rules out included (the playouts they took
  before their proof): what the search spent, not what it plays."""
  action_weights, excluded = _root_weights(graph, options)
  choice_weights = jnp.where(excluded, 0.0, action_weights)
  action_logits = apply_temperature(probs_to_logits(choice_weights), temperature)
  # An unplayable edge stays out at any temperature: log(tiny) / temperature would
  # come near the others' logits (as in mctx, an unvisited valid edge may be drawn).
  action_logits = jnp.where(excluded, -jnp.inf, action_logits)
  action = jax.random.categorical(rng_key, action_logits).astype(jnp.int32)
  action = fallback_action(graph, action, choice_weights, options)
  return types.PolicyOutput(
    action=final_action(graph, action, options),
    action_weights=action_weights,
    search_graph=graph,
  )


def most_visited(graph: Graph, *, options: GraphOptions) -> types.PolicyOutput:
  """The most visited root action among the valid edges the solver does not rule out
  (the best proven action where the solver has decided the root): never a proven
  loss while a valid edge is not one. The weights are the visit distribution over
  the root's valid edges, those the solver rules out included (see
  `sample_from_visits`)."""
  action_weights, excluded = _root_weights(graph, options)
  choice_weights = jnp.where(excluded, 0.0, action_weights)
  action = fallback_action(graph, jnp.argmax(choice_weights, axis=-1), choice_weights, options)
  return types.PolicyOutput(
    action=final_action(graph, action, options),
    action_weights=action_weights,
    search_graph=graph,
  )
