"""Policies: a search plus the choice of the action to play, as in mctx.

Each policy reads top to bottom: it resolves its graph options, checks its inputs
(once, at trace time), forms the root prior (`logits`), runs the search, and reads
the action out of the searched graph (`readout`).
"""

import functools
from typing import Any

import chex
import jax
import numpy as np
from typing_extensions import Unpack

from mcgs_jax._src import action_selection, checks, qtransforms, types
from mcgs_jax._src import forced_playouts as forced
from mcgs_jax._src import options as options_lib
from mcgs_jax._src.checks import check_inputs, check_puct
from mcgs_jax._src.graph import Graph
from mcgs_jax._src.logits import dirichlet_prior, mask_invalid_actions
from mcgs_jax._src.options import GraphKeywords, GraphOptions
from mcgs_jax._src.readout import most_visited, sample_from_visits
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
  root_rule, interior_rule = _puct_rules(
    pb_c_init=pb_c_init,
    pb_c_base=pb_c_base,
    qtransform=qtransform,
    forced_playouts=forced_playouts,
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


def _puct_rules(
  *,
  pb_c_init: Any,
  pb_c_base: Any,
  qtransform: types.QTransform,
  forced_playouts: Any,
  solver: bool,
) -> tuple[types.RootActionSelectionFn, types.InteriorActionSelectionFn]:
  """The (root, interior) PUCT rules of `muzero_policy`: KataGo's forced playouts at
  the root when `forced_playouts > 0`, else mctx's rule at both."""
  root_rule, interior_rule = action_selection.make_muzero_selection(
    pb_c_init=pb_c_init, pb_c_base=pb_c_base, qtransform=qtransform, solver=solver
  )
  forced_count = _forced_playouts(forced_playouts)
  if forced_count > 0:
    root_rule = functools.partial(
      forced.forced_root_action_selection,
      forced_playouts=forced_count,
      pb_c_init=pb_c_init,
      pb_c_base=pb_c_base,
      qtransform=qtransform,
      solver=solver,
    )
  return root_rule, interior_rule


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
