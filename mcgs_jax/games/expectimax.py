"""Exact expectimax for 2048 on a small board: the truth that stochastic search is
checked against.

The value of a state is the most expected reward its player can still collect:
`V(s) = max_a [ r(s, a) + sum_c P(c | s_a) V(place(s_a, c)) ]` over the legal moves
`a` (afterstate `s_a`), 0 when no move is legal. The total of the tiles grows with
every move, so no state repeats and the recursion ends; memoised on the board, it
visits every reachable state once (a few hundred on 2x2).

The rules here are written again, in plain Python, from the description of the game
(`mcgs_jax.games.play2048`'s docstring), not from its JAX code, so that the two
check each other (`tests/test_2048.py`).
"""

import functools
import sys
from collections.abc import Sequence

import numpy as np

TILE_PROBS = (0.9, 0.1)  # a new 2 (log2 1) or 4 (log2 2)
NUM_ACTIONS = 4

Board = tuple[int, ...]  # log2 of each tile, row by row, 0 empty


def slide_row(row: Sequence[int]) -> tuple[tuple[int, ...], float]:
  """One row slid left, each pair of equal neighbours merged once from the left."""
  tiles = [tile for tile in row if tile]
  merged, reward, index = [], 0.0, 0
  while index < len(tiles):
    if index + 1 < len(tiles) and tiles[index] == tiles[index + 1]:
      merged.append(tiles[index] + 1)
      reward += 2.0 ** (tiles[index] + 1)
      index += 2
    else:
      merged.append(tiles[index])
      index += 1
  return tuple(merged) + (0,) * (len(row) - len(merged)), reward


def afterstate(board: Board, action: int) -> tuple[Board, float, bool]:
  """`(afterstate, reward, legal)` of a move (0 left, 1 up, 2 right, 3 down): the
  grid turned `action` quarter turns anticlockwise, rows slid left, turned back."""
  size = int(round(len(board) ** 0.5))
  grid = np.rot90(np.asarray(board).reshape(size, size), action)
  rows, reward = [], 0.0
  for row in grid:
    slid, row_reward = slide_row(row.tolist())
    rows.append(slid)
    reward += row_reward
  after = tuple(int(x) for x in np.rot90(np.asarray(rows), -action).reshape(-1))
  return after, reward, after != tuple(board)


def outcomes(after: Board):
  """`[(probability, next board)]`: a 2 (0.9) or a 4 (0.1) on a uniform empty cell."""
  empty = [cell for cell, tile in enumerate(after) if tile == 0]
  result = []
  for tile, probability in zip((1, 2), TILE_PROBS, strict=True):
    for cell in empty:
      board = list(after)
      board[cell] = tile
      result.append((probability / len(empty), tuple(board)))
  return result


class Expectimax:
  """Memoised exact values of 2048 positions on one board size."""

  def __init__(self):
    self._values: dict[Board, float] = {}

  @property
  def num_states(self) -> int:
    """States whose value has been computed so far."""
    return len(self._values)

  def afterstate_value(self, after: Board) -> float:
    """Expected value of an afterstate over its chance outcomes."""
    return sum(probability * self.value(board) for probability, board in outcomes(after))

  def action_values(self, board: Board) -> np.ndarray:
    """`[4]` float64: `r(s, a) + V(s_a)` of each move, -inf for an illegal one."""
    board = tuple(int(x) for x in board)
    values = np.full(NUM_ACTIONS, -np.inf)
    for action in range(NUM_ACTIONS):
      after, reward, legal = afterstate(board, action)
      if legal:
        values[action] = reward + self.afterstate_value(after)
    return values

  def value(self, board: Board) -> float:
    """`V(s)`: the best expected reward still to come (0 when no move is legal)."""
    board = tuple(int(x) for x in board)
    if board not in self._values:
      limit = sys.getrecursionlimit()
      sys.setrecursionlimit(max(limit, 20000))
      try:
        values = self.action_values(board)
      finally:
        sys.setrecursionlimit(limit)
      self._values[board] = float(np.max(values)) if np.isfinite(values).any() else 0.0
    return self._values[board]


@functools.lru_cache(maxsize=4)
def solver(size: int = 2) -> Expectimax:
  """A shared `Expectimax` for `size x size` boards (its memo grows with use)."""
  if size > 3:
    raise ValueError(f"exact expectimax is only practical for size <= 3, got {size}")
  return Expectimax()


def action_values(board) -> np.ndarray:
  """`[4]` exact move values of one board (any size the memo can hold)."""
  board = tuple(int(x) for x in np.asarray(board).reshape(-1))
  return solver(int(round(len(board) ** 0.5))).action_values(board)


def value(board) -> float:
  """The exact value of one board."""
  board = tuple(int(x) for x in np.asarray(board).reshape(-1))
  return solver(int(round(len(board) ** 0.5))).value(board)
