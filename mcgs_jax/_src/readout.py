"""What a policy reads out of a searched graph: the action to play and its weights,
with the solver's say on both."""

import chex
import jax
import jax.numpy as jnp

from mcgs_jax._src import proofs, selection, types
from mcgs_jax._src.graph import ROOT_INDEX, Graph
from mcgs_jax._src.logits import apply_temperature, probs_to_logits
from mcgs_jax._src.options import GraphOptions


def playable_weights(graph: Graph, weights: jax.Array, options: GraphOptions) -> jax.Array:
  """`weights [B, A]` with the root edges the solver rules out (proven losses,
  proven edges another proven edge beats) set to 0; unchanged without the solver."""
  if not options.solver:
    return weights
  excluded = jax.vmap(proofs.excluded_edges, in_axes=(0, None))(graph, 0)
  return jnp.where(excluded, 0.0, weights)


def final_action(graph: Graph, action: jax.Array, options: GraphOptions) -> jax.Array:
  """`action [B]`, replaced by the best proven root action where the solver has
  decided the root; unchanged without the solver."""
  if not options.solver:
    return action
  return proofs.prefer_proven(graph, action)


def fallback_action(graph: Graph, action: jax.Array, weights: jax.Array) -> jax.Array:
  """`action [B]`, or where `weights [B, A]` has no positive entry (every playout
  dropped, e.g. a game whose every evaluation is NaN) the valid root action with the
  highest prior logit: a legal action whenever the root has one (action 0 when every
  action is invalid)."""
  best_prior = jax.vmap(selection.masked_argmax)(
    graph.children_prior_logits[:, ROOT_INDEX], graph.root_invalid_actions
  )
  return jnp.where(jnp.any(weights > 0, axis=-1), action, best_prior).astype(jnp.int32)


def sample_from_visits(
  rng_key: chex.PRNGKey,
  graph: Graph,
  *,
  options: GraphOptions,
  temperature: float | chex.Array,
) -> types.PolicyOutput:
  """The action sampled from the root visit distribution raised to `1 / temperature`
  (0: the most visited), among the edges the solver does not rule out (the best
  proven action where the solver has decided the root); the weights are the root
  visit distribution."""
  action_weights = graph.summary().visit_probs
  choice_weights = playable_weights(graph, action_weights, options)
  action_logits = apply_temperature(probs_to_logits(choice_weights), temperature)
  action = jax.random.categorical(rng_key, action_logits).astype(jnp.int32)
  action = fallback_action(graph, action, choice_weights)
  return types.PolicyOutput(
    action=final_action(graph, action, options),
    action_weights=action_weights,
    search_graph=graph,
  )


def most_visited(graph: Graph, *, options: GraphOptions) -> types.PolicyOutput:
  """The most visited root action among the edges the solver does not rule out (the
  best proven action where the solver has decided the root); the weights are the
  root visit distribution."""
  action_weights = graph.summary().visit_probs
  choice_weights = playable_weights(graph, action_weights, options)
  action = fallback_action(graph, jnp.argmax(choice_weights, axis=-1), choice_weights)
  return types.PolicyOutput(
    action=final_action(graph, action, options),
    action_weights=action_weights,
    search_graph=graph,
  )
