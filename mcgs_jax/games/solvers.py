"""Exact game solvers in plain Python/numpy: the ground truth of tests and benchmarks.

Value convention (every solver here): values are game outcomes under perfect play,
+1 win, 0 draw, -1 loss.
  * A state's value is for the player to move. A terminal state's value is the outcome
    already decided, seen by the player to move: -1 when the previous move won, 0 for a
    draw.
  * An action's value is for the player who takes it: `-value(next state)`; taking the
    winning last move is worth +1.
A search that carries rewards on transitions (terminal states worth 0, the winning move
rewarded +1) has the same action values, and the same state values at every
non-terminal state.

Action encodings are the pgx ones: tic-tac-toe cell `3 * row + column`; connect four
column 0..6 (left to right); Nim `heap_index * max_heap + (take - 1)`.
"""

import dataclasses
import functools
from collections.abc import Sequence

import numpy as np

# ---------------------------------------------------------------------------------
# Nim


@functools.cache
def _nim_minimax(heaps: tuple[int, ...]) -> int:
  """Plain minimax over every move, memoised on the heap tuple."""
  if not any(heaps):
    return -1  # the previous player took the last stone
  return max(
    -_nim_minimax(heaps[:i] + (size - take,) + heaps[i + 1 :])
    for i, size in enumerate(heaps)
    for take in range(1, size + 1)
  )


def nim_value(heaps: Sequence[int]) -> int:
  """+1 if the player to move wins Nim with these heaps (normal play), else -1.

  Exhaustive minimax with a memo, deliberately not the xor formula, so that the two
  can check each other.
  """
  heaps = tuple(int(h) for h in heaps)
  if min(heaps, default=0) < 0:
    raise ValueError(f"heaps must be non-negative, got {heaps}")
  return _nim_minimax(heaps)


def nim_action_values(heaps: Sequence[int], max_heap: int) -> dict[int, int]:
  """Value of every legal Nim action for the player who takes it.

  Keys are actions `heap_index * max_heap + (take - 1)`; `max_heap` must be the
  environment's (the largest initial heap), not the largest current heap.
  """
  heaps = tuple(int(h) for h in heaps)
  if max(heaps, default=0) > max_heap:
    raise ValueError(f"heaps {heaps} exceed max_heap {max_heap}")
  return {
    i * max_heap + take - 1: -nim_value(heaps[:i] + (size - take,) + heaps[i + 1 :])
    for i, size in enumerate(heaps)
    for take in range(1, size + 1)
  }


# ---------------------------------------------------------------------------------
# Tic-tac-toe. A board is 9 cells, row-major, as pgx's `state._x.board`: -1 empty,
# 0 the first player's mark, 1 the second player's. The player to move is the first
# player when the board holds an even number of marks. pgx draws which player *id*
# moves first, but its board always gives the first mover color 0, so the board alone
# says whose turn it is.

_TTT_LINES = (
  (0, 1, 2),
  (3, 4, 5),
  (6, 7, 8),
  (0, 3, 6),
  (1, 4, 7),
  (2, 5, 8),
  (0, 4, 8),
  (2, 4, 6),
)


def _ttt_has_line(board: tuple[int, ...]) -> bool:
  return any(board[a] >= 0 and board[a] == board[b] == board[c] for a, b, c in _TTT_LINES)


def _ttt_children(board: tuple[int, ...]):
  """`(cell, next board)` for every empty cell."""
  color = sum(cell >= 0 for cell in board) % 2
  for cell in range(9):
    if board[cell] < 0:
      yield cell, board[:cell] + (color,) + board[cell + 1 :]


@functools.cache
def _ttt_minimax(board: tuple[int, ...]) -> int:
  if _ttt_has_line(board):
    return -1  # only the player who just moved can have completed a line
  if all(cell >= 0 for cell in board):
    return 0
  return max(-_ttt_minimax(child) for _, child in _ttt_children(board))


def _ttt_board(state_or_board) -> tuple[int, ...]:
  board = getattr(getattr(state_or_board, "_x", None), "board", state_or_board)
  board = np.asarray(board)
  if board.size != 9:
    raise ValueError(f"expected one tic-tac-toe board of 9 cells, got shape {board.shape}")
  board = tuple(int(cell) for cell in board.reshape(-1))
  first, second = board.count(0), board.count(1)
  if not set(board) <= {-1, 0, 1} or first - second not in (0, 1):
    raise ValueError(f"not a tic-tac-toe position: {board}")
  return board


def tic_tac_toe_values(state_or_board) -> tuple[int, dict[int, int]]:
  """Solves a tic-tac-toe position.

  Args:
    state_or_board: an unbatched pgx tic_tac_toe `State`, or a board of 9 cells
      (shape [9] or [3, 3]) in pgx's encoding (-1 empty, 0 first mover, 1 second).

  Returns:
    `(value, action_values)`: the value for the player to move (+1/0/-1), and a dict
    cell -> value for the player who marks it, over the empty cells (empty when the
    game is over).
  """
  board = _ttt_board(state_or_board)
  value = _ttt_minimax(board)
  if _ttt_has_line(board):
    return value, {}
  return value, {cell: -_ttt_minimax(child) for cell, child in _ttt_children(board)}


def tic_tac_toe_values_from_actions(actions: Sequence[int]) -> tuple[int, dict[int, int]]:
  """`tic_tac_toe_values` of the position reached by `actions` (cells) from empty."""
  board = [-1] * 9
  for ply, cell in enumerate(actions):
    if not 0 <= cell < 9 or board[cell] >= 0:
      raise ValueError(f"illegal move {cell} at ply {ply}")
    if _ttt_has_line(tuple(board)):
      raise ValueError(f"move at ply {ply} after the game ended")
    board[cell] = ply % 2
  return tic_tac_toe_values(board)


# ---------------------------------------------------------------------------------
# Connect four (6 rows x 7 columns), bitboards: bit `7 * column + row`, row 0 at the
# bottom, row 6 of every column a zero sentinel so that shifts never wrap.

_ROWS, _COLUMNS = 6, 7
_BOTTOM = tuple(1 << (7 * column) for column in range(_COLUMNS))
_COLUMN_MASK = tuple(((1 << _ROWS) - 1) << (7 * column) for column in range(_COLUMNS))
_CENTRE_FIRST = (3, 2, 4, 1, 5, 0, 6)


def _has_four(stones: int) -> bool:
  """Whether a bitboard holds four in a row (vertical, horizontal, both diagonals)."""
  for shift in (1, 7, 6, 8):
    pairs = stones & (stones >> shift)
    if pairs & (pairs >> (2 * shift)):
      return True
  return False


def _move_bit(occupied: int, column: int) -> int:
  """The bit a stone dropped in `column` lands on; 0 when the column is full."""
  return (occupied + _BOTTOM[column]) & _COLUMN_MASK[column]


@dataclasses.dataclass(frozen=True)
class ConnectFourPosition:
  """A connect four position as bitboards.

  mover: stones of the player to move.
  occupied: stones of both players.
  num_moves: stones on the board.
  """

  mover: int = 0
  occupied: int = 0
  num_moves: int = 0

  @classmethod
  def from_moves(cls, moves: Sequence[int]) -> "ConnectFourPosition":
    """The position after `moves` (columns 0..6, pgx actions) from the empty board."""
    position = cls()
    for ply, column in enumerate(moves):
      if position.is_terminal:
        raise ValueError(f"move at ply {ply} after the game ended")
      position = position.play(column)
    return position

  @classmethod
  def from_board(cls, board) -> "ConnectFourPosition":
    """The position of a pgx connect_four board.

    Args:
      board: int [42] or [6, 7], an unbatched pgx state's `state._x.board`: row 0 at
        the top, -1 empty, 0 the first mover's stones, 1 the second mover's (pgx gives
        color 0 to whoever moved first, whatever their player id).
    """
    board = np.asarray(board).reshape(_ROWS, _COLUMNS)
    stones = [0, 0]
    for column in range(_COLUMNS):
      cells = board[::-1, column]  # bottom first
      height = int(np.sum(cells >= 0))
      if np.any(cells[:height] < 0) or np.any(cells[height:] >= 0):
        raise ValueError(f"column {column} has a floating stone")
      for row in range(height):
        stones[int(cells[row])] |= 1 << (7 * column + row)
    num_moves = int(np.sum(board >= 0))
    if bin(stones[0]).count("1") - bin(stones[1]).count("1") != num_moves % 2:
      raise ValueError("stone counts do not alternate")
    return cls(mover=stones[num_moves % 2], occupied=stones[0] | stones[1], num_moves=num_moves)

  def legal_columns(self) -> list[int]:
    return (
      []
      if self.is_terminal
      else [column for column in range(_COLUMNS) if _move_bit(self.occupied, column)]
    )

  def play(self, column: int) -> "ConnectFourPosition":
    """The position after the player to move drops a stone in `column`."""
    bit = _move_bit(self.occupied, column) if 0 <= column < _COLUMNS else 0
    if not bit:
      raise ValueError(f"column {column} is not playable")
    return ConnectFourPosition(
      mover=self.mover ^ self.occupied, occupied=self.occupied | bit, num_moves=self.num_moves + 1
    )

  @property
  def last_move_won(self) -> bool:
    return _has_four(self.mover ^ self.occupied)

  @property
  def is_terminal(self) -> bool:
    return self.last_move_won or self.num_moves == _ROWS * _COLUMNS

  @property
  def outcome(self) -> int:
    """Value of a terminal position for the player to move: -1 lost, 0 draw."""
    if not self.is_terminal:
      raise ValueError("the game is not over")
    return -1 if self.last_move_won else 0


def _negamax(
  mover: int,
  occupied: int,
  empty_cells: int,
  alpha: int,
  beta: int,
  table: dict[int, tuple[int, int]],
) -> int:
  """Value of a non-terminal position for the player to move, exact within
  `(alpha, beta)` (fail-soft outside). `table` maps `mover + occupied` (unique per
  position) to proven `(lower, upper)` bounds."""
  moves = [bit for bit in (_move_bit(occupied, column) for column in _CENTRE_FIRST) if bit]
  if any(_has_four(mover | bit) for bit in moves):
    return 1
  if empty_cells == 1:
    return 0  # the one move left fills the board without winning
  opponent = mover ^ occupied
  threats = [bit for bit in moves if _has_four(opponent | bit)]
  if len(threats) > 1:
    return -1
  if threats:
    moves = threats  # the only move that does not lose at once

  key = mover + occupied
  lower, upper = table.get(key, (-1, 1))
  if lower >= beta or lower == upper:
    return lower
  if upper <= alpha:
    return upper
  alpha, beta = max(alpha, lower), min(beta, upper)
  window_low = alpha

  best = -1
  for bit in moves:
    value = -_negamax(opponent, occupied | bit, empty_cells - 1, -beta, -alpha, table)
    best = max(best, value)
    alpha = max(alpha, value)
    if alpha >= beta:
      break
  if best <= window_low:
    table[key] = (lower, best)  # every move failed low: `best` is an upper bound
  elif best >= beta:
    table[key] = (best, upper)  # a move failed high: `best` is a lower bound
  else:
    table[key] = (best, best)
  return best


def connect_four_position_values(position: ConnectFourPosition) -> tuple[int, dict[int, int]]:
  """Solves a connect four position by alpha-beta negamax with a transposition table.

  Returns `(value, action_values)`: the value for the player to move (+1/0/-1), and a
  dict column -> value for the player who plays it, over the playable columns (empty
  when the game is over). Meant for endgames: its time grows
  steeply with the empty cells, and the empty board is far out of reach.
  """
  if position.is_terminal:
    return position.outcome, {}
  table: dict[int, tuple[int, int]] = {}
  empty_cells = _ROWS * _COLUMNS - position.num_moves
  action_values = {}
  for column in position.legal_columns():
    child = position.play(column)
    if child.is_terminal:
      action_values[column] = -child.outcome
    else:
      action_values[column] = -_negamax(child.mover, child.occupied, empty_cells - 1, -1, 1, table)
  return max(action_values.values()), dict(sorted(action_values.items()))


def connect_four_values(moves: Sequence[int]) -> tuple[int, dict[int, int]]:
  """`connect_four_position_values` of the position after `moves` (columns 0..6)."""
  return connect_four_position_values(ConnectFourPosition.from_moves(moves))


# ---------------------------------------------------------------------------------
# The synthetic DAG game


def dag_values(game) -> np.ndarray:
  """int32 [depth + 1, width]: exact value of every state of a `DagGame` for the
  player to move (see `DagGame.exact_values`)."""
  return game.exact_values()
