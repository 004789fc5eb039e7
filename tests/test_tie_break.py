"""PUCT's tie-break drawn only where it can change the choice (`tie_broken_argmax`)
chooses exactly what drawing it always chooses: mctx's rule, `argmax(scores + 1e-7 *
uniform(key, [A]))` over the valid actions.

Scores are drawn to make the tie-break matter: exact ties, neighbours one float apart,
NaN, infinities, rows with no valid action; batched (the search's case) and one game
at a time, raw and typed keys.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcgs_jax._src import random_bits
from mcgs_jax._src.tie_break import (
  TIE_BREAK_SCALE,
  decided_without_tie_break,
  masked_argmax,
  tie_broken_argmax,
)

NUM_ACTIONS = 5


def always_drawn(key, scores, invalid_actions, drawn):
  """The rule as mctx writes it (and as this library did before): the tie-break
  drawn in every game; the plain argmax where the game does not draw."""
  tie_break = TIE_BREAK_SCALE * random_bits.uniform(key, scores.shape)
  return jnp.where(
    drawn,
    masked_argmax(scores + tie_break, invalid_actions),
    masked_argmax(scores, invalid_actions),
  )


def _near(base: float, steps: int) -> np.float32:
  """`base` moved by `steps` floats."""
  value = np.float32(base)
  direction = np.float32(np.inf if steps > 0 else -np.inf)
  for _ in range(abs(steps)):
    value = np.nextafter(value, direction)
  return value


@st.composite
def games(draw, batch_size):
  """`(scores [B, A], invalid [B, A], drawn [B])` whose best scores often tie."""
  scores = np.zeros((batch_size, NUM_ACTIONS), np.float32)
  for game in range(batch_size):
    base = draw(st.sampled_from([0.0, 1.0, -0.5, 1e-3, 37.5, 1e6]))
    for action in range(NUM_ACTIONS):
      scores[game, action] = draw(
        st.one_of(
          st.builds(lambda steps, base=base: _near(base, steps), st.integers(-3, 3)),
          st.floats(-2.0, 2.0, width=32),
          st.sampled_from([np.nan, np.inf, -np.inf, base + 1e-7, base - 1e-7]),
        )
      )
  size = batch_size * NUM_ACTIONS
  invalid = np.array(draw(st.lists(st.booleans(), min_size=size, max_size=size)))
  invalid = invalid.reshape(batch_size, NUM_ACTIONS)
  drawn = np.array(draw(st.lists(st.booleans(), min_size=batch_size, max_size=batch_size)))
  return scores, invalid, drawn


@settings(max_examples=150, deadline=None)
@given(game_batch=games(8), seed=st.integers(0, 2**31 - 1), typed=st.booleans())
@pytest.mark.slow
def test_batched_choice_is_the_drawn_choice(game_batch, seed, typed):
  scores, invalid, drawn = game_batch
  base_key = jax.random.key(seed) if typed else jax.random.PRNGKey(seed)
  keys = jax.random.split(base_key, len(scores))
  ours = jax.jit(jax.vmap(tie_broken_argmax))(keys, scores, invalid, drawn)
  expected = jax.jit(jax.vmap(always_drawn))(keys, scores, invalid, drawn)
  np.testing.assert_array_equal(ours, expected)


@settings(max_examples=40, deadline=None)
@given(game_batch=games(1), seed=st.integers(0, 2**31 - 1))
def test_one_game_is_the_drawn_choice(game_batch, seed):
  scores, invalid, drawn = game_batch
  key = jax.random.PRNGKey(seed)
  assert int(tie_broken_argmax(key, scores[0], invalid[0], drawn[0])) == int(
    always_drawn(key, scores[0], invalid[0], drawn[0])
  )


def test_ties_are_broken_by_the_key():
  """Two actions one float apart at the top, the lower one first (a tie after
  rounding goes to it): some keys choose one, some the other (so the batch did
  draw), every key as drawing always does."""
  scores = np.array([[float(_near(1.0, -1)), 1.0, -1.0, 0.5, 0.25]], np.float32)
  scores = np.repeat(scores, 64, axis=0)
  keys = jax.random.split(jax.random.PRNGKey(7), 64)
  invalid = np.zeros_like(scores, bool)
  drawn = np.ones(64, bool)
  ours = np.asarray(jax.jit(jax.vmap(tie_broken_argmax))(keys, scores, invalid, drawn))
  np.testing.assert_array_equal(ours, jax.vmap(always_drawn)(keys, scores, invalid, drawn))
  assert set(ours.tolist()) == {0, 1}


def test_decided_only_when_no_tie_break_can_change_the_choice():
  best, below = np.float32(2.0), _near(2.0, -1)
  far = np.float32(1.5)
  rows = np.array([[best, far, far], [best, below, far], [-np.inf, -np.inf, -np.inf]], np.float32)
  invalid = np.zeros_like(rows, bool)
  decided = decided_without_tie_break(rows, invalid, np.ones(3, bool))
  np.testing.assert_array_equal(decided, [True, False, False])
  # The one valid action among invalid ones is decided; a game that does not draw is.
  np.testing.assert_array_equal(
    decided_without_tie_break(rows[1:2], np.array([[False, True, True]]), np.ones(1, bool)),
    [True],
  )
  np.testing.assert_array_equal(
    decided_without_tie_break(rows[1:2], invalid[1:2], np.zeros(1, bool)), [True]
  )


@pytest.mark.parametrize("typed", [False, True])
def test_unbatched_key_and_scores_under_vmap(typed):
  """vmapped over the scores only (the same key for every game)."""
  key = jax.random.key(3) if typed else jax.random.PRNGKey(3)
  scores = np.array([[0.0, 0.0, 1.0, 1.0, -1.0], [2.0, 1.0, 0.0, 0.0, 0.0]], np.float32)
  invalid = np.zeros_like(scores, bool)
  ours = jax.vmap(tie_broken_argmax, in_axes=(None, 0, 0, None))(key, scores, invalid, True)
  expected = jax.vmap(always_drawn, in_axes=(None, 0, 0, None))(key, scores, invalid, True)
  np.testing.assert_array_equal(ours, expected)
