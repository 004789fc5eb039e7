"""Threefry-2x32 key splits and uniforms, written out so that XLA fuses them.

On the CPU, JAX lowers the Threefry-2x32 hash behind every
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

from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

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
