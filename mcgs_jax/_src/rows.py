"""Reductions over a node's actions in one order at every batch size.

The search reduces short rows (a node's `A` actions) at every
depth of every playout: the prior's softmax in PUCT, the qtransform's min and max, the
sum `sum_a N(n, a) Q(n, a)` of the idempotent update. Vmapped over a batch they are
one reduction of `[B, A]`, which XLA's CPU backend hands, from some size on, to a
library kernel that splits it across threads and adds in another order, so the same
game's numbers would depend on how many games share its batch. A row of at most
`SHORT_ROW` actions is reduced here by a chain of elementwise operations, first action
to last: the order XLA itself uses for such rows in small batches, so the results are
those of `jnp.sum`, `jnp.max`, `jnp.min` and `jax.nn.softmax` at the batch sizes
where they do not split (tests/test_rows.py), at every batch size. Longer rows go to
`jnp` itself.

`small_enough_to_sum` bounds the values those sums may add.
"""

from collections.abc import Callable

import chex
import jax
import jax.numpy as jnp

# The unsigned integer of each float's width, to read its bits.
_UINT = {
  jnp.dtype(jnp.float16): jnp.uint16,
  jnp.dtype(jnp.bfloat16): jnp.uint16,
  jnp.dtype(jnp.float32): jnp.uint32,
  jnp.dtype(jnp.float64): jnp.uint64,
}

# Longest row reduced here; XLA reduces longer rows in vector lanes, in another order.
SHORT_ROW = 32


def _chain(
  values: chex.Array, combine: Callable[[chex.Array, chex.Array], chex.Array], init: float
) -> chex.Array:
  """`combine` folded over the last axis of `values`, from `init`, first to last."""
  # lax.index_in_dim, not `values[..., action]`: the same slice, traced without
  # jnp's indexing machinery (rows are reduced at every depth of every playout).
  total = jnp.asarray(init, values.dtype)
  for action in range(values.shape[-1]):
    total = combine(total, jax.lax.index_in_dim(values, action, axis=-1, keepdims=False))
  return total


def row_sum(values: chex.Array) -> chex.Array:
  """`jnp.sum(values, axis=-1)`, in one order at every batch size."""
  if values.shape[-1] > SHORT_ROW or values.shape[-1] == 0:
    return jnp.sum(values, axis=-1)
  if values.shape[-1] == 1:
    # XLA sums a single element to the element itself, -0.0 included.
    return values[..., 0]
  total = _chain(values, jnp.add, 0)
  # XLA drops the `0 +` that starts the chain, so a row of -0.0 would sum to -0.0;
  # `jnp.sum` starts from +0.0, and a zero sum is +0.0 (round to nearest). Told apart
  # by its bits: a float comparison would take a subnormal for 0 where XLA treats
  # denormals as zero.
  negative_zero = jax.lax.bitcast_convert_type(-jnp.zeros((), total.dtype), _UINT[total.dtype])
  is_negative_zero = jax.lax.bitcast_convert_type(total, _UINT[total.dtype]) == negative_zero
  return jnp.where(is_negative_zero, jnp.zeros_like(total), total)


def row_max(values: chex.Array) -> chex.Array:
  """`jnp.max(values, axis=-1)` of a non-empty row."""
  if values.shape[-1] > SHORT_ROW:
    return jnp.max(values, axis=-1)
  return _chain(values, jnp.maximum, -jnp.inf)


def row_min(values: chex.Array) -> chex.Array:
  """`jnp.min(values, axis=-1)` of a non-empty row."""
  if values.shape[-1] > SHORT_ROW:
    return jnp.min(values, axis=-1)
  return _chain(values, jnp.minimum, jnp.inf)


def softmax(logits: chex.Array) -> chex.Array:
  """`jax.nn.softmax(logits, axis=-1)`, in one order at every batch size."""
  if logits.shape[-1] > SHORT_ROW:
    return jax.nn.softmax(logits, axis=-1)
  unnormalized = jnp.exp(logits - row_max(logits)[..., None])
  return unnormalized / row_sum(unnormalized)[..., None]


def positive_probability(logits: chex.Array) -> chex.Array:
  """`[..., A]` bool: the actions of `logits [..., A]` whose `softmax` probability is
  positive, the rule by which an edge counts as legal (an invalid action's logit,
  or an empty slot's, has none)."""
  return softmax(logits) > 0


def small_enough_to_sum(x: chex.Array) -> chex.Array:
  """`x` is finite and small enough that the search's sums of visit-weighted values
  cannot overflow: `|x| <= sqrt(largest float)` of its dtype (1.8e19 in float32).
  Larger values (a reward of 3e38 is finite, but twice it is not) count as
  non-finite."""
  x = jnp.asarray(x)
  dtype = x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else jnp.float32
  # `<=` is False for NaN too.
  return jnp.abs(x) <= jnp.sqrt(jnp.finfo(dtype).max).astype(dtype)
