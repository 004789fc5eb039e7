"""Transposition keys for pgx board games: the words that decide a state's future.

The search stores one node per key, so a key must hold everything that decides the
game's future under pgx's rules as pgx implements them (legal moves, rewards,
termination), and nothing else, so that every transposition is found:

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
* Kept: `terminated`, and where the rules look back, what they look at: the
  positions that a repetition rule may still match (chess, Gardner chess, animal
  shogi, Go superko), the no-progress clock, the pass count, the ko point, and the
  step count for games that pgx ends at a fixed number of steps. This makes fewer
  states meet: two move orders meet only if they passed through the same relevant
  positions. `KEY_CONTENTS` says, per game, what is kept and why.

Usage::

  hash_fn = transposition_key_fn("chess")       # pgx State batch -> uint32 [B, 2]
  keys = hash_fn(states)

Other pgx games (or custom embeddings) can pass their own `hash_fn` to the search.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax._src.hashing import DEFAULT_LANES, hash_words, leaf_to_words

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


def _go_words(state) -> jax.Array:
  """`[N*N + 5 + 2*T]`: stone signs `[N*N]` (+1 black, -1 white), step count,
  consecutive passes, ko point, superko flag, terminated, and the set of board
  hashes in pgx's superko history `[2*T]` (T = pgx's step limit, 2*N*N: 162 for
  9x9, 722 for 19x19)."""
  x = state._x
  previous_boards = _sorted_hash_rows(
    x.hash_history, jnp.arange(x.hash_history.shape[0]) < x.step_count, distinct=True
  )
  return _words(
    jnp.sign(x.board),
    x.step_count,
    x.consecutive_pass_count,
    x.ko,
    x.is_psk,
    state.terminated,
    previous_boards,
  )


def _chess_words(state) -> jax.Array:
  """`[73 + 2*513]`: board `[64]` (+ mover, - opponent), colour to move, castling
  rights `[4]`, en-passant square, half-move clock, step count, terminated, and the
  multiset of position hashes since the last capture or pawn move `[2*513]`."""
  x = state._x
  since_irreversible = jnp.arange(x.hash_history.shape[0]) <= x.halfmove_count
  positions = _sorted_hash_rows(x.hash_history, since_irreversible, distinct=False)
  return _words(
    x.board,
    x.color,
    x.castling_rights,
    x.en_passant,
    x.halfmove_count,
    x.step_count,
    state.terminated,
    positions,
  )


def _gardner_chess_words(state) -> jax.Array:
  """`[31 + 2*257]`: board `[25]` (+ mover, - opponent), colour to move, half-move
  clock, step count, pgx's current position hash `[2]`, terminated, and the multiset
  of position hashes since the last capture or pawn move `[2*257]`."""
  since_irreversible = jnp.arange(state._hash_history.shape[0]) <= state._halfmove_count
  positions = _sorted_hash_rows(state._hash_history, since_irreversible, distinct=False)
  return _words(
    state._board,
    state._turn,
    state._halfmove_count,
    state._step_count,
    state._zobrist_hash,
    state.terminated,
    positions,
  )


def _animal_shogi_words(state) -> jax.Array:
  """`[23 + 2*257]`: board `[12]` (0-4 mover's pieces, 5-9 opponent's, -1 empty),
  hands `[2, 3]` (mover first), colour to move, step count, pgx's current position
  hash `[2]`, terminated, and the multiset of all position hashes of the game
  `[2*257]`."""
  all_positions = jnp.arange(state._hash_history.shape[0]) <= state._step_count
  positions = _sorted_hash_rows(state._hash_history, all_positions, distinct=False)
  return _words(
    state._board,
    state._hand,
    state._turn,
    state._step_count,
    state._zobrist_hash,
    state.terminated,
    positions,
  )


def _shogi_words(state) -> jax.Array:
  """`[98]`: board `[81]` (from the mover's side: -1 empty, 0-13 the mover's pieces,
  14-27 the opponent's), hands `[2, 7]` (mover first), colour to move, step count,
  terminated."""
  x = state._x
  return _words(x.board, x.hand, x.color, x.step_count, state.terminated)


_WORD_FNS: dict[str, Callable[..., jax.Array]] = {
  "tic_tac_toe": _tic_tac_toe_words,
  "connect_four": _connect_four_words,
  "othello": _othello_words,
  "hex": _hex_words,
  "go_9x9": _go_words,
  "go_19x19": _go_words,
  "chess": _chess_words,
  "gardner_chess": _gardner_chess_words,
  "animal_shogi": _animal_shogi_words,
  "shogi": _shogi_words,
}

SUPPORTED_ENV_IDS = tuple(_WORD_FNS)

KEY_CONTENTS: dict[str, str] = {
  "tic_tac_toe": (
    "Board (9 cells: empty, X or O), colour to move, terminated. The winner "
    "follows from the board, and no rule looks at history."
  ),
  "connect_four": (
    "Board (42 cells: empty, first or second colour), colour to move, terminated. "
    "The winner follows from the board, and no rule looks at history."
  ),
  "othello": (
    "Board (64 cells, signed from the mover's side), colour to move, whether the "
    "previous move was a pass, terminated. The pass flag is kept because pgx ends "
    "the game on the second pass in a row: with it set, the mover's pass ends the "
    "game at once."
  ),
  "hex": (
    "Stone colours (121 cells, signed from the mover's side; pgx's union-find "
    "group labels depend on move order and are dropped), colour to move, whether "
    "the swap move is available (second move of the game), terminated. No rule "
    "looks at history and pgx sets no step limit."
  ),
  "go_9x9": (
    "Stone colours (81 points; pgx's chain labels are dropped), step count, "
    "consecutive passes (two end the game), ko point, superko flag, terminated, "
    "and the set of every board of the game so far. pgx ends the game as a loss "
    "for the mover when a move recreates an earlier board (positional superko, "
    "checked against its hash of the board after every earlier step), so the whole "
    "set of earlier boards decides which moves lose; it is kept as pgx's own hashes, "
    "sorted with repeats removed (membership is all pgx asks). The step count is "
    "kept because pgx ends the game (area scoring) at 162 steps, which a search may "
    "reach. Cost: move orders meet only if they visited the same set of boards; "
    "without captures boards only grow, so that means the same stones placed in the "
    "same order, and go_9x9 finds almost no transpositions. Capture counts are "
    "dropped (pgx scores by area)."
  ),
  "go_19x19": (
    "As go_9x9, on 361 points: stone colours (pgx's chain labels are dropped), step "
    "count, consecutive passes, ko point, superko flag, terminated, and the set of "
    "every board of the game so far (positional superko), as pgx's own hashes sorted "
    "with repeats removed. The step count is kept because pgx ends the game (area "
    "scoring) at 722 steps. Cost: as in go_9x9, move orders meet only if they "
    "visited the same set of boards, so go_19x19 finds almost no transpositions."
  ),
  "chess": (
    "Board (64 squares, signed from the mover's side), colour to move, castling "
    "rights, en-passant square (as pgx records it: after every double pawn push), "
    "half-move clock (100 ends the game), step count (pgx ends the game at 512 "
    "steps), terminated, and the multiset of position hashes since the last capture "
    "or pawn move. pgx draws when a position occurs the third time, counting its "
    "hashes of board, side, castling and en passant; a position from before the last "
    "capture or pawn move can never recur, so the multiset since then (sorted, with "
    "repeats kept) decides every future repetition. Cost: move orders meet only if "
    "they passed through the same positions since the last capture or pawn move, "
    "e.g. when both end with the same pawn move. 1.Nf3 d5 2.d4 and 1.d4 d5 2.Nf3 do "
    "not meet: their half-move clocks differ (0 and 1), and in the second the "
    "position after 1.d4 d5 can recur."
  ),
  "gardner_chess": (
    "Board (25 squares, signed from the mover's side), colour to move, half-move "
    "clock (100 ends the game), step count (pgx ends the game at 256 steps), pgx's "
    "current position hash, terminated, and the multiset of position hashes since "
    "the last capture or pawn move (as in chess; this variant has no castling and no "
    "en passant). The current hash is kept because pgx updates it move by move and "
    "it is not always a function of the position (a queen promotion is hashed as a "
    "pawn), while every later repetition check compares hashes derived from it."
  ),
  "animal_shogi": (
    "Board (12 squares: the mover's and the opponent's pieces), both hands (mover "
    "first), colour to move, step count (pgx ends the game at 256 steps), pgx's "
    "current position hash, terminated, and the multiset of every position hash of "
    "the game. pgx draws when a position hash occurs the third time; captured pieces "
    "return to the board as drops, so any earlier position may recur and the whole "
    "history is kept. pgx's incremental hash is not a function of the position (a "
    "capture is unhashed on the wrong square, and a move without capture toggles a "
    "hand term), so the current hash, from which every later one is derived, is kept "
    "too. Cost: move orders meet only if they visited the same hashes, so "
    "animal_shogi finds almost no transpositions."
  ),
  "shogi": (
    "Board (81 squares from the mover's side, as pgx turns it every move: the "
    "mover's and the opponent's pieces, promoted or not), both hands (mover first), "
    "colour to move, step count (pgx ends the game as a draw at 512 steps), "
    "terminated. pgx's shogi reads no history: it has no repetition rule "
    "(sennichite), no perpetual-check rule and no impasse rule, so the position "
    "and the step count decide the future; its cached king and major-piece squares "
    "follow from the board. Move orders that reach the same position in the same "
    "number of moves meet."
  ),
}


def transposition_key_fn(env_id: str, *, lanes: int = DEFAULT_LANES) -> Callable[..., jax.Array]:
  """The transposition key of a pgx game, as a `hash_fn` for the search.

  Args:
    env_id: a pgx environment id from `SUPPORTED_ENV_IDS`.
    lanes: uint32 lanes per key (2: 64 bits, 4: 128 bits).

  Returns:
    `hash_fn(states) -> uint32 [B, lanes]` for a batch of pgx States `[B, ...]` of
    that game (e.g. from `jax.vmap(env.init)`).

  Raises:
    ValueError: for an env id without a key here.
  """
  if env_id not in _WORD_FNS:
    raise ValueError(
      f"no transposition key for env id {env_id!r}; supported: "
      f"{', '.join(SUPPORTED_ENV_IDS)}. Other games can pass their own hash_fn."
    )
  batched_words = jax.vmap(_WORD_FNS[env_id])

  def hash_fn(states) -> jax.Array:
    return hash_words(batched_words(states), lanes=lanes)

  return hash_fn
