"""The part every policy shares: checks, root masking, the search, and the solver's
say on the action. A policy adds only its root prior, its selection rules and how
it turns the root statistics into `action` and `action_weights`."""

from typing import Any

import jax
import jax.numpy as jnp

from mcgs_jax._src import checks, proofs, selection, types
from mcgs_jax._src import search as search_lib
from mcgs_jax._src.graph import ROOT_INDEX, Graph
from mcgs_jax._src.options import GraphOptions

_NOT_GIVEN: Any = object()


def checked_root(
  root: types.RootFnOutput,
  invalid_actions: jax.Array | None,
  num_simulations: int,
  *,
  recurrent_fn: Any = _NOT_GIVEN,
  graph: Any = None,
  recycle: Any = None,
) -> tuple[types.RootFnOutput, jax.Array]:
  """Checks the root, `invalid_actions`, `num_simulations`, and that `recurrent_fn`
  is callable (when given: the stochastic policy checks its two functions itself) and
  `graph` and `recycle` are graphs or None, at trace time.

  Returns `(root, invalid_actions)`: the root with array logits, and
  `invalid_actions` as bool `[B, A]` (all False when None).
  """
  if recurrent_fn is not _NOT_GIVEN:
    checks.check_callable(
      "recurrent_fn",
      recurrent_fn,
      "(params, key, action [B], embedding) -> (RecurrentFnOutput, embedding)",
    )
  for name, value in (("graph", graph), ("recycle", recycle)):
    if value is not None and not isinstance(value, Graph):
      raise TypeError(
        f"{name} must be a mcgs_jax.Graph (a search_graph, or what reroot returns) "
        f"or None, got {type(value).__name__}"
      )
  batch_size, num_actions = checks.check_root(root)
  invalid_actions = checks.check_invalid_actions(invalid_actions, batch_size, num_actions)
  checks.check_int("num_simulations", num_simulations, minimum=1)
  return root.replace(prior_logits=jnp.asarray(root.prior_logits)), invalid_actions


def run_search(
  params: types.Params,
  rng_key: jax.Array,
  root: types.RootFnOutput,
  recurrent_fn: types.RecurrentFn,
  *,
  num_simulations: int,
  invalid_actions: jax.Array,
  max_depth: int | None,
  loop_fn: types.LoopFn,
  options: GraphOptions,
  root_action_selection_fn: types.RootActionSelectionFn,
  interior_action_selection_fn: types.InteriorActionSelectionFn,
  extra_data: Any = None,
  graph: Graph | None = None,
  recycle: Graph | None = None,
) -> Graph:
  """Masks the root's invalid actions (lowest finite logit) and runs the search.

  `root` and `invalid_actions` as returned by `checked_root` (a policy may change
  the root's logits in between, e.g. with Dirichlet noise).
  """
  root = root.replace(prior_logits=mask_invalid_actions(root.prior_logits, invalid_actions))
  return search_lib.search(
    params,
    rng_key,
    root=root,
    recurrent_fn=recurrent_fn,
    root_action_selection_fn=root_action_selection_fn,
    interior_action_selection_fn=interior_action_selection_fn,
    num_simulations=num_simulations,
    max_depth=max_depth,
    invalid_actions=invalid_actions,
    options=options,
    extra_data=extra_data,
    loop_fn=loop_fn,
    graph=graph,
    recycle=recycle,
  )


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


def mask_invalid_actions(logits: jax.Array, invalid_actions: jax.Array) -> jax.Array:
  """Sets invalid actions to the lowest finite logit (finite: no NaN in a softmax
  even when every action is invalid)."""
  logits = logits - jnp.max(logits, axis=-1, keepdims=True)
  return jnp.where(invalid_actions, jnp.finfo(logits.dtype).min, logits)


def fallback_action(graph: Graph, action: jax.Array, weights: jax.Array) -> jax.Array:
  """`action [B]`, or where `weights [B, A]` has no positive entry (every playout
  dropped, e.g. a game whose every evaluation is NaN) the valid root action with the
  highest prior logit: a legal action whenever the root has one (action 0 when every
  action is invalid)."""
  best_prior = jax.vmap(selection.masked_argmax)(
    graph.children_prior_logits[:, ROOT_INDEX], graph.root_invalid_actions
  )
  return jnp.where(jnp.any(weights > 0, axis=-1), action, best_prior).astype(jnp.int32)
