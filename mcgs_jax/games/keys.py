"""Transposition keys for pgx board games: the words that decide a state's future.

The search stores one node per key, so a key must hold everything that decides the
game's future under pgx's rules as pgx implements them (legal moves, rewards,
termination), and as little else as it can, so that transpositions are found:

* Board terms, not seats. pgx draws at random which player id plays first, so the
  key holds the colour to move (`_x.color`, `_x.turn`, `_turn`) and never
  `current_player` or `_player_order`. All nodes of one search belong to one game,
  whose colour-to-player mapping is fixed, and values are from the mover's
  perspective, so nothing is lost; the same position in two games with different
  seat draws gets the same key.
* Left out: observation and its stacked history, RNG keys, `legal_action_mask`,
  `rewards` (both functions of what the key holds, for legal moves), pgx's
  union-find chain labels in Hex and Go (which depend on move order; only the stone
  colours count), and step counters, except where the game ends by step count.
* History, where the rules look back (Go superko, the repetition draws of chess,
  Gardner chess and animal shogi, the no-progress clock, the step limits), is kept
  in one of three modes, `history=`:

  - `"exact"`: everything a rule may still look at: the set of earlier boards (Go),
    the multiset of positions since the last irreversible move (chess), of the whole
    game (animal shogi), the exact clock and step count. Two states meet only if no
    continuation can tell them apart; in Go and chess that is almost never.
  - `"bounded"` (the default; KataGo's rule, from David Wu's "Monte-Carlo Graph
    Search from First Principles", KataGo docs/GraphSearch.md): history is kept
    only while a cycle of at most `repetition_bound` (R) plies through the last
    move is possible, and step counts are kept only within R plies of pgx's step
    limit. In Go, a stone whose chain and bordering empty regions hold more than R
    points cannot be undone within R plies, so the set of earlier boards is dropped;
    capture-free move orders meet. Merged states differ only through cycles longer
    than R plies or the step limit more than R plies away.
  - `"position"` (CrazyAra's rule, Czech, Korus, Kersting, "Monte-Carlo Graph Search
    for AlphaZero", ICAPS 2021): the position alone, with the clocks saturated as
    above, while no position has occurred twice; after a repetition, the `"bounded"`
    key (with a flag word). Merged states differ only on continuations that repeat
    a position themselves, or that run more than R plies to a clock's end. In Go it
    drops every earlier board (no non-terminal pgx Go state holds a repetition).

  `KEY_CONTENTS[env_id][mode]` says, per game and mode, what is kept and why; the
  soundness arguments are in docs/games.md.

Usage::

  hash_fn = transposition_key_fn("chess")       # pgx State batch -> uint32 [B, 2]
  keys = hash_fn(states)
  exact = transposition_key_fn("go_9x9", history="exact")

Other pgx games (or custom embeddings) can pass their own `hash_fn` to the search.
"""

import functools
import numbers
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax._src.hashing import DEFAULT_LANES, hash_words, leaf_to_words

HISTORY_MODES = ("exact", "bounded", "position")
# Chosen by measurement (docs/games.md, "Transpositions by history mode"): in go_9x9
# the exact key finds no transposition and the bounded key 0.03-0.04 hits per
# simulation, as many as the position key within noise, without its unsound merges;
# in chess bounded and exact are alike, and the position key's extra merges are few.
DEFAULT_HISTORY = "bounded"
# KataGo's `graphSearchRepBound`: cycles up to this many plies are kept exact.
DEFAULT_REPETITION_BOUND = 11
# The largest R taken: beyond every step limit below (the longest, go 19x19's, is 722
# plies) and every board (361 points), so a larger R would keep nothing more, and
# every count the keys compute with it fits in int32.
MAX_REPETITION_BOUND = 1024

# pgx's step limits: the game ends (area scoring in Go, a draw elsewhere) once its
# step count reaches this (tests/test_bounded_keys.py checks them against pgx).
STEP_LIMITS = {
  "go_9x9": 162,
  "go_19x19": 722,
  "chess": 512,
  "gardner_chess": 256,
  "animal_shogi": 256,
  "shogi": 512,
}
# The half-move clock at which pgx's chess and Gardner chess draw.
NO_PROGRESS_LIMIT = 100

_ABSENT_ROW = np.uint32(0xFFFFFFFF)  # pgx's Zobrist halves are < 2**31, so never a real one


def _words(*leaves) -> jax.Array:
  """Unbatched arrays of any shape and int/bool dtype, flattened to uint32 `[W]`."""
  return jnp.concatenate([leaf_to_words(jnp.asarray(leaf)[None], 1)[0] for leaf in leaves])


def _sorted_hash_rows(hashes, present, *, distinct: bool) -> jax.Array:
  """The rows of pgx's hash history as a set or multiset, in canonical order.

  Args:
    hashes: `[T, 2]` uint32, one pgx Zobrist hash per row.
    present: `[T]` bool, which rows belong to the (multi)set.
    distinct: True for a set (a repeated row counts once), False for a multiset.

  Returns:
    uint32 `[2 * T]`: the rows sorted, followed by absent-row fillers.
  """

  def sort_rows(rows):
    return rows[jnp.lexsort((rows[:, 1], rows[:, 0]))]

  rows = sort_rows(jnp.where(present[:, None], hashes, _ABSENT_ROW))
  if distinct:
    repeats_previous = jnp.concatenate(
      [jnp.zeros(1, jnp.bool_), jnp.all(rows[1:] == rows[:-1], axis=1)]
    )
    rows = sort_rows(jnp.where(repeats_previous[:, None], _ABSENT_ROW, rows))
  return rows.reshape(-1)


def _tic_tac_toe_words(state) -> jax.Array:
  """`[11]`: board `[9]` (-1 empty, 0 X, 1 O), colour to move, terminated."""
  return _words(state._x.board, state._x.color, state.terminated)


def _connect_four_words(state) -> jax.Array:
  """`[44]`: board `[42]` (-1 empty, 0 first colour, 1 second), colour to move,
  terminated."""
  return _words(state._x.board, state._x.color, state.terminated)


def _othello_words(state) -> jax.Array:
  """`[67]`: board `[64]` (+1 mover, -1 opponent), colour to move, previous move was
  a pass, terminated."""
  return _words(state._x.board, state._x.turn, state._x.passed, state.terminated)


def _hex_words(state) -> jax.Array:
  """`[N*N + 3]`: stone signs `[N*N]` (+1 mover, -1 opponent), colour to move, swap
  available, terminated."""
  x = state._x
  return _words(jnp.sign(x.board), x.color, x.step_count == 1, state.terminated)


def _saturated(count: jax.Array, limit: int, bound: int) -> jax.Array:
  """`max(count, limit - bound - 1)`: a counter that ends the game at `limit`, exact
  once the end is at most `bound + 1` plies away. Below that, every state ends more
  than `bound` plies later, so the merged values differ only beyond `bound` plies."""
  count = jnp.asarray(count)
  return jnp.maximum(count, jnp.asarray(limit - bound - 1, count.dtype))


def _has_repeat(rows: jax.Array) -> jax.Array:
  """Whether the sorted (multi)set of hash rows from `_sorted_hash_rows` holds one
  hash twice (absent-row fillers do not count)."""
  rows = rows.reshape(-1, 2)
  same = jnp.all(rows[1:] == rows[:-1], axis=1) & (rows[1:, 0] != _ABSENT_ROW)
  return same.any()


def _position_unless_repeated(position, with_history, repeated) -> jax.Array:
  """CrazyAra's key: a flag word, then `position` (zero-padded to the length of
  `with_history`) while nothing repeated, else `with_history`. The same shape
  either way, so it can be chosen per state under `jax.vmap`."""
  padding = jnp.zeros(with_history.shape[0] - position.shape[0], jnp.uint32)
  padded = jnp.concatenate([position, padding])
  chosen = jnp.where(repeated, with_history, padded)
  return jnp.concatenate([repeated.astype(jnp.uint32)[None], chosen])


@functools.cache
def _go_neighbours(points: int) -> np.ndarray:
  """`[points, 4]` int32: the neighbours of each point of a square Go board, with
  `points` (one past the last point) where the edge is."""
  size = int(round(points**0.5))
  rows, cols = np.divmod(np.arange(points), size)
  columns = []
  for d_row, d_col in ((-1, 0), (1, 0), (0, -1), (0, 1)):
    row, col = rows + d_row, cols + d_col
    on_board = (row >= 0) & (row < size) & (col >= 0) & (col < size)
    columns.append(np.where(on_board, row * size + col, points))
  return np.stack(columns, axis=1).astype(np.int32)


def go_last_move_extent(state, bound: int) -> jax.Array:
  """KataGo's repetition measure of the last move of one (unbatched) pgx Go state.

  The last move's point `loc` is the one empty in `_x.board_history[1]` and holding
  a stone in `_x.board_history[0]` (pgx keeps the last 8 boards as -1/0/1, rows of
  2 before the game's start). S is the number of stones of loc's chain (`_x.board`
  holds signed chain ids) and E the number of empty points in the connected empty
  regions that border that chain. After a move at loc, the position before it
  recurs at the earliest S + E - 1 moves later (footnote 4 of David Wu's
  "Monte-Carlo Graph Search from First Principles"; KataGo's
  `Board::simpleRepetitionBoundGt`).

  Returns:
    int32: 0 when there is no such point (a pass, or fewer than two moves played);
    else S + E, counted exactly while it is at most `bound` and stopped as soon as
    it exceeds it (a flood fill of at most `bound + 1` rounds): a value above
    `bound` means S + E > bound.
  """
  x = state._x
  placed = (x.board_history[1] == 0) & (jnp.abs(x.board_history[0]) == 1)
  has_move = placed.any()
  board = x.board
  chain = has_move & (board == board[jnp.argmax(placed)])
  empty = board == 0
  neighbours = jnp.asarray(_go_neighbours(board.shape[-1]))

  def grow(carry):
    reached, count, _ = carry
    touching = jnp.append(reached, False)[neighbours].any(axis=1)
    grown = reached | (empty & touching)
    grown_count = grown.sum(dtype=jnp.int32)
    return grown, grown_count, grown_count > count

  def going(carry):
    _, count, changed = carry
    return changed & (count <= bound)

  start = (chain, chain.sum(dtype=jnp.int32), has_move)
  return jax.lax.while_loop(going, grow, start)[1]


def _go_words(state, history: str, bound: int) -> jax.Array:
  """Go (9x9 and 19x19; T = pgx's step limit, 2*N*N: 162 and 722).

  exact `[N*N + 5 + 2*T]`: stone signs `[N*N]` (+1 black, -1 white), step count,
  consecutive passes, ko point, superko flag, terminated, and the set of board
  hashes in pgx's superko history `[2*T]`.
  bounded `[N*N + 6 + 2*T]`: stone signs, the step count saturated at T - R - 1,
  the colour to move (no longer implied by the step count), passes, ko, superko
  flag, terminated, and the set of boards, replaced by absent-row fillers when the
  last move's S + E exceeds R (`go_last_move_extent`).
  position `[N*N + 6]`: as bounded without the set of boards.
  """
  x = state._x
  previous_boards = _sorted_hash_rows(
    x.hash_history, jnp.arange(x.hash_history.shape[0]) < x.step_count, distinct=True
  )
  if history == "exact":
    return _words(
      jnp.sign(x.board),
      x.step_count,
      x.consecutive_pass_count,
      x.ko,
      x.is_psk,
      state.terminated,
      previous_boards,
    )
  position = _words(
    jnp.sign(x.board),
    _saturated(x.step_count, x.hash_history.shape[0], bound),
    x.step_count % 2,
    x.consecutive_pass_count,
    x.ko,
    x.is_psk,
    state.terminated,
  )
  if history == "position":
    return position
  far = go_last_move_extent(state, bound) > bound
  return jnp.concatenate([position, jnp.where(far, _ABSENT_ROW, previous_boards)])


def _live_en_passant(board: jax.Array, en_passant: jax.Array) -> jax.Array:
  """pgx's en-passant square where a pawn of the mover stands to take there (pgx's
  squares `to - 9` and `to + 7`), else -1. pgx records the square after every double
  push; where no pawn can take, it changes neither the legal moves nor the outcome,
  only pgx's hash of a position that can never recur (its pawn has moved)."""
  takers = en_passant + jnp.array([-9, 7], jnp.int32)
  on_board = (en_passant >= 0) & (takers >= 0) & (takers < 64)
  pawn_there = board[jnp.clip(takers, 0, 63)] == 1
  return jnp.where((on_board & pawn_there).any(), en_passant, -1)


def _chess_words(state, history: str, bound: int) -> jax.Array:
  """exact and bounded `[73 + 2*513]`: board `[64]` (+ mover, - opponent), colour to
  move, castling rights `[4]`, en-passant square, half-move clock, step count
  (bounded: saturated at 512 - R - 1), terminated, and the multiset of position
  hashes since the last capture or pawn move `[2*513]`.
  position `[1 + 73 + 2*513]`: a repetition flag, then (no position hash occurs
  twice since the last capture or pawn move) board, colour, castling, the
  en-passant square where a pawn can take, the clock saturated at 100 - R - 1, the
  saturated step count, terminated, zero-padded; or (a repetition) the bounded
  words."""
  x = state._x
  since_irreversible = jnp.arange(x.hash_history.shape[0]) <= x.halfmove_count
  positions = _sorted_hash_rows(x.hash_history, since_irreversible, distinct=False)
  step = x.step_count
  if history != "exact":
    step = _saturated(step, STEP_LIMITS["chess"], bound)
  with_history = _words(
    x.board,
    x.color,
    x.castling_rights,
    x.en_passant,
    x.halfmove_count,
    step,
    state.terminated,
    positions,
  )
  if history != "position":
    return with_history
  position = _words(
    x.board,
    x.color,
    x.castling_rights,
    _live_en_passant(x.board, x.en_passant),
    _saturated(x.halfmove_count, NO_PROGRESS_LIMIT, bound),
    step,
    state.terminated,
  )
  return _position_unless_repeated(position, with_history, _has_repeat(positions))


def _gardner_chess_words(state, history: str, bound: int) -> jax.Array:
  """exact and bounded `[31 + 2*257]`: board `[25]` (+ mover, - opponent), colour
  to move, half-move clock, step count (bounded: saturated at 256 - R - 1), pgx's
  current position hash `[2]`, terminated, and the multiset of position hashes
  since the last capture or pawn move `[2*257]`.
  position `[1 + 31 + 2*257]`: a repetition flag, then board, colour, the clock
  saturated at 100 - R - 1, the saturated step count, pgx's current hash,
  terminated (zero-padded), or after a repetition the bounded words."""
  since_irreversible = jnp.arange(state._hash_history.shape[0]) <= state._halfmove_count
  positions = _sorted_hash_rows(state._hash_history, since_irreversible, distinct=False)
  step = state._step_count
  if history != "exact":
    step = _saturated(step, STEP_LIMITS["gardner_chess"], bound)
  with_history = _words(
    state._board,
    state._turn,
    state._halfmove_count,
    step,
    state._zobrist_hash,
    state.terminated,
    positions,
  )
  if history != "position":
    return with_history
  position = _words(
    state._board,
    state._turn,
    _saturated(state._halfmove_count, NO_PROGRESS_LIMIT, bound),
    step,
    state._zobrist_hash,
    state.terminated,
  )
  return _position_unless_repeated(position, with_history, _has_repeat(positions))


def _animal_shogi_words(state, history: str, bound: int) -> jax.Array:
  """exact and bounded `[23 + 2*257]`: board `[12]` (0-4 mover's pieces, 5-9
  opponent's, -1 empty), hands `[2, 3]` (mover first), colour to move, step count
  (bounded: saturated at 256 - R - 1), pgx's current position hash `[2]`,
  terminated, and the multiset of all position hashes of the game `[2*257]`.
  position `[1 + 23 + 2*257]`: a repetition flag, then the same without the
  multiset (zero-padded) while no hash of the game occurs twice, else the bounded
  words."""
  all_positions = jnp.arange(state._hash_history.shape[0]) <= state._step_count
  positions = _sorted_hash_rows(state._hash_history, all_positions, distinct=False)
  step = state._step_count
  if history != "exact":
    step = _saturated(step, STEP_LIMITS["animal_shogi"], bound)
  current = (state._board, state._hand, state._turn, step, state._zobrist_hash, state.terminated)
  with_history = _words(*current, positions)
  if history != "position":
    return with_history
  return _position_unless_repeated(_words(*current), with_history, _has_repeat(positions))


def _shogi_words(state, history: str, bound: int) -> jax.Array:
  """`[98]`: board `[81]` (from the mover's side: -1 empty, 0-13 the mover's pieces,
  14-27 the opponent's), hands `[2, 7]` (mover first), colour to move, step count
  (bounded and position: saturated at 512 - R - 1), terminated."""
  x = state._x
  step = x.step_count
  if history != "exact":
    step = _saturated(step, STEP_LIMITS["shogi"], bound)
  return _words(x.board, x.hand, x.color, step, state.terminated)


def _history_free(word_fn: Callable[..., jax.Array]) -> Callable[..., jax.Array]:
  """A game whose rules read no history: the same words in every mode."""

  def words(state, history: str, bound: int) -> jax.Array:
    del history, bound
    return word_fn(state)

  return words


_WORD_FNS: dict[str, Callable[..., jax.Array]] = {
  "tic_tac_toe": _history_free(_tic_tac_toe_words),
  "connect_four": _history_free(_connect_four_words),
  "othello": _history_free(_othello_words),
  "hex": _history_free(_hex_words),
  "go_9x9": _go_words,
  "go_19x19": _go_words,
  "chess": _chess_words,
  "gardner_chess": _gardner_chess_words,
  "animal_shogi": _animal_shogi_words,
  "shogi": _shogi_words,
}

SUPPORTED_ENV_IDS = tuple(_WORD_FNS)

_NO_HISTORY = "The same key in every mode: no rule looks at history."

# What each key keeps, per game (`SUPPORTED_ENV_IDS`) and mode (`HISTORY_MODES`);
# R is `repetition_bound`. docs/games.md gives the soundness arguments.
KEY_CONTENTS: dict[str, dict[str, str]] = {
  "tic_tac_toe": dict.fromkeys(
    HISTORY_MODES,
    "Board (9 cells: empty, X or O), colour to move, terminated. The winner "
    "follows from the board. " + _NO_HISTORY,
  ),
  "connect_four": dict.fromkeys(
    HISTORY_MODES,
    "Board (42 cells: empty, first or second colour), colour to move, terminated. "
    "The winner follows from the board. " + _NO_HISTORY,
  ),
  "othello": dict.fromkeys(
    HISTORY_MODES,
    "Board (64 cells, signed from the mover's side), colour to move, whether the "
    "previous move was a pass, terminated. The pass flag is kept because pgx ends "
    "the game on the second pass in a row: with it set, the mover's pass ends the "
    "game at once. " + _NO_HISTORY,
  ),
  "hex": dict.fromkeys(
    HISTORY_MODES,
    "Stone colours (121 cells, signed from the mover's side; pgx's union-find "
    "group labels depend on move order and are dropped), colour to move, whether "
    "the swap move is available (second move of the game), terminated. pgx sets no "
    "step limit. " + _NO_HISTORY,
  ),
  "go_9x9": {
    "exact": (
      "Stone colours (81 points; pgx's chain labels are dropped), step count, "
      "consecutive passes (two end the game), ko point, superko flag, terminated, "
      "and the set of every board of the game so far. pgx ends the game as a loss "
      "for the mover when a move recreates an earlier board (positional superko, "
      "checked against its hash of the board after every earlier step), so the "
      "whole set of earlier boards decides which moves lose; it is kept as pgx's "
      "own hashes, sorted with repeats removed (membership is all pgx asks). The "
      "step count is kept because pgx ends the game (area scoring) at 162 steps. "
      "Cost: without captures boards only grow, so move orders meet only if they "
      "placed the same stones in the same order: almost no transpositions. "
      "Capture counts are dropped (pgx scores by area)."
    ),
    "bounded": (
      "Stone colours, colour to move, the step count saturated at 162 - R - 1 "
      "(exact within R plies of pgx's step limit), consecutive passes, ko point, "
      "superko flag, terminated, and the set of every earlier board unless the last "
      "move was a stone whose chain and bordering empty regions hold S + E > R "
      "points (KataGo's simpleRepetitionBoundGt): no cycle through such a move is "
      "R plies or shorter, so the set is replaced by a constant. Kept after a pass, "
      "in ko fights and in small regions. Capture-free move orders of the same "
      "stones meet."
    ),
    "position": (
      "As bounded, without any earlier board (CrazyAra's rule: a repetition ends a "
      "pgx Go game at once, so a state not over holds none). Merged states can "
      "differ on continuations that recreate a board of either history (a superko "
      "loss in one, a legal move in the other), ko fights included."
    ),
  },
  "go_19x19": {
    "exact": (
      "As go_9x9, on 361 points: stone colours (pgx's chain labels are dropped), "
      "step count (pgx ends the game at 722 steps), consecutive passes, ko point, "
      "superko flag, terminated, and the set of every board of the game so far "
      "(positional superko), as pgx's own hashes sorted with repeats removed. "
      "Almost no transpositions."
    ),
    "bounded": (
      "As go_9x9's bounded key on 361 points: the step count saturated at "
      "722 - R - 1, the colour to move, and the set of earlier boards only while "
      "the last move's S + E is at most R."
    ),
    "position": "As go_9x9's position key on 361 points: no earlier board.",
  },
  "chess": {
    "exact": (
      "Board (64 squares, signed from the mover's side), colour to move, castling "
      "rights, en-passant square (as pgx records it: after every double pawn push), "
      "half-move clock (100 ends the game), step count (pgx ends the game at 512 "
      "steps), terminated, and the multiset of position hashes since the last "
      "capture or pawn move. pgx draws when a position occurs the third time, "
      "counting its hashes of board, side, castling and en passant; a position from "
      "before the last capture or pawn move can never recur, so the multiset since "
      "then (sorted, with repeats kept) decides every future repetition."
    ),
    "bounded": (
      "As exact, with the step count saturated at 512 - R - 1. The multiset since "
      "the last capture or pawn move stays: a reversible move can be undone by two "
      "more moves of each side, so the position before it can recur 3 plies later "
      "(a cycle of 4 plies), and for R >= 4 no part of that history can be dropped "
      "soundly. The half-move clock is the multiset's size less one. So 1.Nf3 d5 "
      "2.d4 and 1.d4 d5 2.Nf3 stay apart (in the second, the position after "
      "1.d4 d5 can recur)."
    ),
    "position": (
      "CrazyAra's rule. While no position hash occurs twice since the last capture "
      "or pawn move: board, colour, castling rights, the en-passant square only "
      "where a pawn can take there, the half-move clock saturated at 100 - R - 1, "
      "the step count saturated at 512 - R - 1, terminated. After a repetition: the "
      "bounded key, with a flag word keeping the two kinds apart. Merges 1.Nf3 d5 "
      "2.d4 with 1.d4 d5 2.Nf3; merged states differ only on continuations that "
      "repeat a position themselves or run more than R plies."
    ),
  },
  "gardner_chess": {
    "exact": (
      "Board (25 squares, signed from the mover's side), colour to move, half-move "
      "clock (100 ends the game), step count (pgx ends the game at 256 steps), "
      "pgx's current position hash, terminated, and the multiset of position hashes "
      "since the last capture or pawn move (as in chess; this variant has no "
      "castling and no en passant). The current hash is kept because pgx updates it "
      "move by move and it is not always a function of the position (a queen "
      "promotion is hashed as a pawn), while every later repetition check compares "
      "hashes derived from it."
    ),
    "bounded": (
      "As exact, with the step count saturated at 256 - R - 1; the multiset stays, "
      "as in chess (a reversible move can be undone in 4 plies)."
    ),
    "position": (
      "As chess's position key: while no hash repeats since the last capture or "
      "pawn move, board, colour, the clock saturated at 100 - R - 1, the saturated "
      "step count, pgx's current hash (every later hash derives from it) and "
      "terminated; after a repetition the bounded key, with a flag word."
    ),
  },
  "animal_shogi": {
    "exact": (
      "Board (12 squares: the mover's and the opponent's pieces), both hands (mover "
      "first), colour to move, step count (pgx ends the game at 256 steps), pgx's "
      "current position hash, terminated, and the multiset of every position hash "
      "of the game. pgx draws when a position hash occurs the third time; captured "
      "pieces return to the board as drops, so any earlier position may recur and "
      "the whole history is kept. pgx's incremental hash is not a function of the "
      "position (a capture is unhashed on the wrong square, and a move without "
      "capture toggles a hand term), so the current hash, from which every later "
      "one is derived, is kept too."
    ),
    "bounded": (
      "As exact, with the step count saturated at 256 - R - 1. The multiset of the "
      "whole game stays: drops return captured pieces, so any earlier position may "
      "recur within 4 plies."
    ),
    "position": (
      "CrazyAra's rule: while no position hash occurs twice in the game, board, "
      "hands, colour, the saturated step count, pgx's current hash and terminated; "
      "after a repetition the bounded key, with a flag word."
    ),
  },
  "shogi": dict.fromkeys(
    ("bounded", "position"),
    "As exact, with the step count saturated at 512 - R - 1: exact within R plies "
    "of pgx's step limit. Move orders that reach the same position meet, whatever "
    "their number of moves while the limit is far.",
  )
  | {
    "exact": (
      "Board (81 squares from the mover's side, as pgx turns it every move: the "
      "mover's and the opponent's pieces, promoted or not), both hands (mover "
      "first), colour to move, step count (pgx ends the game as a draw at 512 "
      "steps), terminated. pgx's shogi reads no history: it has no repetition rule "
      "(sennichite), no perpetual-check rule and no impasse rule, so the position "
      "and the step count decide the future; its cached king and major-piece "
      "squares follow from the board. Move orders that reach the same position in "
      "the same number of moves meet."
    )
  },
}


def check_history(history: str, repetition_bound: int) -> None:
  """ValueError unless `history` is one of `HISTORY_MODES` and `repetition_bound`
  an int in `[1, MAX_REPETITION_BOUND]`."""
  if not isinstance(history, str) or history not in HISTORY_MODES:
    raise ValueError(f"history must be one of {', '.join(HISTORY_MODES)}; got {history!r}")
  if (
    isinstance(repetition_bound, bool)
    or not isinstance(repetition_bound, numbers.Integral)
    or not 1 <= repetition_bound <= MAX_REPETITION_BOUND
  ):
    raise ValueError(
      f"repetition_bound must be an int >= 1 and <= {MAX_REPETITION_BOUND} (KataGo's "
      f"default: {DEFAULT_REPETITION_BOUND}; {MAX_REPETITION_BOUND} is beyond every game's "
      f"step limit, where a larger bound keeps nothing more); got {repetition_bound!r}"
    )


def transposition_words(
  env_id: str,
  *,
  history: str = DEFAULT_HISTORY,
  repetition_bound: int = DEFAULT_REPETITION_BOUND,
) -> Callable[..., jax.Array]:
  """The words of a pgx game's key: `words(state) -> uint32 [W]` for one unbatched
  state (W fixed per game and mode). Arguments and errors as `transposition_key_fn`."""
  if env_id not in _WORD_FNS:
    raise ValueError(
      f"no transposition key for env id {env_id!r}; supported: "
      f"{', '.join(SUPPORTED_ENV_IDS)}. Other games can pass their own hash_fn."
    )
  check_history(history, repetition_bound)
  word_fn, bound = _WORD_FNS[env_id], int(repetition_bound)

  def words(state) -> jax.Array:
    return word_fn(state, history, bound)

  return words


def transposition_key_fn(
  env_id: str,
  *,
  lanes: int = DEFAULT_LANES,
  history: str = DEFAULT_HISTORY,
  repetition_bound: int = DEFAULT_REPETITION_BOUND,
) -> Callable[..., jax.Array]:
  """The transposition key of a pgx game, as a `hash_fn` for the search.

  Args:
    env_id: a pgx environment id from `SUPPORTED_ENV_IDS`.
    lanes: uint32 lanes per key (2: 64 bits, 4: 128 bits).
    history: how much of the game's history the key keeps (`HISTORY_MODES`):
      `"exact"` all that a rule may still read; `"bounded"` (default) KataGo's rule,
      history only while a cycle of at most `repetition_bound` plies through the
      last move is possible; `"position"` CrazyAra's rule, the position alone until
      a position repeats. See the module docstring and `KEY_CONTENTS`.
    repetition_bound: R, the plies within which `"bounded"` and `"position"` keep
      every difference of history, step limit and clock (default 11, KataGo's
      `graphSearchRepBound`; at most `MAX_REPETITION_BOUND`, 1024).

  Returns:
    `hash_fn(states) -> uint32 [B, lanes]` for a batch of pgx States `[B, ...]` of
    that game (e.g. from `jax.vmap(env.init)`).

  Raises:
    ValueError: for an env id without a key here, an unknown `history`, or a
      `repetition_bound` that is not an int in `[1, MAX_REPETITION_BOUND]`.
  """
  batched_words = jax.vmap(
    transposition_words(env_id, history=history, repetition_bound=repetition_bound)
  )

  def hash_fn(states) -> jax.Array:
    return hash_words(batched_words(states), lanes=lanes)

  return hash_fn
