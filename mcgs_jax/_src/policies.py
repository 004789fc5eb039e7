"""Policies: a search plus the choice of the action to play, as in mctx.

Each policy reads top to bottom: it resolves its graph options, checks its inputs
(once, at trace time), forms the root prior, runs the search, and reads the action
out of the searched graph. Below the policies: the root prior (Dirichlet noise,
`mask_invalid_actions`), and what every policy reads out of a searched graph (the
action to play and its weights, with the solver's say on both).
"""

import functools
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
from typing_extensions import Unpack

from mcgs_jax._src import action_selection, checks, proofs, qtransforms, types
from mcgs_jax._src import forced_playouts as forced
from mcgs_jax._src import options as options_lib
from mcgs_jax._src.checks import check_inputs
from mcgs_jax._src.graph import ROOT_INDEX, Graph
from mcgs_jax._src.options import GraphKeywords, GraphOptions
from mcgs_jax._src.search import search_with_checked_inputs


def muzero_policy(
  params: types.Params,
  rng_key: chex.PRNGKey,
  root: types.RootFnOutput,
  recurrent_fn: types.RecurrentFn,
  num_simulations: int,
  invalid_actions: chex.Array | None = None,
  max_depth: int | None = None,
  loop_fn: types.LoopFn = jax.lax.fori_loop,
  *,
  qtransform: types.QTransform = qtransforms.qtransform_by_parent_and_siblings,
  dirichlet_fraction: float = 0.25,
  dirichlet_alpha: float = 0.3,
  pb_c_init: float = 1.25,
  pb_c_base: float = 19652.0,
  temperature: float = 1.0,
  forced_playouts: float = 0.0,
  graph: Graph | None = None,
  recycle: Graph | None = None,
  options: GraphOptions | None = None,
  **graph_options: Unpack[GraphKeywords],
) -> types.PolicyOutput:
  """AlphaZero / MuZero search on a graph: `mctx.muzero_policy` plus graph keywords.

  Dirichlet noise is mixed into the root prior, invalid root actions are masked, PUCT
  on edge visits chooses actions, and the action is sampled from the root visit
  distribution raised to `1 / temperature`. With `transpositions=False` this is
  mctx's search, and with the same key it gives mctx's root visit counts.

  Args:
    params: passed to `recurrent_fn`.
    rng_key: the only source of randomness.
    root: `RootFnOutput`: prior logits `[B, A]`, value `[B]`, embedding `[B, ...]`
      (or empty, `()`: with no state to key, the default key cannot tell states
      apart, so the search runs as a tree; a `hash_fn` of your own still works).
    recurrent_fn: `(params, key, action [B], embedding) -> (RecurrentFnOutput,
      embedding)`; every embedding leaf keeps its shape and dtype.
    num_simulations: playouts per game, >= 1.
    invalid_actions: `[B, A]` bool, actions the root may not take. A game whose row
      is all True gets `action_weights` of zeros and action 0; a game whose every
      playout was dropped (non-finite evaluations) plays its valid action with the
      highest prior.
    max_depth: most edges in a playout (default `num_simulations`).
    loop_fn: loop over simulations.
    qtransform, dirichlet_fraction, dirichlet_alpha, pb_c_init, pb_c_base,
      temperature: as in mctx (`temperature >= 0`, 0 greedy); each may be traced,
      and its range is checked when it is known at trace time. A
      `dirichlet_fraction` known to be 0 draws no noise (the same result, a program
      that compiles faster; `dirichlet_prior`).
    forced_playouts: KataGo's forced playouts (`k`, 2 in "Accelerating Self-Play
      Learning in Go", Wu 2019): each root child `c` with a visit gets at least
      `sqrt(k * P(c) * sum N(root, .))` playouts (`P` with the noise). A float >=
      0 known at trace time; 0 (default) is mctx's rule. `action_weights` stay the
      root's visits; `mcgs_jax.prune_forced_playouts` gives the training target
      with the forced playouts taken out.
    graph: a previous graph to continue (see `mcgs_jax.search`), e.g. the result
      of `mcgs_jax.reroot(previous.search_graph, action)`.
    recycle: a finished graph of the same shapes whose arrays this search
      overwrites instead of allocating new ones (see `mcgs_jax.search`): the same
      result, a set-up that costs what the old graph used, not its capacity.
      Donate it. Not with `graph`.
    options: the graph options as one `mcgs_jax.GraphOptions`, or None to build
      them from `**graph_options`. Not with `**graph_options` (a TypeError: neither
      overrides the other).
    **graph_options: the fields of `mcgs_jax.GraphOptions` as flat keywords:
      `hash_fn` (the transposition key; use a game's key from `mcgs_jax.games` for
      pgx), `transpositions`, `stop_rule`, `stop_leak`, `stop_epsilon`,
      `capacity`, `probe_window`, `solver`, `value_bounds`, `num_parallel`,
      `fold_evaluations`. With `solver`, when the root is decided `action` is the
      best proven action, and it is never a proven loss while another valid
      action is not one (`PolicyOutput` says what `action_weights` hold).

  Returns:
    `PolicyOutput(action [B], action_weights [B, A], search_graph)`.
  """
  options = options_lib.resolve("muzero_policy", options, graph_options)
  root, invalid_actions = check_inputs(root, invalid_actions, graph, recycle)
  check_puct(
    pb_c_init=pb_c_init, pb_c_base=pb_c_base, temperature=temperature, qtransform=qtransform
  )
  rng_key, dirichlet_key, search_key = jax.random.split(rng_key, 3)
  root_rule, interior_rule = action_selection.make_muzero_selection(
    pb_c_init=pb_c_init, pb_c_base=pb_c_base, qtransform=qtransform, solver=options.solver
  )
  forced_count = _forced_playouts(forced_playouts)
  if forced_count > 0:
    root_rule = functools.partial(
      forced.forced_root_action_selection,
      forced_playouts=forced_count,
      pb_c_init=pb_c_init,
      pb_c_base=pb_c_base,
      qtransform=qtransform,
      solver=options.solver,
    )
  noisy_logits = dirichlet_prior(
    dirichlet_key, root.prior_logits, fraction=dirichlet_fraction, alpha=dirichlet_alpha
  )
  searched = search_with_checked_inputs(
    params,
    search_key,
    root=root.replace(prior_logits=mask_invalid_actions(noisy_logits, invalid_actions)),
    recurrent_fn=recurrent_fn,
    root_action_selection_fn=root_rule,
    interior_action_selection_fn=interior_rule,
    num_simulations=num_simulations,
    max_depth=max_depth,
    invalid_actions=invalid_actions,
    options=options,
    loop_fn=loop_fn,
    graph=graph,
    recycle=recycle,
  )
  return sample_from_visits(rng_key, searched, options=options, temperature=temperature)


def uct_policy(
  params: types.Params,
  rng_key: chex.PRNGKey,
  root: types.RootFnOutput,
  recurrent_fn: types.RecurrentFn,
  num_simulations: int,
  invalid_actions: chex.Array | None = None,
  max_depth: int | None = None,
  loop_fn: types.LoopFn = jax.lax.fori_loop,
  *,
  c: float = 1.41,
  graph: Graph | None = None,
  recycle: Graph | None = None,
  options: GraphOptions | None = None,
  **graph_options: Unpack[GraphKeywords],
) -> types.PolicyOutput:
  """UCT (UCB1 on edge visits), usually with a rollout evaluator, as in the classic
  UCT with random playouts on Nim.

  Selection ignores the prior except to recognise illegal actions (prior 0). The
  action is the most visited root action; `action_weights` is the root visit
  distribution. Arguments as `muzero_policy` (including `graph=`, `recycle=`, `options=`
  and the graph keywords); `c` is the exploration constant, >= 0.
  """
  options = options_lib.resolve("uct_policy", options, graph_options)
  root, invalid_actions = check_inputs(root, invalid_actions, graph, recycle)
  checks.check_real("c", c, low=0)
  rule = functools.partial(action_selection.uct_action_selection, c=c, solver=options.solver)
  searched = search_with_checked_inputs(
    params,
    rng_key,
    root=root.replace(prior_logits=mask_invalid_actions(root.prior_logits, invalid_actions)),
    recurrent_fn=recurrent_fn,
    root_action_selection_fn=lambda key, game_graph, node: rule(key, game_graph, node, 0),
    interior_action_selection_fn=rule,
    num_simulations=num_simulations,
    max_depth=max_depth,
    invalid_actions=invalid_actions,
    options=options,
    loop_fn=loop_fn,
    graph=graph,
    recycle=recycle,
  )
  return most_visited(searched, options=options)


def _forced_playouts(value: Any) -> float:
  """`forced_playouts` as a float; ValueError naming it unless it is a finite number
  >= 0 known at trace time (it decides which root rule the search compiles)."""
  known = checks.concrete(value)
  if known is None or np.ndim(known) != 0:
    raise ValueError(
      f"forced_playouts must be a number known at trace time (a Python float), got {value!r}"
    )
  checks.check_real("forced_playouts", value, low=0)
  return float(known)


def check_puct(*, pb_c_init: Any, pb_c_base: Any, temperature: Any, qtransform: Any) -> None:
  """Range checks of PUCT's constants and the temperature, run when their values are
  known at trace time (traced values, e.g. arguments of a jitted function, are taken
  as given, as in mctx), and that `qtransform` is callable."""
  checks.check_callable("qtransform", qtransform, "(graph, node) -> [A] scores")
  checks.check_real("pb_c_init", pb_c_init, expected="a real number")
  checks.check_real("pb_c_base", pb_c_base, low=0, low_open=True)
  checks.check_real("temperature", temperature, low=0)


def dirichlet_prior(
  rng_key: chex.PRNGKey, prior_logits: chex.Array, *, fraction: float, alpha: float
) -> chex.Array:
  """The logits of `(1 - fraction) * softmax(prior_logits) + fraction *
  Dirichlet(alpha)`, per row of `[B, A]`: AlphaZero's exploration noise at the root.

  A `fraction` known at trace time to be 0 draws no noise: the result is the same to
  the bit (the noise's weight is an exact 0, and `p + 0.0 == p`), and the program
  compiles without the Gamma sampler, which takes long to compile. `rng_key` is not
  used then.
  """
  # Checked when known at trace time; a traced value (jit argument) is taken as given.
  checks.check_real("dirichlet_fraction", fraction, low=0, high=1)
  checks.check_real("dirichlet_alpha", alpha, low=0, low_open=True)
  known_fraction = checks.concrete(fraction)
  if known_fraction is not None and np.all(known_fraction == 0):
    return probs_to_logits(jax.nn.softmax(prior_logits, axis=-1))
  batch_size, num_actions = prior_logits.shape
  noise = jax.random.dirichlet(rng_key, jnp.full((num_actions,), alpha), shape=(batch_size,))
  probs = jax.nn.softmax(prior_logits, axis=-1)
  return probs_to_logits((1 - fraction) * probs + fraction * noise)


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
  best_prior = jax.vmap(action_selection.masked_argmax)(
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


def mask_invalid_actions(logits: jax.Array, invalid_actions: jax.Array) -> jax.Array:
  """Sets invalid actions to the lowest finite logit (finite: no NaN in a softmax
  even when every action is invalid)."""
  logits = logits - jnp.max(logits, axis=-1, keepdims=True)
  return jnp.where(invalid_actions, jnp.finfo(logits.dtype).min, logits)


def probs_to_logits(probs: jax.Array) -> jax.Array:
  """`log(probs)`, with zeros mapped to `log(tiny)` instead of -inf."""
  return jnp.log(jnp.maximum(probs, jnp.finfo(probs.dtype).tiny))


def apply_temperature(logits: jax.Array, temperature: float | jax.Array) -> jax.Array:
  """`logits / temperature`; temperature 0 becomes a greedy choice, not 0/0."""
  logits = logits - jnp.max(logits, axis=-1, keepdims=True)
  return logits / jnp.maximum(temperature, jnp.finfo(logits.dtype).tiny)
