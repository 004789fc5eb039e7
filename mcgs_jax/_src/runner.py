"""The skeleton every policy shares: its checks, root masking, the search, and the
solver's say on the action. A policy supplies only what differs (`Setup`): its root
prior, its selection rules, its extra data, and how it reads `action` and
`action_weights` out of the final graph."""

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, cast

import chex
import jax
import jax.numpy as jnp

from mcgs_jax._src import options as options_lib
from mcgs_jax._src import proofs, selection, types
from mcgs_jax._src import search as search_lib
from mcgs_jax._src.graph import ROOT_INDEX, Graph
from mcgs_jax._src.initial import check_inputs
from mcgs_jax._src.options import GraphOptions


@dataclasses.dataclass(frozen=True)
class SearchCall:
  """The arguments of one `search`, as the skeleton checked them and a policy's
  `Setup` completes them (with `dataclasses.replace`).

  params: passed to `recurrent_fn`.
  rng_key: the search's key; a policy splits off the keys it needs first.
  root: `RootFnOutput`, prior logits `[B, A]` before masking (the skeleton sets
    invalid actions to the lowest finite logit), value `[B]`, embedding `[B, ...]`.
  recurrent_fn: as in `search`; None until the setup supplies it (the stochastic
    policy builds it from its two functions).
  num_simulations: playouts per game (checked by `search_checked`).
  invalid_actions: `[B, A]` bool.
  max_depth: most edges in a playout, or None (checked by `search_checked`).
  loop_fn: loop over simulations.
  options: the graph options of this call.
  graph: a graph to continue, or None.
  recycle: a graph whose arrays the search overwrites, or None.
  root_action_selection_fn, interior_action_selection_fn: the selection rules,
    supplied by the setup.
  extra_data: stored as `graph.extra_data`, read by the selection rules.
  """

  params: types.Params
  rng_key: chex.PRNGKey
  root: types.RootFnOutput
  recurrent_fn: types.RecurrentFn | None
  num_simulations: int
  invalid_actions: chex.Array
  max_depth: int | None
  loop_fn: types.LoopFn
  options: GraphOptions
  graph: Graph | None
  recycle: Graph | None
  root_action_selection_fn: types.RootActionSelectionFn | None = None
  interior_action_selection_fn: types.InteriorActionSelectionFn | None = None
  extra_data: Any = None


# The final graph -> `PolicyOutput(action [B], action_weights [B, A], search_graph)`.
ReadOut = Callable[[Graph], types.PolicyOutput]
# What a policy does between the checks and the search: the completed call and how
# to read the result out of the final graph.
Setup = Callable[[SearchCall], tuple[SearchCall, ReadOut]]


def run_policy(
  caller: str,
  setup: Setup,
  params: types.Params,
  rng_key: chex.PRNGKey,
  root: types.RootFnOutput,
  recurrent_fn: types.RecurrentFn | None,
  num_simulations: int,
  invalid_actions: chex.Array | None,
  max_depth: int | None,
  loop_fn: types.LoopFn,
  *,
  graph: Graph | None,
  recycle: Graph | None,
  options: GraphOptions | None,
  graph_options: Mapping[str, Any],
) -> types.PolicyOutput:
  """Runs the policy `caller` (its name, for error messages): checks its inputs,
  lets `setup` complete the search, masks the root's invalid actions, searches, reads
  the result out, and where the solver has decided the root, plays its best proven
  action.

  The arguments are the policy's own (mctx's positional ones, then `graph`,
  `recycle`, and the graph options: `options` or the flat `graph_options`, see
  `options.resolve`). Each is checked once, at trace time: what the setup reads
  (root, `invalid_actions`, `graph`, `recycle`) before it, the rest
  (`recurrent_fn`, `num_simulations`, `max_depth`, capacity, continued graphs) by
  `search_checked`.
  """
  call = SearchCall(
    params=params,
    rng_key=rng_key,
    root=root,
    recurrent_fn=recurrent_fn,
    num_simulations=num_simulations,
    invalid_actions=invalid_actions,
    max_depth=max_depth,
    loop_fn=loop_fn,
    options=options_lib.resolve(caller, options, graph_options),
    graph=graph,
    recycle=recycle,
  )
  call, read_out = setup(_checked(call))
  root = call.root.replace(
    prior_logits=mask_invalid_actions(call.root.prior_logits, call.invalid_actions)
  )
  root_rule, interior_rule = call.root_action_selection_fn, call.interior_action_selection_fn
  if root_rule is None or interior_rule is None:
    raise AssertionError(f"{caller}: its setup must supply both selection functions")
  searched = search_lib.search_checked(
    call.params,
    call.rng_key,
    root=root,
    # A None recurrent_fn (the user's) reaches search_checked's check, which names it.
    recurrent_fn=cast(types.RecurrentFn, call.recurrent_fn),
    root_action_selection_fn=root_rule,
    interior_action_selection_fn=interior_rule,
    num_simulations=call.num_simulations,
    max_depth=call.max_depth,
    invalid_actions=call.invalid_actions,
    options=call.options,
    extra_data=call.extra_data,
    loop_fn=call.loop_fn,
    graph=call.graph,
    recycle=call.recycle,
  )
  output = read_out(searched)
  return output.replace(action=final_action(output.search_graph, output.action, call.options))


def _checked(call: SearchCall) -> SearchCall:
  """`call` with its root's logits as an array and `invalid_actions` as bool `[B, A]`
  (all False when None), after `check_inputs` has checked them and `graph` and
  `recycle`, at trace time."""
  root, invalid_actions = check_inputs(call.root, call.invalid_actions, call.graph, call.recycle)
  return dataclasses.replace(call, root=root, invalid_actions=invalid_actions)


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
