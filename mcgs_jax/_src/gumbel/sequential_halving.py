"""Sequential Halving with Gumbel noise, the root rule of Gumbel MuZero (Danihelka et
al. 2022, "Policy improvement by planning with Gumbel"), on a graph, and the
winner a search plays.

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

from mcgs_jax._src import qtransforms, types
from mcgs_jax._src.action_selection import excluded_actions, gumbel_muzero_interior_action_selection
from mcgs_jax._src.graph import ROOT_INDEX, Graph
from mcgs_jax._src.logits import mask_invalid_actions
from mcgs_jax._src.options import GraphOptions
from mcgs_jax._src.readout import excluded_root_edges, final_action
from mcgs_jax._src.tie_break import masked_argmax

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


def sequential_halving_winner(
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
