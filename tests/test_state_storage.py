"""Tests of `mcgs_jax.games.storage`: chess, shogi and go states stored in fewer bytes
(bit-packed legal-action masks, narrower boards) play the same game as pgx."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mcgs_jax.games import adapter, storage

STEPS = 16  # moves per game
STEP_LIMITS = {
  "chess": 512,
  "shogi": 512,
  "go_9x9": 162,
  "go_19x19": 722,
}  # pgx ends the game there


def _steps_left(state, spec: str, steps_left: int):
  """`state` (a batch from `init`) with its step counters `steps_left` steps short
  of pgx's step limit, so that pgx ends the games by that limit."""
  count = jnp.full_like(state._step_count, STEP_LIMITS[spec] - steps_left)
  return state.replace(_step_count=count, _x=state._x._replace(step_count=count))


def _play_both(game, state, lines, seed: int):
  """Plays the games of `state` `[B, ...]` for `STEPS` moves twice: pgx's own step on
  full states, and `game.recurrent_fn` on stored states. Move `t` of game `b` is
  `lines[b, t]`, or a random legal move where it is -1 (the same in both).

  Returns `[STEPS, B, ...]`: pgx's states, the adapter's stored states, its rewards,
  and its invalid actions.
  """

  def one_move(carry, inputs):
    (full, stored), (key, t) = carry, inputs
    logits = jnp.where(full.legal_action_mask, 0.0, -jnp.inf)
    random_actions = jax.random.categorical(key, logits).astype(jnp.int32)
    action = jnp.where(lines[:, t] >= 0, lines[:, t], random_actions)
    full = jax.vmap(game.env.step)(full, action)
    output, stored = game.recurrent_fn(None, key, action, stored)
    return (full, stored), (full, stored, output.reward, game.invalid_actions(stored))

  keys = jax.random.split(jax.random.PRNGKey(seed), STEPS)
  _, outputs = jax.lax.scan(one_move, (state, game.stored(state)), (keys, jnp.arange(STEPS)))
  return outputs


def _chess_labels(*moves):
  """pgx's labels of coordinate moves ("f2f3"), white first (pgx turns the board
  for black, so black's ranks are mirrored)."""
  from pgx._src.games.chess import Action  # noqa: PLC0415

  labels = []
  for ply, move in enumerate(moves):
    squares = []
    for file, rank in (move[:2], move[2:]):
      rank_index = int(rank) - 1
      squares.append("abcdefgh".index(file) * 8 + (7 - rank_index if ply % 2 else rank_index))
    labels.append(int(Action(from_=jnp.int32(squares[0]), to=jnp.int32(squares[1]))._to_label()))
  return labels


def _lines(spec, num_games):
  """`[num_games, STEPS]` scripted moves (-1: random): chess's second game is the
  fool's mate, which ends with no legal move (pgx's two masks differ there)."""
  lines = np.full((num_games, STEPS), -1, np.int32)
  if spec == "chess":
    mate = _chess_labels("f2f3", "e7e5", "g2g4", "d8h4")
    lines[1, : len(mate)] = mate
  return jnp.asarray(lines)


@pytest.mark.parametrize(
  "spec",
  [
    "chess",
    pytest.param("shogi", marks=pytest.mark.slow),
    pytest.param("go_9x9", marks=pytest.mark.slow),
    pytest.param("go_19x19", marks=pytest.mark.slow),
  ],
)
def test_stored_states_play_the_same_game_as_pgx(spec):
  """Random games (one from the start, one that pgx ends by its step limit, and the
  fool's mate in chess) played by pgx and by the adapter's `recurrent_fn` on stored
  states: the restored states equal pgx's leaf for leaf (the observation aside,
  which nodes do not store), and so do the rewards, the legal actions and the keys."""
  game = adapter.make_game(spec)
  init = jax.jit(game.init, static_argnums=1)(jax.random.PRNGKey(1), 3)  # eager: slow
  state = jax.tree.map(lambda a, b: a.at[2].set(b[2]), init, _steps_left(init, spec, 3))

  play = jax.jit(lambda state, lines: _play_both(game, state, lines, 7))
  full, stored, reward, invalid = play(state, _lines(spec, 3))

  restored = _leaves(game.restored(stored))
  for name, leaf in _leaves(full).items():
    if name != ".observation":
      np.testing.assert_array_equal(restored[name], leaf, err_msg=name)
  mover = jnp.concatenate([state.current_player[None], full.current_player[:-1]])
  pgx_reward = jnp.take_along_axis(full.rewards, mover[..., None], axis=-1)[..., 0]
  np.testing.assert_array_equal(reward, pgx_reward)
  finished = np.asarray(full.terminated | full.truncated)
  np.testing.assert_array_equal(invalid, ~np.asarray(full.legal_action_mask) | finished[..., None])
  keys = jax.vmap(game.hash_fn)
  np.testing.assert_array_equal(keys(stored), keys(full))
  ended = [1, 2] if spec == "chess" else [2]
  assert finished[-1, ended].all() and not finished[-1, 0]  # the games that end did end
  assert stored.legal_action_mask.dtype == jnp.uint8  # the masks were stored as bits
  if spec == "chess":  # mate: pgx's own mask is all False, the state's all True
    assert not full._x.legal_action_mask[-1, 1].any() and full.legal_action_mask[-1, 1].all()


def _leaves(tree):
  """`{path: leaf}` of a pytree, paths as `jax.tree_util.keystr` writes them."""
  return {
    jax.tree_util.keystr(path): leaf for path, leaf in jax.tree_util.tree_leaves_with_path(tree)
  }


@pytest.mark.parametrize("spec", ["chess", "shogi", "go_9x9", "go_19x19"])
@pytest.mark.quick_variants("chess", "go_9x9")
def test_stored_states_are_smaller(spec):
  """Bytes per stored state (printed: `pytest -s`): fewer than pgx's state without
  its observation, and the same as it with `compact_state=False`."""
  compact = storage.state_bytes(adapter.make_game(spec))
  plain = storage.state_bytes(adapter.make_game(spec, compact_state=False))
  print(spec, "bytes per state:", compact, "plain:", plain["stored"])
  assert plain["stored"] == compact["without_observation"] < compact["full"]
  assert compact["stored"] < compact["without_observation"] // 2


def test_store_and_restore_leave_the_other_form_alone():
  """`store` of a stored state and `restore` of a full one change nothing."""
  game = adapter.make_game("chess")
  state = game.init(jax.random.PRNGKey(0), 2)
  stored = game.stored(state)
  for name, leaf in _leaves(game.stored(stored)).items():
    np.testing.assert_array_equal(leaf, _leaves(stored)[name], err_msg=name)
    assert leaf.dtype == _leaves(stored)[name].dtype
  for name, leaf in _leaves(game.storage.restore(state)).items():
    assert leaf.dtype == _leaves(state)[name].dtype, name
    np.testing.assert_array_equal(leaf, _leaves(state)[name], err_msg=name)


def test_storage_of_a_game_without_a_table_is_none():
  assert adapter.make_game("connect_four").storage is None
  assert adapter.make_game("chess", compact_state=False).storage is None


def test_a_table_that_names_no_leaf_is_refused(monkeypatch):
  monkeypatch.setitem(storage.STORED_AS, "chess", {"._x.no_such_leaf": "int8"})
  with pytest.raises(ValueError, match="no leaf '._x.no_such_leaf'"):
    adapter.make_game("chess")
  monkeypatch.setitem(storage.STORED_AS, "chess", {"._x.board": storage.BITS})
  with pytest.raises(ValueError, match="no bool leaf '._x.board'"):
    adapter.make_game("chess")
