"""The search's key splits and tie-breaks give `jax.random`'s bits exactly.

`mcgs_jax._src.random_bits` writes the Threefry-2x32 hash out in full (XLA's CPU
lowering of `jax.random` runs it as a rolled loop of many small operations); every
value must still be the one `jax.random` returns, for raw and typed keys, batched,
under `jit` and `vmap`, and anything it does not reproduce must go to `jax.random`.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcgs_jax._src import random_bits


def _bits(values):
  values = jnp.asarray(values)
  if jnp.issubdtype(values.dtype, jax.dtypes.prng_key):
    return np.asarray(jax.random.key_data(values))
  if jnp.issubdtype(values.dtype, jnp.floating):
    return np.asarray(jax.lax.bitcast_convert_type(values, jnp.uint32))
  return np.asarray(values)


def _key(seed: int, typed: bool):
  return jax.random.key(seed) if typed else jax.random.PRNGKey(seed)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), num=st.integers(1, 300), typed=st.booleans())
def test_split_matches_jax(seed, num, typed):
  key = _key(seed, typed)
  np.testing.assert_array_equal(
    _bits(random_bits.split(key, num)), _bits(jax.random.split(key, num))
  )


@settings(max_examples=30, deadline=None)
@given(
  seed=st.integers(0, 2**32 - 1),
  shape=st.sampled_from([(), (1,), (7,), (82,), (362,), (3, 5)]),
  typed=st.booleans(),
)
@pytest.mark.slow
def test_uniform_matches_jax(seed, shape, typed):
  key = jax.random.split(_key(seed, typed))[1]  # a derived key, not only a seed's
  ours, theirs = random_bits.uniform(key, shape), jax.random.uniform(key, shape)
  assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
  np.testing.assert_array_equal(_bits(ours), _bits(theirs))


@pytest.mark.parametrize("typed", [False, True])
def test_batched_jitted_and_vmapped(typed):
  keys = jax.random.split(_key(3, typed), 33)
  split_each = jax.jit(random_bits.split_each, static_argnums=1)
  np.testing.assert_array_equal(_bits(split_each(keys, 2)), _bits(jax.vmap(jax.random.split)(keys)))
  ours = jax.jit(jax.vmap(lambda key: random_bits.uniform(key, (9,))))(keys)
  theirs = jax.vmap(lambda key: jax.random.uniform(key, (9,)))(keys)
  np.testing.assert_array_equal(_bits(ours), _bits(theirs))
  assert jnp.issubdtype(split_each(keys, 2).dtype, jax.dtypes.prng_key) == typed


def test_other_keys_go_to_jax_random():
  rbg = jax.random.key(5, impl="rbg")
  np.testing.assert_array_equal(_bits(random_bits.split(rbg, 3)), _bits(jax.random.split(rbg, 3)))
  np.testing.assert_array_equal(
    _bits(random_bits.uniform(rbg, (4,))), _bits(jax.random.uniform(rbg, (4,)))
  )
  # A batch of raw keys is not one key: jax.random's own error, not other bits.
  with pytest.raises(ValueError, match="single key"):
    random_bits.split(jax.random.split(jax.random.PRNGKey(0), 4), 2)


def test_non_partitionable_threefry_goes_to_jax_random():
  key = jax.random.PRNGKey(11)
  with jax.threefry_partitionable(False):
    np.testing.assert_array_equal(_bits(random_bits.split(key, 5)), _bits(jax.random.split(key, 5)))
    np.testing.assert_array_equal(
      _bits(random_bits.uniform(key, (6,))), _bits(jax.random.uniform(key, (6,)))
    )
