"""What a playout's evaluation (`recurrent_fn`'s output for its last edge) is to the
graph: whether it can be used (`finite_outputs`), the form the graph stores it in
(`stored_evaluation`), and, with `fold_evaluations`, one more sample of the value of
an existing node (`fold_evaluation`)."""

import chex
import jax.numpy as jnp

from mcgs_jax._src import compact, types
from mcgs_jax._src.batched import drop_unless, set_at, take
from mcgs_jax._src.graph import Graph
from mcgs_jax._src.options import GraphOptions
from mcgs_jax._src.rows import small_enough_to_sum


def finite_outputs(output: types.RecurrentFnOutput) -> chex.Array:
  """`[B]` bool: `recurrent_fn`'s output for a game can be used. Reward and discount
  must be finite; unless the discount is 0 (a terminal state, whose value and prior
  the search never reads), so must the value, `reward + discount * value` and the
  prior logits: no NaN, no +inf, and at least one finite logit (-inf is a zero
  prior, as an illegal action). "Finite" for the reward and value means
  `small_enough_to_sum`: no larger than sqrt(largest float); the discount must lie
  in [-1, 1] (a finite discount of 1e10 would compound along a path until Q
  overflowed). Within those, no Q computed from them overflows."""
  reward, discount = jnp.asarray(output.reward), jnp.asarray(output.discount)
  value = jnp.asarray(output.value)
  logits = jnp.asarray(output.prior_logits)
  # `<= 1` is False for NaN too.
  step = small_enough_to_sum(reward) & (jnp.abs(discount) <= 1)
  # `logits < inf` is False for NaN too.
  evaluation = (
    small_enough_to_sum(value)
    & small_enough_to_sum(reward + discount * value)
    & jnp.all(logits < jnp.inf, axis=-1)
    & jnp.any(jnp.isfinite(logits), axis=-1)
  )
  return step & ((discount == 0) | evaluation)


@chex.dataclass(frozen=True)
class Evaluation:
  """What the graph stores of `recurrent_fn`'s output for the last edge of every
  path, in the graph's dtypes."""

  reward: chex.Array  # [B], the edge's reward.
  discount: chex.Array  # [B], the edge's discount.
  terminal: chex.Array  # [B] bool, the state is terminal (discount 0).
  value: chex.Array  # [B], the state's value; 0 when terminal.
  prior_logits: chex.Array  # [B, W]; no NaN or infinity when terminal.
  # [B, K] int32, the action of each slot (compact edges), or None.
  children_actions: chex.Array | None
  dropped_actions: chex.Array  # [B] int32, valid actions that got no slot.


def stored_evaluation(
  graph: Graph, output: types.RecurrentFnOutput, options: GraphOptions
) -> Evaluation:
  """`output` as the graph stores it; with compact edges, its prior kept in slots
  (`compact.compact_row`)."""
  discount = jnp.asarray(output.discount, graph.edge_discounts.dtype)
  terminal = discount == 0
  # A terminal state's value never reaches its parents (discount 0); store 0, and
  # no NaN or infinite logit either (a terminal node is never expanded).
  value = jnp.where(terminal, 0.0, output.value).astype(graph.raw_values.dtype)
  prior_logits = jnp.asarray(output.prior_logits, graph.children_prior_logits.dtype)
  prior_logits = jnp.where(terminal[:, None] & ~jnp.isfinite(prior_logits), 0.0, prior_logits)
  children_actions = None
  dropped = jnp.zeros_like(graph.num_nodes)
  if options.max_children is not None:
    slots = compact.compact_row(prior_logits, None, options.max_children)
    prior_logits, children_actions = slots.logits, slots.actions
    # A terminal state is never expanded: nothing of its prior is lost.
    dropped = jnp.where(terminal, 0, slots.dropped)
  return Evaluation(
    reward=jnp.asarray(output.reward, graph.edge_rewards.dtype),
    discount=discount,
    terminal=terminal,
    value=value,
    prior_logits=prior_logits,
    children_actions=children_actions,
    dropped_actions=dropped,
  )


def fold_evaluation(
  graph: Graph,
  node: chex.Array,
  evaluated: chex.Array,
  terminal: chex.Array,
  value: chex.Array,
) -> tuple[Graph, chex.Array]:
  """Adds `value [B]`, a new evaluation of the state of the existing `node [B]`, to
  its own value where `evaluated` (and neither the node nor the evaluation is
  terminal, nor the node proven: those values are exact): `k(n) += 1` and `U(n)`
  moves to the mean of the `k(n)` evaluations. Returns `(graph, folded [B])`."""
  clamped_node = jnp.maximum(node, 0)
  folded = (
    evaluated
    & (node >= 0)
    & ~terminal
    & ~take(graph.node_terminal, clamped_node)
    & ~take(graph.node_proven, clamped_node)
  )
  count = take(graph.node_evaluations, clamped_node) + 1
  old_mean = take(graph.raw_values, clamped_node)
  # Running mean; every operand is finite (non-finite evaluations never get here).
  mean = old_mean + (value - old_mean) / count.astype(old_mean.dtype)
  target = drop_unless(folded, clamped_node, graph.capacity)
  return graph.replace(
    node_evaluations=set_at(graph.node_evaluations, target, count, mode="drop"),
    raw_values=set_at(graph.raw_values, target, mean, mode="drop"),
    folded_evaluations=graph.folded_evaluations + folded,
  ), folded
