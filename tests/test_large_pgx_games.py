"""pgx's shogi and go 19x19 through `make_game`: the games, their keys (read from
initial states, without compiling pgx's step) and a short search (chess too)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mcgs_jax import muzero_policy
from mcgs_jax.games import adapter, max_legal_actions, search_game

NUM_ACTIONS = {"shogi": 2187, "go_19x19": 362}


def _replace_x(state, **fields):
  return state.replace(_x=state._x._replace(**fields))


# Edits of a batch of initial states, each a different position.
EDITS = {
  "shogi": {
    "board": lambda s: _replace_x(s, board=s._x.board.at[:, 40].set(0)),  # a pawn in the centre
    "hand": lambda s: _replace_x(s, hand=s._x.hand.at[:, 0, 0].add(1)),
    # near pgx's step limit (512): the default key ("bounded") keeps step counts
    # only within its repetition bound of the limit
    "step count": lambda s: _replace_x(s, step_count=s._x.step_count + 510),
  },
  "go_19x19": {
    "board": lambda s: _replace_x(s, board=s._x.board.at[:, 180].set(181)),  # black tengen
    "step count": lambda s: _replace_x(s, step_count=s._x.step_count + 720),  # limit 722
    "passes": lambda s: _replace_x(s, consecutive_pass_count=s._x.consecutive_pass_count + 1),
  },
}


@pytest.mark.parametrize("spec", ["shogi", "go_19x19"])
def test_make_game_builds_the_game(spec):
  game = adapter.make_game(spec)
  assert game.num_actions == NUM_ACTIONS[spec]
  assert game.storage is not None
  assert spec in adapter.SUPPORTED_GAMES
  assert max_legal_actions(spec) == max_legal_actions(game) <= NUM_ACTIONS[spec]


@pytest.mark.parametrize("spec", ["shogi", "go_19x19"])
def test_key_is_deterministic_and_tells_positions_apart(spec):
  """Initial states of both seat draws share one key, computed the same twice and
  on stored states; each edit of the position changes it."""
  game = adapter.make_game(spec)
  state = jax.jit(game.init, static_argnums=1)(jax.random.PRNGKey(0), 8)  # eager: slow
  assert len(set(np.asarray(state.current_player).tolist())) == 2, "one seat draw only"
  hash_fn = jax.jit(game.hash_fn)
  keys = np.asarray(hash_fn(state))
  assert keys.shape == (8, 2) and keys.dtype == np.uint32
  np.testing.assert_array_equal(keys, np.broadcast_to(keys[0], keys.shape))
  np.testing.assert_array_equal(hash_fn(state), keys)
  np.testing.assert_array_equal(hash_fn(game.stored(state)), keys)
  edited_keys = {name: np.asarray(hash_fn(edit(state)))[0] for name, edit in EDITS[spec].items()}
  distinct = {bytes(key) for key in [keys[0], *edited_keys.values()]}
  assert len(distinct) == 1 + len(edited_keys), edited_keys


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["chess", "shogi", "go_19x19"])
def test_a_short_search_plays_a_legal_move(spec):
  """A search on stored (bit-packed) states: legal moves, weights on legal moves."""
  game = adapter.make_game(spec)
  state = jax.jit(game.init, static_argnums=1)(jax.random.PRNGKey(0), 2)
  search = jax.jit(lambda state: search_game(muzero_policy, game, state, 6, jax.random.PRNGKey(1)))
  output = search(state)
  action = np.asarray(output.action)
  assert np.asarray(state.legal_action_mask)[np.arange(2), action].all()
  weights = np.asarray(output.action_weights)
  np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-5)
  assert (weights[~np.asarray(state.legal_action_mask)] == 0).all()
  np.testing.assert_array_equal(output.search_graph.node_visits[:, 0], 7)  # S + 1
  assert output.search_graph.embeddings.legal_action_mask.dtype == jnp.uint8
