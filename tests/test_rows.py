"""Reductions over a node's actions (`mcgs_jax._src.rows`) give XLA's own small-batch
results, and the same numbers for a row whatever batch it is reduced in.

The search reduces `[B, A]` rows at every depth; XLA's CPU backend reduces a large
batch in another order than a small one, so `jnp.sum` of a row could change with the
number of games around it. `rows` reduces a short row first action to last: exactly
`jnp`'s result for one row, and in any batch.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcgs_jax._src import rows

FUNCTIONS = {
  "row_sum": (rows.row_sum, lambda x: jnp.sum(x, axis=-1)),
  "row_max": (rows.row_max, lambda x: jnp.max(x, axis=-1)),
  "row_min": (rows.row_min, lambda x: jnp.min(x, axis=-1)),
  "softmax": (rows.softmax, lambda x: jax.nn.softmax(x, axis=-1)),
}

# Values that make the order matter: cancellation across magnitudes, signed zeros,
# infinities, NaN, subnormals.
_SPECIAL = [0.0, -0.0, 1.0, -1.0, 1e-38, -1e-45, 3e38, -3e38, np.inf, -np.inf, np.nan, 1e8, 1e-8]
_FLOATS = st.one_of(
  st.sampled_from(_SPECIAL),
  st.floats(-1e6, 1e6, width=32),
  st.floats(width=32, allow_nan=False, allow_infinity=False),
)


def _bits(values) -> np.ndarray:
  """Float bits, with every NaN the same (their payloads are not compared)."""
  values = np.asarray(values, np.float32)
  return np.where(np.isnan(values), np.uint32(0x7FC00000), values.view(np.uint32))


@settings(max_examples=60, deadline=None)
@given(data=st.data(), num_actions=st.sampled_from([1, 2, 3, 7, 9, 16, 32]))
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_short_rows_match_jnp_on_one_row(name, data, num_actions):
  ours, reference = FUNCTIONS[name]
  row = np.array(
    data.draw(st.lists(_FLOATS, min_size=num_actions, max_size=num_actions)), np.float32
  )
  np.testing.assert_array_equal(
    _bits(jax.jit(ours)(row[None])), _bits(jax.jit(reference)(row[None]))
  )


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("num_actions", [1, 2, 3, 7])
@pytest.mark.parametrize("zero", [0.0, -0.0])
def test_rows_of_signed_zeros_match_jnp(name, num_actions, zero):
  """A row of zeros of one sign: `jnp.sum` keeps -0.0 for one action and gives +0.0
  for more, and `rows` must do the same."""
  ours, reference = FUNCTIONS[name]
  row = np.full((1, num_actions), zero, np.float32)
  np.testing.assert_array_equal(_bits(jax.jit(ours)(row)), _bits(jax.jit(reference)(row)))


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("num_actions", [7, 16])
def test_a_row_gives_the_same_numbers_in_any_batch(name, num_actions):
  """1,024 rows reduced at once (the size where XLA's own reductions change order)
  give, row by row, what each row gives alone."""
  ours, _ = FUNCTIONS[name]
  scale = jnp.exp(4.0 * jax.random.normal(jax.random.PRNGKey(1), (1024, num_actions)))
  batch = jax.random.normal(jax.random.PRNGKey(0), (1024, num_actions)) * scale
  whole = jax.jit(ours)(batch)
  reduce_alone = jax.jit(ours)
  alone = np.stack([np.asarray(reduce_alone(batch[i : i + 1]))[0] for i in range(0, 1024, 97)])
  np.testing.assert_array_equal(_bits(whole[::97]), _bits(alone))


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_long_rows_are_reduced_by_jnp(name):
  ours, reference = FUNCTIONS[name]
  batch = jax.random.normal(jax.random.PRNGKey(2), (64, rows.SHORT_ROW + 1))
  np.testing.assert_array_equal(_bits(jax.jit(ours)(batch)), _bits(jax.jit(reference)(batch)))
