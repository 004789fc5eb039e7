"""The exact solvers: hand-checked positions, brute-force references, and agreement with
pgx's own rules on random games."""

import functools
import random
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcgs_jax.games import solvers
from mcgs_jax.games.solvers import ConnectFourPosition

X, O, _ = 0, 1, -1  # tic-tac-toe cells: first mover, second mover, empty


def _pgx_playouts(env, key, num_games, num_plies):
  """Random legal playouts of a pgx env, one jitted scan.

  Returns `(before, actions, after)`: the states before each move, the moves (int32
  [num_games, num_plies]) and the states after them, every leaf batched
  `[num_games, num_plies, ...]`, as numpy arrays. Plies after the end leave the state
  unchanged.
  """

  def playout(key):
    init_key, moves_key = jax.random.split(key)

    def play(state, key):
      logits = jnp.where(state.legal_action_mask, 0.0, -jnp.inf)
      action = jax.random.categorical(key, logits).astype(jnp.int32)
      next_state = env.step(state, action)
      return next_state, (state, action, next_state)

    _, trajectory = jax.lax.scan(play, env.init(init_key), jax.random.split(moves_key, num_plies))
    return trajectory

  return jax.device_get(jax.jit(jax.vmap(playout))(jax.random.split(key, num_games)))


def _unbatch(tree, *index):
  return jax.tree.map(lambda leaf: leaf[index], tree)


# ---------------------------------------------------------------------------------
# Tic-tac-toe


def test_tic_tac_toe_empty_board_is_a_draw():
  value, action_values = solvers.tic_tac_toe_values([_] * 9)
  assert value == 0
  assert action_values == {cell: 0 for cell in range(9)}


def test_tic_tac_toe_hand_checked_positions():
  # X . X ... X to move completes the top row.
  value, action_values = solvers.tic_tac_toe_values([X, X, _, O, O, _, _, _, _])
  assert value == 1 and action_values[2] == 1
  # O to move must block the top row; anything else loses. After the block X must
  # block 2-4-6, O must block 0-3-6, X must block 3-4-5, and the game is drawn.
  value, action_values = solvers.tic_tac_toe_values([X, X, _, _, O, _, _, _, _])
  assert value == 0
  assert action_values == {2: 0, 3: -1, 5: -1, 6: -1, 7: -1, 8: -1}
  # Opposite corners against the centre: O must take an edge; a corner lets X fork.
  value, action_values = solvers.tic_tac_toe_values(np.array([[X, _, _], [_, O, _], [_, _, X]]))
  assert value == 0
  assert action_values == {1: 0, 2: -1, 3: 0, 5: 0, 6: -1, 7: 0}
  # A finished game: the player to move has lost, and has no moves.
  assert solvers.tic_tac_toe_values([X, X, X, O, O, _, _, _, _]) == (-1, {})
  assert solvers.tic_tac_toe_values_from_actions([0, 3, 1, 4, 2]) == (-1, {})
  assert solvers.tic_tac_toe_values_from_actions([4, 0]) == solvers.tic_tac_toe_values(
    [O, _, _, _, X, _, _, _, _]
  )
  for illegal in ([4, 4], [9], [0, 3, 1, 4, 2, 5]):
    with pytest.raises(ValueError):
      solvers.tic_tac_toe_values_from_actions(illegal)


_LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


@functools.cache
def _reference_negamax(board):
  """An independent negamax: value for the player to move (colours 0 and 1, -1 empty;
  colour 0 moves first), written without the solver's helpers."""
  if any(board[i] >= 0 and board[i] == board[j] == board[k] for i, j, k in _LINES):
    return -1  # the previous player completed a line
  empty = [cell for cell in range(9) if board[cell] < 0]
  if not empty:
    return 0
  color = (9 - len(empty)) % 2
  return max(-_reference_negamax(board[:cell] + (color,) + board[cell + 1 :]) for cell in empty)


def test_tic_tac_toe_every_position_agrees_with_a_reference_negamax():
  """All 5,478 positions reachable from the empty board: the solver's value and every
  action value equal an independent negamax's."""
  seen, frontier = set(), [(_,) * 9]
  while frontier:
    board = frontier.pop()
    if board in seen:
      continue
    seen.add(board)
    value, action_values = solvers.tic_tac_toe_values(board)
    assert value == _reference_negamax(board), board
    color = sum(cell >= 0 for cell in board) % 2
    for cell, action_value in action_values.items():
      child = board[:cell] + (color,) + board[cell + 1 :]
      assert action_value == -_reference_negamax(child), (board, cell)
      frontier.append(child)
  assert len(seen) == 5478


def test_tic_tac_toe_agrees_with_pgx():
  """On random pgx games (random first player id): the solver reads pgx states as the
  moves that made them, ends games where pgx does, and the value of every move that
  ends a game equals pgx's reward to the player who made it."""
  pgx = pytest.importorskip("pgx")
  env = pgx.make("tic_tac_toe")
  num_games, num_plies = 24, 9
  before, actions, after = _pgx_playouts(env, jax.random.PRNGKey(0), num_games, num_plies)
  assert len(set(np.asarray(before.current_player[:, 0]).tolist())) == 2

  live = []  # (game, ply) of every state before a move, game not over
  for game in range(num_games):
    moves = []
    for ply in range(num_plies):
      if bool(before.terminated[game, ply]):
        break
      live.append((game, ply))
      moves.append(int(actions[game, ply]))
      state = _unbatch(after, game, ply)
      value, action_values = solvers.tic_tac_toe_values(state)
      assert (value, action_values) == solvers.tic_tac_toe_values_from_actions(moves)
      assert (not action_values) == bool(state.terminated)
      if state.terminated:
        assert value == float(state.rewards[state.current_player])

  # Every legal move of every live state, stepped in pgx in one batch.
  games, plies = np.array(live).T
  states = jax.tree.map(lambda leaf: jnp.repeat(leaf[games, plies], 9, axis=0), before)
  children = jax.device_get(jax.jit(jax.vmap(env.step))(states, jnp.tile(jnp.arange(9), len(live))))
  for row, (game, ply) in enumerate(live):
    state = _unbatch(before, game, ply)
    _, action_values = solvers.tic_tac_toe_values(state)
    assert sorted(action_values) == np.flatnonzero(state.legal_action_mask).tolist()
    mover = int(state.current_player)
    for action, value in action_values.items():
      child = row * 9 + action
      if bool(children.terminated[child]):
        assert value == float(children.rewards[child, mover])


# ---------------------------------------------------------------------------------
# Connect four


def test_connect_four_win_detection_by_hand():
  vertical = ConnectFourPosition.from_moves([0, 1, 0, 1, 0, 1, 0])
  horizontal = ConnectFourPosition.from_moves([0, 0, 1, 1, 2, 2, 3])
  # First player: (0,0) (1,1) (2,2) (3,3) rising to the right; second player fills.
  rising = ConnectFourPosition.from_moves([0, 1, 1, 2, 2, 3, 2, 3, 3, 6, 3])
  # First player: (3,0) (2,1) (1,2) (0,3) falling to the right.
  falling = ConnectFourPosition.from_moves([3, 2, 2, 1, 1, 0, 1, 0, 0, 6, 0])
  for position in (vertical, horizontal, rising, falling):
    assert position.last_move_won and position.is_terminal and position.outcome == -1
    assert position.legal_columns() == []
    assert solvers.connect_four_position_values(position) == (-1, {})
  # The first player's top two cells of column 0 and bottom two of column 1 are not
  # four in a row (they would be, were columns stacked without a gap).
  wrapped = ConnectFourPosition.from_moves([1, 0, 1, 0, 0, 0, 0, 6, 0])
  assert not wrapped.is_terminal and 0 not in wrapped.legal_columns()
  with pytest.raises(ValueError):
    ConnectFourPosition.from_moves([0, 1, 0, 1, 0, 1, 0, 1])  # a move after the win
  with pytest.raises(ValueError):
    ConnectFourPosition.from_moves([2] * 7)  # a full column
  with pytest.raises(ValueError):
    ConnectFourPosition.from_moves([7])


def _gives_no_win(position: ConnectFourPosition, column: int) -> bool:
  """Whether playing `column` neither ends the game nor lets the opponent win next."""
  child = position.play(column)
  return not child.is_terminal and not any(
    child.play(reply).last_move_won for reply in child.legal_columns()
  )


def _random_open_position(rng: random.Random, empty_cells: int, quiet: bool = False):
  """Moves of a random game that is still open with `empty_cells` cells left.

  With `quiet`, no move ended the game or left the opponent an immediate win, so the
  position is rarely decided by a short threat sequence: harder for the solver.
  """
  while True:
    position, moves = ConnectFourPosition(), []
    while 42 - len(moves) > empty_cells and not position.is_terminal:
      columns = position.legal_columns()
      if quiet:
        columns = [c for c in columns if _gives_no_win(position, c)]
        if not columns:
          break
      column = rng.choice(columns)
      position = position.play(column)
      moves.append(column)
    if 42 - len(moves) == empty_cells and not position.is_terminal:
      return moves


def _brute_force(position: ConnectFourPosition, memo: dict) -> int:
  """Plain memoised minimax, no pruning: value for the player to move."""
  if position.is_terminal:
    return position.outcome
  key = (position.mover, position.occupied)
  if key not in memo:
    memo[key] = max(
      -_brute_force(position.play(column), memo) for column in position.legal_columns()
    )
  return memo[key]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), empty_cells=st.integers(1, 11), quiet=st.booleans())
def test_connect_four_solver_matches_brute_force(seed, empty_cells, quiet):
  moves = _random_open_position(random.Random(seed), empty_cells, quiet)
  position = ConnectFourPosition.from_moves(moves)
  value, action_values = solvers.connect_four_values(moves)
  memo = {}
  assert value == _brute_force(position, memo) == max(action_values.values())
  assert sorted(action_values) == position.legal_columns()
  for column, action_value in action_values.items():
    assert action_value == -_brute_force(position.play(column), memo)


def test_connect_four_wins_and_blocks_in_endgames():
  """Positions with 14 empty cells: a winning drop gives +1; a single threat of the
  opponent must be blocked; two threats lose. Each solve takes well under a second."""
  rng = random.Random(2024)
  seen = {"win": 0, "block": 0, "lost": 0}
  slowest = 0.0
  for _ in range(40):
    moves = _random_open_position(rng, empty_cells=14)
    position = ConnectFourPosition.from_moves(moves)
    start = time.perf_counter()
    value, action_values = solvers.connect_four_values(moves)
    slowest = max(slowest, time.perf_counter() - start)
    assert value == max(action_values.values())
    wins = [c for c in action_values if position.play(c).last_move_won]
    opponent_pass = ConnectFourPosition(
      mover=position.mover ^ position.occupied, occupied=position.occupied
    )
    threats = [c for c in action_values if opponent_pass.play(c).last_move_won]
    if wins:
      seen["win"] += 1
      assert value == 1 and all(action_values[c] == 1 for c in wins)
    elif len(threats) == 1:
      seen["block"] += 1
      assert all(v == -1 for c, v in action_values.items() if c != threats[0])
      assert value == action_values[threats[0]]
    elif len(threats) > 1:
      seen["lost"] += 1
      assert value == -1
  assert seen["win"] and seen["block"]
  assert slowest < 2.0, f"slowest 14-empty solve took {slowest:.2f}s"


# (seed, empty cells) of quiet positions beyond brute force's reach. The 16- and
# 20-empty ones catch a solver that stores a fail-high bound as an exact value.
_DEEP_POSITIONS = [(0, 14), (1, 14), (2, 14), (3, 14), (38, 16), (4, 20), (26, 20)]


@pytest.mark.parametrize("seed, empty_cells", _DEEP_POSITIONS)
def test_connect_four_values_are_consistent_deeper(seed, empty_cells):
  """Every column's value equals minus the value of the position it leads to, solved
  afresh with a new transposition table; each solve takes well under a second."""
  moves = _random_open_position(random.Random(seed), empty_cells, quiet=True)
  start = time.perf_counter()
  value, action_values = solvers.connect_four_values(moves)
  assert time.perf_counter() - start < 2.0
  assert value == max(action_values.values())
  for column, action_value in action_values.items():
    child_value, _ = solvers.connect_four_values(moves + [column])
    assert action_value == -child_value


def test_connect_four_agrees_with_pgx():
  """Random pgx games: pgx columns are the solver's, the game ends at the same move,
  the outcome matches pgx's rewards, and pgx boards read back as the same position."""
  pgx = pytest.importorskip("pgx")
  env = pgx.make("connect_four")
  num_games, num_plies = 48, 42
  before, actions, after = _pgx_playouts(env, jax.random.PRNGKey(1), num_games, num_plies)
  ends = {"win": 0, "draw": 0}
  for game in range(num_games):
    position = ConnectFourPosition()
    for ply in range(num_plies):
      if bool(before.terminated[game, ply]):
        break
      position = position.play(int(actions[game, ply]))
      terminated = bool(after.terminated[game, ply])
      assert position.is_terminal == terminated
      assert ConnectFourPosition.from_board(after._x.board[game, ply]) == position
      if terminated:
        player_to_move = int(after.current_player[game, ply])
        assert position.outcome == float(after.rewards[game, ply, player_to_move])
        ends["win" if position.last_move_won else "draw"] += 1
    assert position.is_terminal
  assert ends["win"] > 0


def test_connect_four_solver_reads_pgx_endgames():
  """The solver's values of a pgx state (via its board) and of its move list agree."""
  pgx = pytest.importorskip("pgx")
  env = pgx.make("connect_four")
  rng = random.Random(5)
  step = jax.jit(env.step)
  for _ in range(3):
    moves = _random_open_position(rng, empty_cells=12)
    state = env.init(jax.random.PRNGKey(len(moves)))
    for column in moves:
      state = step(state, jnp.int32(column))
    position = ConnectFourPosition.from_board(state._x.board)
    assert position == ConnectFourPosition.from_moves(moves)
    value, action_values = solvers.connect_four_position_values(position)
    assert (value, action_values) == solvers.connect_four_values(moves)
    assert sorted(action_values) == np.flatnonzero(state.legal_action_mask).tolist()
