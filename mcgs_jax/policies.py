"""Policies: a search plus the choice of the action to play, as in mctx."""

import functools
from typing import Optional

import jax
import jax.numpy as jnp

from mcgs_jax import checks
from mcgs_jax import hashing
from mcgs_jax import qtransforms
from mcgs_jax import search as search_lib
from mcgs_jax import selection
from mcgs_jax import proofs
from mcgs_jax import types

# Every policy by the name the command line and the arena use.
POLICY_NAMES = ("muzero", "gumbel", "uct")


def muzero_policy(params, rng_key, root: types.RootFnOutput, recurrent_fn,
                  num_simulations: int, invalid_actions=None,
                  max_depth: Optional[int] = None, loop_fn=jax.lax.fori_loop, *,
                  qtransform=qtransforms.qtransform_by_parent_and_siblings,
                  dirichlet_fraction: float = 0.25, dirichlet_alpha: float = 0.3,
                  pb_c_init: float = 1.25, pb_c_base: float = 19652.0,
                  temperature: float = 1.0, hash_fn=None, transpositions: bool = True,
                  stop_at_transposition: bool = True, capacity: Optional[int] = None,
                  probe_window: int = hashing.DEFAULT_PROBE_WINDOW,
                  graph=None, solver: bool = False,
                  num_parallel: int = 1) -> types.PolicyOutput:
  """AlphaZero / MuZero search on a graph; `mctx.muzero_policy` plus four keywords.

  Dirichlet noise is mixed into the root prior, invalid root actions are masked, PUCT
  on edge visits chooses actions, and the action is sampled from the root visit
  distribution raised to `1 / temperature`. With `transpositions=False` this is
  mctx's search, and with the same key it gives mctx's root visit counts.

  Args:
    params: passed to `recurrent_fn`.
    rng_key: the only source of randomness.
    root: `RootFnOutput`: prior logits `[B, A]`, value `[B]`, embedding `[B, ...]`.
    recurrent_fn: `(params, key, action [B], embedding) -> (RecurrentFnOutput,
      embedding)`.
    num_simulations: playouts per game.
    invalid_actions: `[B, A]` bool, actions the root may not take. A game whose row
      is all True gets `action_weights` of zeros and action 0.
    max_depth: most edges in a playout (default `num_simulations`).
    loop_fn: loop over simulations.
    qtransform, dirichlet_fraction, dirichlet_alpha, pb_c_init, pb_c_base,
      temperature: as in mctx.
    hash_fn: `embedding -> uint32 [B, L]` transposition key (default
      `mcgs_jax.hash_pytree`; use a game's key from `mcgs_jax.games` for pgx).
    transpositions: search a graph (True) or a tree (False).
    stop_at_transposition: end a playout at a child visited more than its edge.
    capacity: nodes per game (default `num_simulations + 1`).
    probe_window: hash slots read per lookup.
    graph: a previous graph to continue (see `mcgs_jax.search`), e.g. the result
      of `mcgs_jax.reroot(previous.search_graph, action)`.
    solver: prove exact values (`mcgs_jax.proofs`): playouts stop at proven nodes,
      selection skips dominated proven edges, and when the root has a proven win (or
      is proven) `action` is the best proven action.
    num_parallel: playouts per game per step with virtual visits, K (see
      `mcgs_jax.search`); `num_simulations` must be a multiple of K.

  Returns:
    `PolicyOutput(action [B], action_weights [B, A], search_graph)`.
  """
  batch_size, num_actions = checks.check_root(root)
  invalid_actions = checks.check_invalid_actions(invalid_actions, batch_size, num_actions)
  rng_key, dirichlet_key, search_key = jax.random.split(rng_key, 3)
  prior_probs = jax.nn.softmax(jnp.asarray(root.prior_logits), axis=-1)
  noisy_logits = probs_to_logits(add_dirichlet_noise(
      dirichlet_key, prior_probs, dirichlet_fraction=dirichlet_fraction,
      dirichlet_alpha=dirichlet_alpha))
  root = root.replace(prior_logits=mask_invalid_actions(noisy_logits, invalid_actions))
  root_fn, interior_fn = selection.make_muzero_selection(
      pb_c_init=pb_c_init, pb_c_base=pb_c_base, qtransform=qtransform, solver=solver)
  graph = search_lib.search(
      params, search_key, root=root, recurrent_fn=recurrent_fn,
      root_action_selection_fn=root_fn, interior_action_selection_fn=interior_fn,
      num_simulations=num_simulations, max_depth=max_depth,
      invalid_actions=invalid_actions, hash_fn=hash_fn, transpositions=transpositions,
      stop_at_transposition=stop_at_transposition, capacity=capacity,
      probe_window=probe_window, loop_fn=loop_fn, graph=graph, solver=solver,
      num_parallel=num_parallel)
  action_weights = graph.summary().visit_probs
  choice_weights = _without_proven_losses(graph, action_weights, solver)
  action_logits = apply_temperature(probs_to_logits(choice_weights), temperature)
  action = jax.random.categorical(rng_key, action_logits).astype(jnp.int32)
  has_visits = jnp.any(choice_weights > 0, axis=-1)
  action = jnp.where(has_visits, action, 0)
  return types.PolicyOutput(action=proofs.prefer_proven(graph, action) if solver else action,
                            action_weights=action_weights, search_graph=graph)


def uct_policy(params, rng_key, root: types.RootFnOutput, recurrent_fn,
               num_simulations: int, invalid_actions=None, max_depth: Optional[int] = None,
               loop_fn=jax.lax.fori_loop, *, c: float = 1.41, hash_fn=None,
               transpositions: bool = True, stop_at_transposition: bool = True,
               capacity: Optional[int] = None,
               probe_window: int = hashing.DEFAULT_PROBE_WINDOW,
               graph=None, solver: bool = False,
                  num_parallel: int = 1) -> types.PolicyOutput:
  """UCT (UCB1 on edge visits) as in seed 003, usually with a rollout evaluator.

  Selection ignores the prior except to recognise illegal actions (prior 0). The
  action is the most visited root action; `action_weights` is the root visit
  distribution. Arguments as `muzero_policy` (including `graph=` to continue a
  previous search and `solver=`); `c` is the exploration constant.
  """
  batch_size, num_actions = checks.check_root(root)
  invalid_actions = checks.check_invalid_actions(invalid_actions, batch_size, num_actions)
  if not c >= 0:
    raise ValueError(f"c must be >= 0, got {c}")
  root = root.replace(prior_logits=mask_invalid_actions(jnp.asarray(root.prior_logits),
                                                        invalid_actions))
  rule = functools.partial(selection.uct_action_selection, c=c, solver=solver)
  graph = search_lib.search(
      params, rng_key, root=root, recurrent_fn=recurrent_fn,
      root_action_selection_fn=lambda key, graph, node: rule(key, graph, node, 0),
      interior_action_selection_fn=rule, num_simulations=num_simulations,
      max_depth=max_depth, invalid_actions=invalid_actions, hash_fn=hash_fn,
      transpositions=transpositions, stop_at_transposition=stop_at_transposition,
      capacity=capacity, probe_window=probe_window, loop_fn=loop_fn, graph=graph,
      solver=solver, num_parallel=num_parallel)
  action_weights = graph.summary().visit_probs
  choice_weights = _without_proven_losses(graph, action_weights, solver)
  action = jnp.argmax(choice_weights, axis=-1).astype(jnp.int32)
  return types.PolicyOutput(action=proofs.prefer_proven(graph, action) if solver else action,
                            action_weights=action_weights, search_graph=graph)


def _without_proven_losses(graph, action_weights, solver: bool):
  """`action_weights` with the root edges the solver excludes (proven losses, proven
  edges beaten by another) set to 0, for choosing the action; unchanged without
  `solver`. The returned `action_weights` stay the visit distribution."""
  if not solver:
    return action_weights
  excluded = jax.vmap(proofs.excluded_edges, in_axes=(0, None))(graph, 0)
  return jnp.where(excluded, 0.0, action_weights)



def add_dirichlet_noise(rng_key, probs, *, dirichlet_fraction: float,
                        dirichlet_alpha: float):
  """`(1 - fraction) * probs + fraction * Dirichlet(alpha)`, per row of `[B, A]`."""
  if not 0.0 <= dirichlet_fraction <= 1.0:
    raise ValueError(f"dirichlet_fraction must be in [0, 1], got {dirichlet_fraction}")
  if not dirichlet_alpha > 0:
    raise ValueError(f"dirichlet_alpha must be > 0, got {dirichlet_alpha}")
  batch_size, num_actions = probs.shape
  noise = jax.random.dirichlet(rng_key, jnp.full((num_actions,), dirichlet_alpha),
                               shape=(batch_size,))
  return (1 - dirichlet_fraction) * probs + dirichlet_fraction * noise


def probs_to_logits(probs):
  """`log(probs)`, with zeros mapped to `log(tiny)` instead of -inf."""
  return jnp.log(jnp.maximum(probs, jnp.finfo(probs.dtype).tiny))


def mask_invalid_actions(logits, invalid_actions):
  """Sets invalid actions to the lowest finite logit (finite: no NaN in a softmax
  even when every action is invalid)."""
  logits = logits - jnp.max(logits, axis=-1, keepdims=True)
  return jnp.where(invalid_actions, jnp.finfo(logits.dtype).min, logits)


def apply_temperature(logits, temperature: float):
  """`logits / temperature`; temperature 0 becomes a greedy choice, not 0/0."""
  logits = logits - jnp.max(logits, axis=-1, keepdims=True)
  return logits / jnp.maximum(temperature, jnp.finfo(logits.dtype).tiny)
