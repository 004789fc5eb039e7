"""Tests of `mcgs_jax.games.keys`: transposition keys of pgx games, exact history
(`history="exact"`; tests/test_bounded_keys.py tests the bounded and position keys).

Every game is played by one jitted function (`_Game.play`), a scan of the batched
pgx step over `[ROWS, steps]` actions, so each game compiles once or twice.
"""

import dataclasses
import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pytest

from mcgs_jax.games import keys as game_keys

ROWS = 16  # games played side by side
RANDOM = -1  # in an action table: a uniformly random legal action
STOP = -2  # in an action table: leave the state as it is


def _move_labels(to_label, moves: Sequence[str], ranks: int):
  """Labels of coordinate moves ("g1f3"), white first. pgx turns the board so that
  the mover is at the bottom, so a black move's ranks are mirrored."""
  labels = []
  for ply, move in enumerate(moves):
    squares = []
    for file, rank in (move[:2], move[2:]):
      rank_index = int(rank) - 1
      if ply % 2:
        rank_index = ranks - 1 - rank_index
      squares.append(("abcdefgh".index(file)) * ranks + rank_index)
    labels.append(int(to_label(jnp.int32(squares[0]), jnp.int32(squares[1]))))
  return labels


class _Labels(Sequence[int]):
  """The labels of coordinate moves, computed when first read: importing pgx's chess
  modules takes seconds, which collecting this file (on every pytest worker) would
  otherwise pay."""

  def __init__(self, variant: str, moves: Sequence[str]):
    self.variant, self.moves = variant, moves

  @functools.cached_property
  def labels(self) -> list[int]:
    if self.variant == "chess":
      from pgx._src.games.chess import Action  # noqa: PLC0415
    else:
      from pgx.gardner_chess import Action  # noqa: PLC0415
    ranks = 8 if self.variant == "chess" else 5
    return _move_labels(lambda f, t: Action(from_=f, to=t)._to_label(), self.moves, ranks)

  def __len__(self) -> int:
    return len(self.moves)

  def __getitem__(self, index):
    return self.labels[index]


def chess(*moves):
  return _Labels("chess", moves)


def gardner(*moves):
  return _Labels("gardner_chess", moves)


def _replace_x(state, **fields):
  return state.replace(_x=state._x._replace(**fields))


@dataclasses.dataclass(frozen=True)
class Spec:
  """What the tests know about one game.

  position: a batched state's position as arrays `[B, ...]`: what two states must
    share for their keys to be equal. When `position_is_everything`, it is all that
    decides the future, so equal positions must also give equal keys.
  line: a legal action sequence.
  meet: pairs of move orders that reach the same state and must share a key.
  apart: pairs of move orders whose states must get different keys.
  changes: single-field edits of a state (after `line`) that must change its key.
  """

  env_id: str
  steps: int
  position: Callable
  position_is_everything: bool
  line: Sequence[int]
  meet: Sequence[tuple[Sequence[int], Sequence[int]]] = ()
  apart: Sequence[tuple[Sequence[int], Sequence[int]]] = ()
  changes: Sequence[tuple[str, Callable]] = ()


SPECS = {
  spec.env_id: spec
  for spec in [
    Spec(
      "tic_tac_toe",
      9,
      position=lambda s: (s._x.board, s._x.color, s.terminated),
      position_is_everything=True,
      line=[0, 4, 8],
      meet=[([0, 4, 8], [8, 4, 0])],
      changes=[("colour", lambda s: _replace_x(s, color=1 - s._x.color))],
    ),
    Spec(
      "connect_four",
      24,
      position=lambda s: (s._x.board, s._x.color, s.terminated),
      position_is_everything=True,
      line=[0, 1, 2],
      meet=[([0, 1, 2], [2, 1, 0])],
      # not a transposition: the second colour's disc is in column 3 or column 2
      apart=[([3, 3, 2], [2, 3, 3])],
      changes=[("colour", lambda s: _replace_x(s, color=1 - s._x.color))],
    ),
    Spec(
      "othello",
      30,
      position=lambda s: (s._x.board, s._x.turn, s._x.passed, s.terminated),
      position_is_everything=True,
      line=[19, 18, 26],
      meet=[([19, 18, 26], [26, 18, 19]), ([37, 45, 44], [44, 45, 37])],
      changes=[
        ("colour", lambda s: _replace_x(s, turn=1 - s._x.turn)),
        ("pass flag", lambda s: _replace_x(s, passed=~s._x.passed)),
      ],
    ),
    Spec(
      "hex",
      30,
      position=lambda s: (jnp.sign(s._x.board), s._x.color, s._x.step_count == 1, s.terminated),
      position_is_everything=True,
      line=[0, 60, 1, 61, 2],
      # the second pair leaves different group labels in pgx's board
      meet=[([0, 60, 10], [10, 60, 0]), ([0, 60, 1, 61, 2], [2, 60, 1, 61, 0])],
      changes=[("colour", lambda s: _replace_x(s, step_count=s._x.step_count + 1))],
    ),
    Spec(
      "go_9x9",
      30,
      position=lambda s: (jnp.sign(s._x.board), s._x.color),
      position_is_everything=False,
      line=[0, 40, 81, 80],
      # same stones, but different earlier boards for positional superko
      apart=[([0, 40, 80], [80, 40, 0])],
      changes=[
        ("step count", lambda s: _replace_x(s, step_count=s._x.step_count + 2)),
        ("passes", lambda s: _replace_x(s, consecutive_pass_count=s._x.consecutive_pass_count + 1)),
        ("ko point", lambda s: _replace_x(s, ko=jnp.full_like(s._x.ko, 20))),
        ("superko flag", lambda s: _replace_x(s, is_psk=~s._x.is_psk)),
        (
          "superko history",
          lambda s: _replace_x(s, hash_history=s._x.hash_history.at[:, 0, 0].add(1)),
        ),
      ],
    ),
    Spec(
      "go_19x19",
      12,
      position=lambda s: (jnp.sign(s._x.board), s._x.color),
      position_is_everything=False,
      line=[0, 180, 361, 360],
      # same stones, but different earlier boards for positional superko
      apart=[([0, 180, 360], [360, 180, 0])],
      changes=[
        ("step count", lambda s: _replace_x(s, step_count=s._x.step_count + 2)),
        ("passes", lambda s: _replace_x(s, consecutive_pass_count=s._x.consecutive_pass_count + 1)),
        ("ko point", lambda s: _replace_x(s, ko=jnp.full_like(s._x.ko, 20))),
        ("superko flag", lambda s: _replace_x(s, is_psk=~s._x.is_psk)),
        (
          "superko history",
          lambda s: _replace_x(s, hash_history=s._x.hash_history.at[:, 0, 0].add(1)),
        ),
      ],
    ),
    Spec(
      "chess",
      30,
      position=lambda s: (s._x.board, s._x.color),
      position_is_everything=False,
      line=chess("g1f3", "g8f6", "d2d3", "d7d6"),
      meet=[(chess("g1f3", "g8f6", "d2d3", "d7d6"), chess("d2d3", "g8f6", "g1f3", "d7d6"))],
      apart=[
        # same board; half-move clocks 0 and 1
        (chess("g1f3", "d7d5", "d2d4"), chess("d2d4", "d7d5", "g1f3")),
        # same board, clock and step; different positions since the last pawn move
        (chess("g1f3", "b8c6", "b1c3", "g8f6"), chess("b1c3", "g8f6", "g1f3", "b8c6")),
      ],
      changes=[
        ("colour", lambda s: _replace_x(s, color=1 - s._x.color)),
        (
          "castling",
          lambda s: _replace_x(s, castling_rights=s._x.castling_rights.at[:, 0, 1].set(False)),
        ),
        ("en passant", lambda s: _replace_x(s, en_passant=jnp.full_like(s._x.en_passant, 20))),
        ("half-move clock", lambda s: _replace_x(s, halfmove_count=s._x.halfmove_count + 1)),
        ("step count", lambda s: _replace_x(s, step_count=s._x.step_count + 2)),
      ],
    ),
    Spec(
      "gardner_chess",
      30,
      position=lambda s: (s._board, s._turn),
      position_is_everything=False,
      line=gardner("a2a3", "b5c3", "b2b3"),
      meet=[(gardner("a2a3", "b5c3", "b2b3"), gardner("b2b3", "b5c3", "a2a3"))],
      apart=[
        # back to the start by two knight tours: same board, clock and step
        (gardner("b1a3", "b5c3", "a3b1", "c3b5"), gardner("b1c3", "b5a3", "c3b1", "a3b5")),
        (gardner("d2d3", "b5a3", "b1d2", "a3b5"), gardner("d2d3", "b5c3", "b1d2", "c3b5")),
      ],
      changes=[
        ("colour", lambda s: s.replace(_turn=1 - s._turn)),
        ("half-move clock", lambda s: s.replace(_halfmove_count=s._halfmove_count + 1)),
        ("step count", lambda s: s.replace(_step_count=s._step_count + 2)),
        ("pgx hash", lambda s: s.replace(_zobrist_hash=s._zobrist_hash ^ 1)),
      ],
    ),
    Spec(
      "animal_shogi",
      30,
      position=lambda s: (s._board, s._hand, s._turn),
      position_is_everything=False,
      line=[7, 7, 42],
      # the same position after different first moves
      apart=[([7, 7, 42], [42, 7, 7])],
      changes=[
        ("colour", lambda s: s.replace(_turn=1 - s._turn)),
        ("hand", lambda s: s.replace(_hand=s._hand.at[:, 1, 0].add(1))),
        ("step count", lambda s: s.replace(_step_count=s._step_count + 2)),
        ("pgx hash", lambda s: s.replace(_zobrist_hash=s._zobrist_hash ^ 1)),
      ],
    ),
    Spec(
      "shogi",
      12,
      # no rule looks at history: the position and the step count are everything
      position=lambda s: (s._x.board, s._x.hand, s._x.color, s._x.step_count),
      position_is_everything=True,
      # pawn pushes (action = direction * 81 + square; 0 is "up", square = 9 * file
      # + rank): the same three pawns moved in two orders
      line=[5, 5, 23],
      meet=[([5, 5, 23], [23, 5, 5])],
      changes=[
        ("colour", lambda s: _replace_x(s, color=1 - s._x.color)),
        ("hand", lambda s: _replace_x(s, hand=s._x.hand.at[:, 0, 0].add(1))),
        ("step count", lambda s: _replace_x(s, step_count=s._x.step_count + 2)),
        ("board", lambda s: _replace_x(s, board=s._x.board.at[:, 40].set(0))),
      ],
    ),
  ]
}


class _Game:
  """One game's env, its jitted player and its jitted key function."""

  def __init__(self, spec: Spec):
    self.spec = spec
    env = pgx.make(spec.env_id)
    # these tests are about the exact key (tests/test_bounded_keys.py: the others)
    hash_fn = game_keys.transposition_key_fn(spec.env_id, history="exact")
    self.key = jax.jit(hash_fn)

    def play(rng, actions):
      """Plays `actions [ROWS, steps]` (labels, RANDOM or STOP) from fresh games.

      Returns the final states `[ROWS]`, and the key `[steps + 1, ROWS, 2]` and the
      position of every state on the way.
      """
      init_rng, play_rng = jax.random.split(rng)
      states = jax.vmap(env.init)(jax.random.split(init_rng, ROWS))

      def one_step(states, inputs):
        step_actions, step_rng = inputs
        logits = jnp.where(states.legal_action_mask, 0.0, -jnp.inf)
        random_actions = jax.random.categorical(step_rng, logits)
        chosen = jnp.where(step_actions == RANDOM, random_actions, step_actions)
        stepped = jax.vmap(env.step)(states, jnp.maximum(chosen, 0))
        moves = step_actions != STOP
        states = jax.tree.map(
          lambda new, old: jnp.where(moves.reshape((-1,) + (1,) * (new.ndim - 1)), new, old),
          stepped,
          states,
        )
        return states, (hash_fn(states), spec.position(states))

      step_rngs = jax.random.split(play_rng, actions.shape[1])
      final, (keys, positions) = jax.lax.scan(one_step, states, (actions.T, step_rngs))
      keys = jnp.concatenate([hash_fn(states)[None], keys])
      positions = jax.tree.map(
        lambda first, rest: jnp.concatenate([first[None], rest]), spec.position(states), positions
      )
      return final, keys, positions

    self._play = jax.jit(play)

  def play(self, lines, seed=0):
    """Plays each line of `lines` (padded with STOP; rows past the lines play RANDOM)."""
    table = np.full((ROWS, self.spec.steps), RANDOM, np.int32)
    for row, line in enumerate(lines):
      table[row] = STOP
      table[row, : len(line)] = line
    return self._play(jax.random.PRNGKey(seed), jnp.asarray(table))


@functools.cache
def _game(env_id: str) -> _Game:
  return _Game(SPECS[env_id])


GAMES = list(SPECS)
# shogi's step compiles slowly (a quarter minute): its variants run in the slow set,
# and tests/test_large_pgx_games.py checks its key without stepping
SLOW_GAMES = {"shogi"}
# Go 19x19's key is go 9x9's on a larger board: the per-game checks marked with
# `_quick` run its variant in the slow set only (the README's suite checks its key in
# tests/test_bounded_keys.py and tests/test_large_pgx_games.py).
REPEATS = {"go_19x19"}


def _params(games):
  """`games` as parametrize values, those of `SLOW_GAMES` marked slow."""
  return [
    pytest.param(game, marks=pytest.mark.slow) if game in SLOW_GAMES else game for game in games
  ]


def _quick(games):
  """The variants of `games` that the README's suite runs (a `quick_variants` mark)."""
  return [game for game in games if game not in SLOW_GAMES | REPEATS]


def test_unknown_env_id_raises_value_error_naming_supported_ids():
  for env_id in ["go_13x13", "kuhn_poker", "2048", "no_such_game"]:
    with pytest.raises(ValueError, match=f"'{env_id}'.*tic_tac_toe.*shogi"):
      game_keys.transposition_key_fn(env_id)


def test_key_contents_documents_every_supported_game_and_mode():
  assert tuple(SPECS) == game_keys.SUPPORTED_ENV_IDS
  assert tuple(game_keys.KEY_CONTENTS) == game_keys.SUPPORTED_ENV_IDS
  for modes in game_keys.KEY_CONTENTS.values():
    assert set(modes) == set(game_keys.HISTORY_MODES)
    assert all(len(text) > 40 for text in modes.values())


@pytest.mark.parametrize("env_id", ["tic_tac_toe", "chess"])
@pytest.mark.parametrize("lanes", [2, 4])
def test_key_is_uint32_batch_by_lanes(env_id, lanes):
  game = _game(env_id)
  final, _, _ = game.play([])
  keys = jax.jit(game_keys.transposition_key_fn(env_id, lanes=lanes, history="exact"))(final)
  assert keys.dtype == jnp.uint32
  assert keys.shape == (ROWS, lanes)


@pytest.mark.quick_variants("tic_tac_toe", "connect_four", "chess", "hex")
@pytest.mark.parametrize("env_id", _params(GAMES))
def test_random_play_never_merges_different_positions(env_id):
  """Over all states of ROWS random games: equal keys imply equal positions; where
  the position is everything that decides the future, equal positions imply equal
  keys. The keys computed inside the scan match a second computation."""
  game = _game(env_id)
  final, keys, positions = game.play([], seed=1)
  np.testing.assert_array_equal(game.key(final), keys[-1])
  keys = np.asarray(keys).reshape(-1, keys.shape[-1])
  positions = [np.asarray(p).reshape(keys.shape[0], -1) for p in positions]
  rows = np.concatenate([p.astype(np.int64) for p in positions], axis=1)
  position_of_key = {}
  key_of_position = {}
  for key, position in zip(map(bytes, keys), map(bytes, rows)):
    assert position_of_key.setdefault(key, position) == position, "two positions, one key"
    if game.spec.position_is_everything:
      assert key_of_position.setdefault(position, key) == key, "one position, two keys"
  assert len(position_of_key) > ROWS  # the games went somewhere


@pytest.mark.quick_variants(*_quick(GAMES))
@pytest.mark.parametrize("env_id", _params(GAMES))
def test_key_ignores_which_player_id_moves_first(env_id):
  """The same line in games with different seat draws: same key."""
  game = _game(env_id)
  line = game.spec.line
  final, keys, _ = game.play([line] * ROWS)
  first_movers = np.asarray(final.current_player)
  assert len(set(first_movers)) == 2, "every row drew the same seats"
  assert not np.asarray(final.terminated).any()
  np.testing.assert_array_equal(keys[len(line)], np.broadcast_to(keys[len(line), 0], (ROWS, 2)))
  assert len({bytes(k) for k in np.asarray(keys[: len(line) + 1, 0])}) == len(line) + 1


@pytest.mark.parametrize("env_id", _params([g for g in GAMES if SPECS[g].meet]))
def test_transposing_move_orders_meet(env_id):
  game = _game(env_id)
  pairs = game.spec.meet
  lines = [line for pair in pairs for line in pair]
  final, _, positions = game.play(lines)
  keys = np.asarray(game.key(final))
  boards = np.asarray(positions[0][-1])
  for i in range(len(pairs)):
    first, second = 2 * i, 2 * i + 1
    np.testing.assert_array_equal(boards[first], boards[second])
    np.testing.assert_array_equal(keys[first], keys[second])
  assert not np.asarray(final.terminated)[: len(lines)].any()


def test_hex_key_ignores_pgx_group_labels():
  """The second hex transposition leaves different group labels in `_x.board`."""
  game = _game("hex")
  final, _, _ = game.play(game.spec.meet[1])
  board = np.asarray(final._x.board)
  assert (board[0] != board[1]).any() and (np.sign(board[0]) == np.sign(board[1])).all()


@pytest.mark.quick_variants(*_quick([g for g in GAMES if SPECS[g].apart]))
@pytest.mark.parametrize("env_id", _params([g for g in GAMES if SPECS[g].apart]))
def test_move_orders_that_must_not_meet_get_different_keys(env_id):
  game = _game(env_id)
  lines = [line for pair in game.spec.apart for line in pair]
  final, _, _ = game.play(lines)
  keys = np.asarray(game.key(final))
  for i in range(len(game.spec.apart)):
    assert (keys[2 * i] != keys[2 * i + 1]).any()


def test_history_only_differences_keep_the_board():
  """The `apart` pairs of go, chess, gardner chess and animal shogi reach one board
  (the same stones or pieces, the same colour to move): only history separates them."""
  for env_id in ["go_9x9", "chess", "gardner_chess", "animal_shogi"]:
    game = _game(env_id)
    lines = [line for pair in game.spec.apart for line in pair]
    _, _, positions = game.play(lines)
    for position in positions:
      position = np.asarray(position[-1])
      for i in range(len(game.spec.apart)):
        np.testing.assert_array_equal(position[2 * i], position[2 * i + 1])


@pytest.mark.quick_variants(*_quick(GAMES))
@pytest.mark.parametrize("env_id", _params(GAMES))
def test_single_field_changes_change_the_key(env_id):
  game = _game(env_id)
  final, _, _ = game.play([game.spec.line] * ROWS)
  keys = np.asarray(game.key(final))
  changes = list(game.spec.changes) + [
    ("terminated", lambda s: s.replace(terminated=~s.terminated))
  ]
  for name, change in changes:
    changed = np.asarray(game.key(change(final)))
    assert (changed != keys).any(axis=1).all(), name


def test_go_key_takes_superko_history_as_a_set():
  """Reordering pgx's board-hash history, or swapping a repeated entry (a pass
  re-records the board) for another entry of the set, keeps the key."""
  game = _game("go_9x9")
  final, _, _ = game.play([game.spec.line] * ROWS)  # black 0, white 40, pass, white 80
  history = final._x.hash_history
  assert (np.asarray(history[:, 1]) == np.asarray(history[:, 2])).all()  # the pass
  reordered = history.at[:, :4].set(history[:, jnp.array([3, 1, 0, 2])])
  deduplicated = history.at[:, 2].set(history[:, 0])
  keys = np.asarray(game.key(final))
  for variant in [reordered, deduplicated]:
    np.testing.assert_array_equal(game.key(_replace_x(final, hash_history=variant)), keys)
  shrunk_set = history.at[:, 0].set(history[:, 1])
  assert (np.asarray(game.key(_replace_x(final, hash_history=shrunk_set))) != keys).any(1).all()


def test_chess_positions_since_the_last_pawn_move_decide_repetition_draws():
  """Two knight shuffles back to the start position: same board, step and clock,
  different positions on the way, so different keys. The futures differ too: the
  same five moves repeat the position after 1.Nf3 a third time only after the
  g-knight shuffle, and pgx draws there."""
  g_knights = ["g1f3", "g8f6", "f3g1", "f6g8"]
  b_knights = ["b1c3", "b8c6", "c3b1", "c6b8"]
  back_to_after_nf3 = ["g1f3", "g8h6", "f3h4", "h6g8", "h4f3"]
  game = _game("chess")
  final, _, _ = game.play(
    [
      chess(*g_knights),
      chess(*b_knights),
      chess(*g_knights, *back_to_after_nf3),
      chess(*b_knights, *back_to_after_nf3),
    ]
  )
  np.testing.assert_array_equal(final._x.board[0], final._x.board[1])
  assert int(final._x.halfmove_count[0]) == int(final._x.halfmove_count[1]) == 4
  keys = np.asarray(game.key(final))
  assert (keys[0] != keys[1]).any()
  np.testing.assert_array_equal(final._x.board[2], final._x.board[3])
  assert bool(final.terminated[2]) and not bool(final.terminated[3])


def test_hex_swap_availability_is_in_the_key():
  game = _game("hex")
  final, _, _ = game.play([[5]] * ROWS)
  assert bool(final.legal_action_mask[0, 121])  # white may swap
  no_swap = _replace_x(final, step_count=final._x.step_count + 2)  # same colour to move
  assert (np.asarray(game.key(no_swap)) != np.asarray(game.key(final))).any(axis=1).all()
