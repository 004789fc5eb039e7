"""The search's bit-exact numerics: reductions over a node's actions, the random
tie-break of PUCT, and the Threefry key splits and uniforms behind both.

Reductions over a row. The search reduces short rows (a node's `A` actions) at every
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

The tie-break. mctx's PUCT adds `1e-7 * uniform(key, [A])` to every score before the
argmax, so that equal scores are broken at random; this library does the same, so
that tree mode chooses as mctx does, bit for bit. Those floats can change the choice
only where another valid action comes within the largest tie-break of the best
score. With `s` the scores, `j` the first valid action with the largest of them,
`c = fl(1e-7)` and the tie-break `n_i = fl(c * u_i)`, `u_i` in [0, 1), so
`0 <= n_i <= c`: rounding is monotone, so `fl(s_j + n_j) >= s_j` and
`fl(s_i + n_i) <= fl(s_i + c)`. When `fl(s_i + c) < s_j` for every other valid `i`
and `s_j > -inf` (so that `j` also beats the excluded actions' `-inf`), `j` wins
whatever the tie-break is. A NaN score is never decided this way.
`tie_broken_argmax` is written for one game; vmapped over a batch it draws the floats
of the whole batch only when some game needs them (one `lax.cond` on the batch) and
otherwise returns the plain argmax: the same action in every game, without the hash.
A game can say that its choice is not used (`drawn=False`, e.g. at a terminal node,
where no playout continues, though the batched selection still runs the rule there):
it then takes the plain argmax and never makes the batch draw.

Random bits. On the CPU, JAX lowers the Threefry-2x32 hash behind every
`jax.random.split` and `jax.random.uniform` as a rolled loop of small operations
that XLA runs one by one, and the search calls two of them at every depth of every
playout (the per-game key split and the tie-break). `split`, `split_each`, `uniform`
and `uniform_at` compute the same hash (Salmon et al., "Parallel random numbers: as
easy as 1, 2, 3", 2011) with its 20 rounds written out, which XLA fuses, and derive
keys and floats from it exactly as `jax.random` does for its default configuration,
so every result is the same bit for bit (tests/test_random_bits.py). Where that
configuration does not hold (another PRNG implementation, the non-partitionable
Threefry mode, 64-bit floats, or raw keys while JAX warns about them), they call
`jax.random` itself.
"""

from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

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


_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = np.uint32(0x1BD11BDA)  # the key schedule's constant (Threefry's C240)
_ONE_BITS = np.uint32(0x3F800000)  # float32 1.0
_MANTISSA_SHIFT = np.uint32(32 - 23)


def _rotate_left(value: chex.Array, distance: int) -> chex.Array:
  return jax.lax.bitwise_or(
    jax.lax.shift_left(value, np.uint32(distance)),
    jax.lax.shift_right_logical(value, np.uint32(32 - distance)),
  )


def threefry2x32(
  key1: chex.Array, key2: chex.Array, count1: chex.Array, count2: chex.Array
) -> tuple[chex.Array, chex.Array]:
  """The Threefry-2x32 hash (20 rounds) of the counter pairs `(count1, count2)`
  under the key `(key1, key2)`; all uint32, broadcast together. Returns the pair of
  hashed words.

  Written with `jax.lax`'s integer operations on arrays broadcast once, not `jnp`'s
  operators, each of which is traced through a `jit` of its own: the same hash, with
  less to trace (the search hashes at every depth of every playout, and tracing is
  part of every compile)."""
  key1, key2, count1, count2 = jnp.broadcast_arrays(key1, key2, count1, count2)
  add, xor = jax.lax.add, jax.lax.bitwise_xor
  schedule = (key1, key2, xor(xor(key1, key2), _PARITY))
  words = [add(count1, schedule[0]), add(count2, schedule[1])]
  for block in range(5):
    for distance in _ROTATIONS[block % 2]:
      words[0] = add(words[0], words[1])
      words[1] = xor(words[0], _rotate_left(words[1], distance))
    words[0] = add(words[0], schedule[(block + 1) % 3])
    words[1] = add(add(words[1], schedule[(block + 2) % 3]), np.uint32(block + 1))
  return words[0], words[1]


def _flag(name: str) -> Any:
  """The value of a JAX configuration flag (read as an attribute, as JAX asks)."""
  return getattr(jax.config, name)


def _fast_path(key: chex.Array, batch_dims: int) -> bool:
  """Whether `key` (`batch_dims` 0: one key; 1: a `[B]` batch; raw or typed) is a
  Threefry-2x32 key whose `jax.random` bits the functions here reproduce (checked at
  trace time). Anything else, a malformed key included, goes to `jax.random`, which
  raises its own errors."""
  if not _flag("jax_threefry_partitionable"):
    return False
  if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
    return key.ndim == batch_dims and str(jax.random.key_impl(key)) == "threefry2x32"
  return (
    _flag("jax_default_prng_impl") == "threefry2x32"
    and _flag("jax_legacy_prng_key") == "allow"
    and not _flag("jax_enable_custom_prng")
    and key.dtype == jnp.uint32
    and key.ndim == batch_dims + 1
    and key.shape[-1] == 2
  )


def _key_words(key: chex.Array) -> tuple[chex.Array, bool]:
  """`(words [..., 2] uint32, typed)`: the raw data of `key`."""
  if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
    return jax.random.key_data(key), True
  return key, False


def _split_words(words: chex.Array, typed: bool, num: int) -> chex.Array:
  """`num` keys from each key of `words [..., 2]`, as `jax.random.split` derives them
  in the partitionable Threefry mode (the hash of the counters `(0, i)`): `[..., num]`
  keys, typed when `typed`."""
  counts = jnp.arange(num, dtype=jnp.uint32)
  high, low = threefry2x32(words[..., None, 0], words[..., None, 1], jnp.zeros_like(counts), counts)
  new = jnp.stack([high, low], axis=-1)
  return jax.random.wrap_key_data(new, impl="threefry2x32") if typed else new


def split(key: chex.PRNGKey, num: int = 2) -> chex.Array:
  """`jax.random.split(key, num)` for one key (raw `[2]` uint32 or typed `[]`), bit
  for bit; vmappable. Returns `[num]` keys of `key`'s kind."""
  key = jnp.asarray(key)
  if not _fast_path(key, 0):
    return jax.random.split(key, num)
  words, typed = _key_words(key)
  return _split_words(words, typed, num)


def split_each(keys: chex.Array, num: int = 2) -> chex.Array:
  """`jax.vmap(lambda key: jax.random.split(key, num))(keys)`: `[B]` keys (raw
  `[B, 2]` or typed `[B]`) -> `[B, num]` keys, bit for bit."""
  keys = jnp.asarray(keys)
  if not _fast_path(keys, 1):
    return jax.vmap(lambda key: jax.random.split(key, num))(keys)
  words, typed = _key_words(keys)
  return _split_words(words, typed, num)


def uniform(key: chex.PRNGKey, shape: tuple[int, ...]) -> chex.Array:
  """`jax.random.uniform(key, shape)` (float32 in [0, 1)) for one key, bit for bit;
  vmappable."""
  key = jnp.asarray(key)
  if _flag("jax_enable_x64") or not _fast_path(key, 0):
    return jax.random.uniform(key, shape)
  size = int(np.prod(shape, dtype=np.int64))
  return uniform_at(key, jnp.arange(size, dtype=jnp.uint32).reshape(shape))


def uniform_at(key: chex.PRNGKey, counters: chex.Array) -> chex.Array:
  """`jax.random.uniform(key, [M])[counters]` for one key and integer `counters >= 0`
  (any shape, all below `M`), without drawing the other floats: the floats a dense
  row of `M` actions draws at the actions a row of slots holds. Outside the fast
  path's configuration, where `jax.random`'s bits for index `i` are not a function of
  `i` alone, the floats come from `jax.random.fold_in(key, i)` instead: uniform and
  independent per counter, not the dense row's. Vmappable."""
  key = jnp.asarray(key)
  counts = jnp.asarray(counters).astype(jnp.uint32)
  if _flag("jax_enable_x64") or not _fast_path(key, 0):
    flat = jax.vmap(lambda count: jax.random.uniform(jax.random.fold_in(key, count)))(
      counts.reshape(-1)
    )
    return flat.reshape(counts.shape)
  words, _ = _key_words(key)
  high, low = threefry2x32(words[0], words[1], jnp.zeros_like(counts), counts)
  mantissa = ((high ^ low) >> _MANTISSA_SHIFT) | _ONE_BITS
  # jax.random then takes max(0, floats * (1 - 0) + 0): the same floats, all >= 0.
  return jax.lax.bitcast_convert_type(mantissa, jnp.float32) - jnp.float32(1.0)


# Scale of the random tie-break added to every score (as mctx, so that equal scores
# are broken the same way for the same key).
TIE_BREAK_SCALE = 1e-7


def masked_argmax(scores: chex.Array, invalid_actions: chex.Array | None) -> chex.Array:
  """The valid action with the highest score (action 0 when none is valid)."""
  if invalid_actions is not None:
    # -inf only reaches argmax, never a softmax, so it cannot produce NaN.
    scores = jnp.where(invalid_actions, -jnp.inf, scores)
  return jnp.argmax(scores, axis=-1).astype(jnp.int32)


def _drawn_argmax(
  rng_key: chex.PRNGKey,
  scores: chex.Array,
  invalid_actions: chex.Array,
  drawn: chex.Array,
  actions: chex.Array | None,
) -> chex.Array:
  """One game's choice with the tie-break drawn (or the plain argmax where not
  `drawn`); `actions`: see `tie_broken_argmax`."""
  if actions is None:
    floats = uniform(rng_key, scores.shape)
  else:
    floats = uniform_at(rng_key, jnp.maximum(actions, 0))
  tie_break = TIE_BREAK_SCALE * floats
  return jnp.where(
    drawn,
    masked_argmax(scores + tie_break, invalid_actions),
    masked_argmax(scores, invalid_actions),
  )


def decided_without_tie_break(
  scores: chex.Array, invalid_actions: chex.Array, drawn: chex.Array
) -> chex.Array:
  """`[...]` bool for `scores [..., A]`: no tie-break can change the choice (module
  doc), or none is drawn."""
  best = row_max(jnp.where(invalid_actions, -jnp.inf, scores))
  # fl(s_i + c) >= s_j: action i may reach the best score (j itself always does; NaN
  # compares False, so a row with a NaN best has no contender).
  reach = scores + jnp.float32(TIE_BREAK_SCALE) >= best[..., None]
  contenders = jnp.sum(reach & ~invalid_actions, axis=-1)
  return ((contenders == 1) & (best > -jnp.inf)) | ~drawn


@jax.custom_batching.custom_vmap
def tie_broken_argmax(
  rng_key: chex.PRNGKey,
  scores: chex.Array,
  invalid_actions: chex.Array,
  drawn: chex.Array,
  actions: chex.Array | None = None,
) -> chex.Array:
  """`masked_argmax(scores + TIE_BREAK_SCALE * uniform(rng_key, [A]), invalid_actions)`
  for one game, bit for bit, drawing the floats only where they can change it.

  Args:
    rng_key: the game's key (raw or typed).
    scores: `[A]` float32.
    invalid_actions: `[A]` bool, actions never chosen.
    drawn: scalar bool; False where the choice is not used: the plain argmax, no
      tie-break.
    actions: `[A]` int32, the action of each entry (compact edges: a node's
      slots), whose floats the tie-break draws, so that a slot gets its action's
      float of a dense row; None: entry `i` is action `i`.

  Returns:
    Scalar int32, the valid action with the highest score (action 0 when none is).
  """
  return _drawn_argmax(rng_key, scores, invalid_actions, drawn, actions)


@tie_broken_argmax.def_vmap
def _tie_broken_argmax_batch(
  axis_size: int,
  in_batched: list[bool],
  rng_key: chex.PRNGKey,
  scores: chex.Array,
  invalid_actions: chex.Array,
  drawn: chex.Array,
  actions: chex.Array | None = None,
) -> tuple[chex.Array, bool]:
  """`tie_broken_argmax` of `axis_size` games: the plain argmax when no game needs
  the tie-break, else the tie-break drawn in every game that draws."""
  arguments = (rng_key, scores, invalid_actions, drawn, actions)
  rng_key, scores, invalid_actions, drawn, actions = (
    value if batched or value is None else jnp.broadcast_to(value, (axis_size, *jnp.shape(value)))
    for value, batched in zip(arguments, in_batched, strict=True)
  )
  choice = jax.lax.cond(
    jnp.all(decided_without_tie_break(scores, invalid_actions, drawn)),
    lambda: masked_argmax(scores, invalid_actions),
    lambda: jax.vmap(_drawn_argmax)(rng_key, scores, invalid_actions, drawn, actions),
  )
  return choice, True


def small_enough_to_sum(x: chex.Array) -> chex.Array:
  """`x` is finite and small enough that the search's sums of visit-weighted values
  cannot overflow: `|x| <= sqrt(largest float)` of its dtype (1.8e19 in float32).
  Larger values (a reward of 3e38 is finite, but twice it is not) count as
  non-finite."""
  x = jnp.asarray(x)
  dtype = x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else jnp.float32
  # `<=` is False for NaN too.
  return jnp.abs(x) <= jnp.sqrt(jnp.finfo(dtype).max).astype(dtype)
