"""`gumbel_muzero_policy`: Sequential Halving at the root, the interior rule below,
the winner played."""

import chex
import jax
import jax.numpy as jnp
from typing_extensions import Unpack

from mcgs_jax._src import checks, qtransforms, types
from mcgs_jax._src import options as options_lib
from mcgs_jax._src.checks import check_inputs
from mcgs_jax._src.compact import slot_width
from mcgs_jax._src.graph import ROOT_INDEX, Graph
from mcgs_jax._src.gumbel.sequential_halving import (
  GumbelMuZeroExtraData,
  make_gumbel_selection,
  sequential_halving_winner,
)
from mcgs_jax._src.initial import finite_root
from mcgs_jax._src.logits import mask_invalid_actions
from mcgs_jax._src.options import GraphKeywords, GraphOptions
from mcgs_jax._src.search import search_with_checked_inputs


def gumbel_muzero_policy(
  params: types.Params,
  rng_key: chex.PRNGKey,
  root: types.RootFnOutput,
  recurrent_fn: types.RecurrentFn,
  num_simulations: int,
  invalid_actions: chex.Array | None = None,
  max_depth: int | None = None,
  loop_fn: types.LoopFn = jax.lax.fori_loop,
  *,
  qtransform: types.QTransform = (qtransforms.qtransform_completed_by_mix_value),
  max_num_considered_actions: int = 16,
  gumbel_scale: float = 1.0,
  graph: Graph | None = None,
  recycle: Graph | None = None,
  options: GraphOptions | None = None,
  **graph_options: Unpack[GraphKeywords],
) -> types.PolicyOutput:
  """Gumbel MuZero search on a graph; `mctx.gumbel_muzero_policy` plus the graph
  keywords of `mcgs_jax.muzero_policy`.

  Invalid root actions get the lowest finite logit, Gumbel noise is drawn for the
  root, playouts choose root actions by Sequential Halving and interior actions by
  the deterministic rule, and the action is the Sequential-Halving winner: among the
  actions visited most by this search, the one with the highest
  `gumbel + logits + completed Q`. The key is used as mctx uses it (one split: Gumbel
  noise, then the search), so with `transpositions=False` this reproduces
  `mctx.gumbel_muzero_policy` on the same inputs and key.

  Args:
    params: passed to `recurrent_fn`.
    rng_key: the only source of randomness.
    root: `RootFnOutput`: prior logits `[B, A]`, value `[B]`, embedding `[B, ...]`.
    recurrent_fn: `(params, key, action [B], embedding) -> (RecurrentFnOutput,
      embedding)`.
    num_simulations: playouts per game; also the length of the Sequential-Halving
      schedule.
    invalid_actions: `[B, A]` bool, actions the root may not take. A game whose row
      is all True gets `action_weights` of zeros and action 0 (as `muzero_policy`;
      mctx returns uniform weights there).
    max_depth: most edges in a playout (default `num_simulations`).
    loop_fn: loop over simulations.
    qtransform: `(graph, node) -> [A]` completed Q-values, used by both rules and
      by the action weights.
    max_num_considered_actions: actions sampled without replacement at the root,
      >= 1 (fewer when fewer are valid).
    gumbel_scale: scale of the root Gumbel noise, >= 0 (0: deterministic, e.g. for
      evaluation in perfect-information games).
    graph: a previous graph to continue (see `mcgs_jax.search`). Sequential Halving
      then schedules only this call's playouts, counting root visits above those
      the graph held (a game restarted from an empty graph counts from zero).
    recycle: a finished graph of the same shapes whose arrays this search
      overwrites (see `muzero_policy`). Not with `graph`.
    options: the graph options as one `mcgs_jax.GraphOptions` (see
      `muzero_policy`). Not with `**graph_options`.
    **graph_options: the fields of `mcgs_jax.GraphOptions` as flat keywords, as for
      `muzero_policy`. With `solver`, both rules skip dominated proven edges and
      where the root is decided `action` is the best proven action; with
      `num_parallel`, Sequential Halving counts the in-flight visits too.

  Returns:
    `PolicyOutput(action [B] int32, action_weights [B, A], search_graph)`, where
    `action_weights = softmax(prior_logits + completed Q at the root)` over valid
    actions, the policy-improvement target of the paper.
  """
  options = options_lib.resolve("gumbel_muzero_policy", options, graph_options)
  root, invalid_actions = check_inputs(root, invalid_actions, graph, recycle)
  root_rule, interior_rule = _selection_rules(
    num_simulations, max_num_considered_actions, gumbel_scale, qtransform, options
  )
  logits = _scored_logits(root, invalid_actions)
  search_key, extra_data = _root_noise(rng_key, logits, gumbel_scale, graph, options)
  searched = search_with_checked_inputs(
    params,
    search_key,
    root=root.replace(prior_logits=mask_invalid_actions(root.prior_logits, invalid_actions)),
    recurrent_fn=recurrent_fn,
    root_action_selection_fn=root_rule,
    interior_action_selection_fn=interior_rule,
    num_simulations=num_simulations,
    max_depth=max_depth,
    invalid_actions=invalid_actions,
    options=options,
    extra_data=extra_data,
    loop_fn=loop_fn,
    graph=graph,
    recycle=recycle,
  )
  return sequential_halving_winner(
    searched,
    extra_data=extra_data,
    logits=logits,
    invalid_actions=invalid_actions,
    qtransform=qtransform,
    options=options,
  )


def _selection_rules(
  num_simulations: int,
  max_num_considered_actions: int,
  gumbel_scale: float,
  qtransform: types.QTransform,
  options: GraphOptions,
) -> tuple[types.RootActionSelectionFn, types.InteriorActionSelectionFn]:
  """Checks the policy's own arguments; returns the selection rules they make
  (`make_gumbel_selection`): Sequential Halving at the root, the deterministic rule
  below."""
  checked_max = checks.check_int(
    "max_num_considered_actions", max_num_considered_actions, minimum=1
  )
  # Checked when known at trace time; a traced scale (jit argument) is taken as given.
  checks.check_real("gumbel_scale", gumbel_scale, low=0)
  checks.check_callable("qtransform", qtransform, "(graph, node) -> [A] completed Q-values")
  return make_gumbel_selection(
    num_simulations=num_simulations,
    max_num_considered_actions=checked_max,
    qtransform=qtransform,
    solver=options.solver,
  )


def _root_noise(
  rng_key: chex.PRNGKey,
  logits: chex.Array,
  gumbel_scale: float,
  graph: Graph | None,
  options: GraphOptions,
) -> tuple[chex.PRNGKey, GumbelMuZeroExtraData]:
  """Splits `rng_key` as mctx does, into the search's key and the key of the root's
  Gumbel noise (`[B, A]`, of `logits [B, A]`'s shape and dtype, times
  `gumbel_scale`); returns `(search_key, extra_data)`, the noise with the root's
  edge visits `[B, W]` before this search (`_root_visits_before`)."""
  search_key, gumbel_key = jax.random.split(rng_key)
  extra_data = GumbelMuZeroExtraData(
    root_gumbel=gumbel_scale * jax.random.gumbel(gumbel_key, logits.shape, logits.dtype),
    root_visits_before=_root_visits_before(
      graph, (logits.shape[0], slot_width(options.max_children, logits.shape[-1]))
    ),
  )
  return search_key, extra_data


def _scored_logits(root: types.RootFnOutput, invalid_actions: chex.Array) -> chex.Array:
  """`[B, A]` root logits the scores read: invalid actions masked, a NaN replaced as
  the search replaces (and counts in `non_finite_roots`) it."""
  finite, _ = finite_root(root, invalid_actions)
  return mask_invalid_actions(finite.prior_logits, invalid_actions)


def _root_visits_before(graph: Graph | None, shape: tuple[int, int]) -> chex.Array:
  """`[B, W]` int32, the root's edge visits of the graph a search continues (zeros
  without one, and for a game whose graph is empty: it restarts from the root)."""
  if graph is None:
    return jnp.zeros(shape, jnp.int32)
  visits = jnp.where((graph.num_nodes == 0)[:, None], 0, graph.edge_visits[:, ROOT_INDEX])
  return visits.astype(jnp.int32)
