"""Gumbel MuZero on a graph (Danihelka et al. 2022, "Policy improvement by planning
with Gumbel"), with the arguments and results of `mctx.gumbel_muzero_policy`.

At the root, Sequential Halving with Gumbel noise decides which action each playout
takes; at every other node a deterministic rule steers the edge visit counts towards
`softmax(prior_logits + completed_qvalues)`. Both rules read edge statistics,
`N(n, a) = graph.edge_visits` and the live `Q(n, a) = graph.qvalues(n)`, so in graph
mode a shared child's current value is seen through every edge into it. With
`transpositions=False` the search is mctx's tree search, and the same inputs and key
give mctx's visit counts, action and action weights (up to float rounding in
near-ties).

Sequential Halving at the root
------------------------------
The playouts of one search are scheduled in phases. In each phase the `k`
best-looking actions (by `gumbel + logits + completed Q`) are visited equally often,
then `k` halves (never below 2). The schedule is a table of "considered visit
counts": before playout `i`, only actions whose visit count equals
`table[k0, i]` may be chosen, and among them the one with the highest score; `k0` is
the number of actions considered at the start. The root rule recovers `i` as the
number of root edge visits made by this search so far, which in a graph equals the
playout index too: every playout crosses exactly one root edge (a cycle back to the
root ends the playout there), except one whose root edge needed a new node when the
graph was full: that edge is not counted, `i` stays, and the next playout retries
the same step.

When a search continues a previous graph (`graph=`), the root may already hold
visits. Sequential Halving then runs afresh over this call's playouts: it counts only
the visits made since the call began (the earlier ones are kept in
`GumbelMuZeroExtraData.root_visits_before`); the completed Q-values use them all.
"""

import functools
import math

import chex
import jax
import jax.numpy as jnp
from typing_extensions import Unpack

from mcgs_jax._src import checks, qtransforms, types
from mcgs_jax._src import options as options_lib
from mcgs_jax._src.action_selection import (
  excluded_actions,
  gumbel_muzero_interior_action_selection,
  masked_argmax,
)
from mcgs_jax._src.checks import check_inputs
from mcgs_jax._src.compact import slot_width
from mcgs_jax._src.graph import ROOT_INDEX, Graph
from mcgs_jax._src.initial import finite_root
from mcgs_jax._src.options import GraphKeywords, GraphOptions
from mcgs_jax._src.policies import excluded_root_edges, final_action, mask_invalid_actions
from mcgs_jax._src.search import search_with_checked_inputs

# Floor of a root score before the Sequential-Halving mask (as mctx): keeps the sum
# finite for actions whose logit is the lowest float.
_LOW_SCORE = -1e9


@chex.dataclass(frozen=True)
class GumbelMuZeroExtraData:
  """What the root rule needs beside the graph (`graph.extra_data`).

  root_gumbel: `[B, A]` float, the Gumbel noise of the root, drawn once per search
    and scaled by `gumbel_scale`.
  root_visits_before: `[B, A]` int32 or None, the root's edge visits when this
    search began; Sequential Halving counts visits above these. None (as when the
    extra data is built as for mctx, with `root_gumbel` alone) means zeros.
  """

  root_gumbel: chex.Array
  root_visits_before: chex.Array | None = None


def considered_visit_sequence(
  max_num_considered_actions: int, num_simulations: int
) -> tuple[int, ...]:
  """The Sequential-Halving schedule of one search: `num_simulations` visit counts.

  Entry `i` is the visit count an action must have to be chosen by playout `i`
  (Karnin et al. 2013, with the budget split as in Gumbel MuZero). With `k` actions
  considered, a phase visits each of them `max(1, S // (ceil(log2 k0) * k))` times,
  one round after another, then halves `k` (to no fewer than 2). The actions
  considered in a phase always have equal visit counts, so a round is `k` copies
  of that count. With at most one action considered, every playout may choose it:
  the schedule is `0, 1, 2, ...`.
  """
  if max_num_considered_actions <= 1:
    return tuple(range(num_simulations))
  num_phases = math.ceil(math.log2(max_num_considered_actions))
  schedule: list[int] = []
  considered = max_num_considered_actions
  visits = 0
  while len(schedule) < num_simulations:
    rounds = max(1, num_simulations // (num_phases * considered))
    for _ in range(rounds):
      schedule.extend([visits] * considered)
      visits += 1
    considered = max(2, considered // 2)
  return tuple(schedule[:num_simulations])


def considered_visit_table(
  max_num_considered_actions: int, num_simulations: int
) -> tuple[tuple[int, ...], ...]:
  """`considered_visit_sequence(k, num_simulations)` for `k = 0 ..
  max_num_considered_actions`: shape `[max_num_considered_actions + 1, S]`."""
  return tuple(
    considered_visit_sequence(k, num_simulations) for k in range(max_num_considered_actions + 1)
  )


def gumbel_scores(gumbel: chex.Array, logits: chex.Array, qvalues: chex.Array) -> chex.Array:
  """`gumbel + logits + qvalues` floored at -1e9 (`[..., A]` float each); the logits
  are shifted so their maximum is 0 (the same for every action: an argmax is
  unchanged)."""
  logits = logits - jnp.max(logits, axis=-1, keepdims=True)
  return jnp.maximum(_LOW_SCORE, gumbel + logits + qvalues)


def score_considered(
  considered_visit: chex.Numeric,
  gumbel: chex.Array,
  logits: chex.Array,
  qvalues: chex.Array,
  visit_counts: chex.Array,
) -> chex.Array:
  """Root scores for an argmax: `gumbel_scores` where `visit_counts ==
  considered_visit`, -inf elsewhere.

  Args:
    considered_visit: scalar, or `[..., 1]` to broadcast over actions.
    gumbel, logits, qvalues: `[..., A]` float.
    visit_counts: `[..., A]`, visits counted by Sequential Halving.

  Returns:
    `[..., A]` float; -inf only reaches an argmax, never a softmax.
  """
  score = gumbel_scores(gumbel, logits, qvalues)
  return jnp.where(visit_counts == considered_visit, score, -jnp.inf)


def gumbel_muzero_root_action_selection(
  rng_key: chex.PRNGKey,
  graph: Graph,
  node_index: chex.Array,
  *,
  num_simulations: int,
  max_num_considered_actions: int,
  qtransform: types.QTransform = qtransforms.qtransform_completed_by_mix_value,
  solver: bool = False,
) -> chex.Array:
  """Sequential Halving with Gumbel at the root of one game's graph.

  The schedule step `i` is the number of root edge visits this search has made
  (current `graph.edge_visits[root]` minus `extra_data.root_visits_before`); among
  the valid actions with exactly `table[k0, i]` such visits, where
  `k0 = min(max_num_considered_actions, number of valid root actions)`, the one with
  the highest `gumbel + prior_logits + completed Q` is chosen. The first phase thus
  samples `k0` actions without replacement (the Gumbel-top-k trick).

  Args:
    rng_key: unused (the rule is deterministic given the graph's Gumbel noise).
    graph: one game's graph; `graph.extra_data` holds that game's `root_gumbel [A]`
      and optionally `root_visits_before [A]` (a `GumbelMuZeroExtraData`, or
      anything with those attributes, e.g. mctx's).
    node_index: scalar, the root.
    num_simulations: playouts of this search, the length of the schedule.
    max_num_considered_actions: actions considered in the first phase, >= 1.
    qtransform: `(graph, node) -> [A]` completed Q-values.
    solver: also skip root edges the solver excludes (proven losses, beaten proofs).

  Returns:
    Scalar int32 action; 0 when every root action is invalid.
  """
  del rng_key
  visits = graph.edge_visits[node_index]
  visits_before = getattr(graph.extra_data, "root_visits_before", None)
  if visits_before is not None:
    visits = visits - visits_before
  completed_qvalues = qtransform(graph, node_index)
  num_actions = graph.num_actions
  # Rows past A are never read: k0 <= number of valid actions <= A.
  table = jnp.asarray(
    considered_visit_table(min(max_num_considered_actions, num_actions), num_simulations), jnp.int32
  )
  num_valid = jnp.sum(~graph.root_invalid_edges).astype(jnp.int32)
  num_considered = jnp.minimum(min(max_num_considered_actions, num_actions), num_valid)
  step = jnp.clip(jnp.sum(visits), 0, num_simulations - 1)
  score = gumbel_scores(
    graph.actions_to_root_row(graph.extra_data.root_gumbel, 0.0),
    graph.children_prior_logits[node_index],
    completed_qvalues,
  )
  scheduled = visits == table[num_considered, step]
  excluded = excluded_actions(graph, node_index, 0, solver)
  # The solver (or a non-finite evaluation) may have excluded every action the
  # schedule asks for at this step: the best of the others then gets the playout,
  # not action 0, which may be invalid.
  scheduled |= ~jnp.any(scheduled & ~excluded)
  return masked_argmax(jnp.where(scheduled, score, -jnp.inf), excluded)


def make_gumbel_selection(
  *,
  num_simulations: int,
  max_num_considered_actions: int,
  qtransform: types.QTransform,
  solver: bool,
) -> tuple[types.RootActionSelectionFn, types.InteriorActionSelectionFn]:
  """The (root, interior) pair of Gumbel MuZero's rules with these settings."""
  root = functools.partial(
    gumbel_muzero_root_action_selection,
    num_simulations=num_simulations,
    max_num_considered_actions=max_num_considered_actions,
    qtransform=qtransform,
    solver=solver,
  )
  interior = functools.partial(
    gumbel_muzero_interior_action_selection, qtransform=qtransform, solver=solver
  )
  return root, interior


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
  checked_max = _check_arguments(max_num_considered_actions, gumbel_scale, qtransform)
  logits = _scored_logits(root, invalid_actions)
  root_rule, interior_rule = make_gumbel_selection(
    num_simulations=num_simulations,
    max_num_considered_actions=checked_max,
    qtransform=qtransform,
    solver=options.solver,
  )
  search_key, gumbel_key = jax.random.split(rng_key)
  extra_data = GumbelMuZeroExtraData(
    root_gumbel=gumbel_scale * jax.random.gumbel(gumbel_key, logits.shape, logits.dtype),
    root_visits_before=_root_visits_before(
      graph, (root.prior_logits.shape[0], slot_width(options.max_children, logits.shape[-1]))
    ),
  )
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
  return _sequential_halving_winner(
    searched,
    extra_data=extra_data,
    logits=logits,
    invalid_actions=invalid_actions,
    qtransform=qtransform,
    options=options,
  )


def _check_arguments(
  max_num_considered_actions: int, gumbel_scale: float, qtransform: types.QTransform
) -> int:
  """Checks the policy's own arguments; returns `max_num_considered_actions`."""
  checked_max = checks.check_int(
    "max_num_considered_actions", max_num_considered_actions, minimum=1
  )
  # Checked when known at trace time; a traced scale (jit argument) is taken as given.
  checks.check_real("gumbel_scale", gumbel_scale, low=0)
  checks.check_callable("qtransform", qtransform, "(graph, node) -> [A] completed Q-values")
  return checked_max


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


def _sequential_halving_winner(
  graph: Graph,
  *,
  extra_data: GumbelMuZeroExtraData,
  logits: chex.Array,
  invalid_actions: chex.Array,
  qtransform: types.QTransform,
  options: GraphOptions,
) -> types.PolicyOutput:
  """The winner of Sequential Halving, the best-scoring of the valid actions this
  search visited most, leaving out those the solver excludes (rows with fewer valid
  actions may end on a different visit count; the best proven action where the
  solver has decided the root), and
  `softmax(logits + completed Q)` over the valid actions as the weights (zeros where
  no action is valid). `logits`: `[B, A]`, the masked finite root logits. With
  compact edges all of it is computed over the root's slots, and the weights are
  zero at actions no slot holds."""
  visits = graph.edge_visits[:, ROOT_INDEX] - extra_data.root_visits_before
  completed_qvalues = jax.vmap(qtransform, in_axes=(0, None))(graph, ROOT_INDEX)
  excluded = excluded_root_edges(graph, options)
  logits_row = graph.actions_to_root_row(logits, jnp.finfo(logits.dtype).min)
  score = score_considered(
    jnp.max(jnp.where(excluded, 0, visits), axis=-1, keepdims=True),
    graph.actions_to_root_row(extra_data.root_gumbel, 0.0),
    logits_row,
    completed_qvalues,
    visits,
  )
  invalid_row = invalid_actions if not graph.compact else graph.root_invalid_edges
  action_weights = jax.nn.softmax(mask_invalid_actions(logits_row + completed_qvalues, invalid_row))
  no_valid_action = jnp.all(invalid_row, axis=-1, keepdims=True)
  action_weights = graph.root_row_to_actions(jnp.where(no_valid_action, 0.0, action_weights), 0.0)
  best = graph.root_edge_actions(masked_argmax(score, excluded))
  return types.PolicyOutput(
    action=final_action(graph, best, options),
    action_weights=action_weights,
    search_graph=graph,
  )
