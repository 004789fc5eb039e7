"""Tests of the history modes of `mcgs_jax.games.keys`: `"bounded"` (KataGo's
repetition bound) and `"position"` (CrazyAra's rule) against `"exact"`.

States are reached by playing move lists with pgx (one jitted scan per game, all
rows sharing one seat draw) and, for clocks and step counts, by editing them as
tests/test_game_keys.py does. The last tests explore every continuation of merged
states with pgx's `step` and compare their outcomes.
"""

import collections
import functools
import itertools
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pytest
from test_game_keys import SPECS, _replace_x, chess

from mcgs_jax.games import adapter
from mcgs_jax.games import keys as game_keys

MODES = game_keys.HISTORY_MODES
R = game_keys.DEFAULT_REPETITION_BOUND
STOP = -1  # in a move table: leave the state as it is


@functools.cache
def _env(env_id: str):
  return pgx.make(env_id)


@functools.cache
def _key(env_id: str, history: str, bound: int = R):
  return jax.jit(game_keys.transposition_key_fn(env_id, history=history, repetition_bound=bound))


@functools.cache
def _words(env_id: str, history: str):
  return jax.jit(jax.vmap(game_keys.transposition_words(env_id, history=history)))


@functools.cache
def _player(env_id: str):
  """`play(table [rows, steps]) -> final states [rows]`: the moves of each row (STOP
  pads), from games that all drew the same seats."""
  env = _env(env_id)

  def play(table):
    rows = table.shape[0]
    states = jax.vmap(env.init)(jnp.tile(jax.random.PRNGKey(0), (rows, 1)))

    def one_step(states, actions):
      stepped = jax.vmap(env.step)(states, jnp.maximum(actions, 0))
      moves = actions != STOP
      states = jax.tree.map(
        lambda new, old: jnp.where(moves.reshape((-1,) + (1,) * (new.ndim - 1)), new, old),
        stepped,
        states,
      )
      return states, None

    return jax.lax.scan(one_step, states, table.T)[0]

  return jax.jit(play)


def play(env_id: str, lines):
  """The states after each line of moves (batched, one row per line)."""
  steps = max(1, max(len(line) for line in lines))
  table = np.full((len(lines), steps), STOP, np.int32)
  for row, line in enumerate(lines):
    table[row, : len(line)] = list(line)
  return _player(env_id)(jnp.asarray(table))


def keys_of(env_id: str, states, history: str, bound: int = R) -> list[bytes]:
  return [bytes(k) for k in np.asarray(_key(env_id, history, bound)(states))]


# --- bad input ---------------------------------------------------------------------


@pytest.mark.parametrize("history", ["Exact", "none", "", None, 1])
def test_unknown_history_mode_raises_value_error_naming_the_modes(history):
  with pytest.raises(ValueError, match="history must be one of exact, bounded, position"):
    game_keys.transposition_key_fn("chess", history=history)
  with pytest.raises(ValueError, match="history must be one of"):
    adapter.make_game("connect_four", history=history)


@pytest.mark.parametrize("bound", [0, -3, 1.5, 11.0, True, "11", None])
def test_bad_repetition_bound_raises_value_error_naming_it(bound):
  with pytest.raises(ValueError, match=r"repetition_bound must be an int >= 1"):
    game_keys.transposition_key_fn("go_9x9", repetition_bound=bound)
  with pytest.raises(ValueError, match=r"repetition_bound must be an int >= 1"):
    adapter.make_game("nim", repetition_bound=bound)


@pytest.mark.parametrize("bound", [game_keys.MAX_REPETITION_BOUND + 1, 2**32 + 600, 2**40])
def test_a_bound_past_its_range_is_refused_where_it_is_given(bound):
  """A bound past `MAX_REPETITION_BOUND` (2**40 and 2**32 + 600 overflowed int32
  when the key was first computed; issue 60, defect 2) is refused by `make_game`,
  the key and the command line, naming the range."""
  match = f"repetition_bound must be an int >= 1 and <= {game_keys.MAX_REPETITION_BOUND}"
  with pytest.raises(ValueError, match=match):
    adapter.make_game("chess", repetition_bound=bound)
  with pytest.raises(ValueError, match=match):
    game_keys.transposition_key_fn("go_9x9", repetition_bound=bound)
  command = [sys.executable, "-m", "mcgs_jax.apps.cli", "search", "--game", "chess"]
  done = subprocess.run(
    command + ["--repetition-bound", str(bound)], capture_output=True, text=True, timeout=120
  )
  assert done.returncode == 2, done.stderr
  assert f"<= {game_keys.MAX_REPETITION_BOUND}" in done.stderr
  assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_step_limits_are_pgx_s():
  from pgx import animal_shogi, gardner_chess  # noqa: PLC0415
  from pgx._src.games import chess as chess_game  # noqa: PLC0415
  from pgx._src.games import shogi  # noqa: PLC0415

  limits = game_keys.STEP_LIMITS
  assert limits["chess"] == chess_game.MAX_TERMINATION_STEPS
  assert limits["gardner_chess"] == gardner_chess.MAX_TERMINATION_STEPS
  assert limits["animal_shogi"] == animal_shogi.MAX_TERMINATION_STEPS
  assert limits["shogi"] == shogi.MAX_TERMINATION_STEPS
  for env_id in ["go_9x9", "go_19x19"]:
    state = jax.eval_shape(_env(env_id).init, jax.random.PRNGKey(0))
    assert limits[env_id] == state._x.hash_history.shape[0] == 2 * state._x.board.shape[0]


def test_make_game_passes_history_and_bound_to_the_key():
  state = play("go_9x9", [[20, 22, 24]])
  for history in MODES:
    for bound in [1, R]:
      game = adapter.make_game("go_9x9", history=history, repetition_bound=bound)
      expected = _key("go_9x9", history, bound)(state)
      np.testing.assert_array_equal(jax.jit(game.hash_fn)(state), expected)


# --- Go ----------------------------------------------------------------------------


def _go_orders(size: int, seed: int, count: int = 4):
  """`count` orders of the same stones (4 black, 3 white, far apart on an open board,
  black first and last): the orders of each colour's stones are shuffled."""
  rng = np.random.default_rng(seed)
  points = rng.choice(np.arange(size * size), 7, replace=False)
  black, white = points[:4], points[4:]
  orders = []
  for _ in range(count):
    b, w = rng.permutation(black), rng.permutation(white)
    orders.append([int(p) for pair in itertools.zip_longest(b, w) for p in pair if p is not None])
  return orders


@pytest.mark.parametrize("env_id,size", [("go_9x9", 9), ("go_19x19", 19)])
def test_go_capture_free_orders_meet_under_bounded_and_not_exact(env_id, size):
  lines = _go_orders(size, seed=size) + _go_orders(size, seed=size + 1)
  states = play(env_id, lines)
  boards = np.sign(np.asarray(states._x.board))
  assert not np.asarray(states.terminated).any()
  assert (np.asarray(states._x.num_captured) == 0).all()
  for group in [range(4), range(4, 8)]:
    group = list(group)
    assert len({tuple(lines[i]) for i in group}) > 1
    for i in group:
      np.testing.assert_array_equal(boards[i], boards[group[0]])
    exact, bounded, position = (
      [keys_of(env_id, states, m)[i] for i in group] for m in ["exact", "bounded", "position"]
    )
    assert len(set(bounded)) == 1 and len(set(position)) == 1
    distinct_orders = len({tuple(lines[i]) for i in group})
    assert len(set(exact)) == distinct_orders
  # different stones stay apart
  assert keys_of(env_id, states, "bounded")[0] != keys_of(env_id, states, "bounded")[4]


# A ko on the 9x9 board (point = 9 * row + column): black 1, 9, 19 and white 2, 10,
# 12, 20 around the empty point 11; black's stone at 11 takes the white stone at 10.
KO_SETUP = [1, 2, 9, 10, 19, 12]
KO_CAPTURE = 11


def _ko_lines(last_move: int):
  """Two lines to one board: the same setup, then black's moves 60 and 62 in either
  order (white answers 20, then 70), then `last_move` by black."""
  return [
    KO_SETUP + [60, 20, 62, 70, last_move],
    KO_SETUP + [62, 20, 60, 70, last_move],
  ]


def test_go_ko_capture_keeps_different_histories_apart_and_an_open_move_merges_them():
  states = play("go_9x9", _ko_lines(KO_CAPTURE) + _ko_lines(74))
  x = states._x
  np.testing.assert_array_equal(np.asarray(x.ko)[:2], [10, 10])  # pgx marks the ko
  board = np.sign(np.asarray(x.board))
  assert board[0, 10] == 0 and board[0, KO_CAPTURE] == 1  # white's stone was taken
  np.testing.assert_array_equal(board[0], board[1])
  np.testing.assert_array_equal(board[2], board[3])
  extents = jax.vmap(lambda s: game_keys.go_last_move_extent(s, R))(states)
  assert int(extents[0]) == int(extents[1]) == 2  # the stone and the point it emptied
  assert int(extents[2]) > R
  for history in ["exact", "bounded"]:
    keys = keys_of("go_9x9", states, history)
    assert keys[0] != keys[1], history  # ko fight: history kept
  bounded = keys_of("go_9x9", states, "bounded")
  assert bounded[2] == bounded[3]  # open-board move: history dropped
  exact = keys_of("go_9x9", states, "exact")
  assert exact[2] != exact[3]
  # a bound of 1 drops the history after the ko capture too (S + E = 2 > 1)
  loose = keys_of("go_9x9", states, "bounded", bound=1)
  assert loose[0] == loose[1]


def _python_extent(board_history, board, size):
  """S + E of the last move by breadth-first search over stone colours (not pgx's
  chain ids); 0 for a pass or no move."""
  before, after = board_history[1], board_history[0]
  placed = [p for p in range(size * size) if before[p] == 0 and after[p] in (-1, 1)]
  if not placed:
    return 0
  colour = np.sign(board)

  def neighbours(p):
    row, col = divmod(p, size)
    for r, c in ((row - 1, col), (row + 1, col), (row, col - 1), (row, col + 1)):
      if 0 <= r < size and 0 <= c < size:
        yield r * size + c

  def flood(starts, inside):
    seen, queue = set(starts), collections.deque(starts)
    while queue:
      for q in neighbours(queue.popleft()):
        if q not in seen and inside(q):
          seen.add(q)
          queue.append(q)
    return seen

  loc = placed[0]
  chain = flood([loc], lambda q: colour[q] == colour[loc])
  liberties = {q for p in chain for q in neighbours(p) if colour[q] == 0}
  empties = flood(sorted(liberties), lambda q: colour[q] == 0)
  return len(chain) + len(empties)


@functools.cache
def _random_go_states(env_id: str, rows: int, steps: int, seed: int):
  """Every state of `rows` random games of `steps` plies (passes 1 time in 20)."""
  env = _env(env_id)

  def run(rng):
    init_rng, play_rng = jax.random.split(rng)
    states = jax.vmap(env.init)(jax.random.split(init_rng, rows))

    def one_step(states, step_rng):
      logits = jnp.where(states.legal_action_mask, 0.0, -jnp.inf)
      logits = logits.at[:, -1].add(-3.0)
      actions = jax.random.categorical(step_rng, logits)
      states = jax.vmap(env.step)(states, actions)
      return states, states

    return jax.lax.scan(one_step, states, jax.random.split(play_rng, steps))[1]

  trajectory = jax.jit(run)(jax.random.PRNGKey(seed))
  return jax.tree.map(lambda leaf: leaf.reshape((rows * steps,) + leaf.shape[2:]), trajectory)


def test_go_flood_fill_counts_what_a_python_search_counts():
  states = _random_go_states("go_9x9", 8, 120, 3)
  live = ~np.asarray(states.terminated)
  full = np.asarray(jax.jit(jax.vmap(lambda s: game_keys.go_last_move_extent(s, 1000)))(states))
  capped = np.asarray(jax.jit(jax.vmap(lambda s: game_keys.go_last_move_extent(s, R)))(states))
  history = np.asarray(states._x.board_history)
  board = np.asarray(states._x.board)
  expected = np.array([_python_extent(history[i], board[i], 9) for i in range(len(board))])
  np.testing.assert_array_equal(full[live], expected[live])
  np.testing.assert_array_equal(capped <= R, full <= R)
  np.testing.assert_array_equal(capped[full <= R], full[full <= R])
  small = live & (expected > 0) & (expected <= R)
  assert small.sum() > 20 and (live & (expected > R)).sum() > 20  # both kinds were met
  assert (live & (expected == 0)).sum() > 5  # and passes


def test_go_step_count_saturates_within_r_plies_of_the_limit():
  base = play("go_9x9", [_go_orders(9, seed=5)[0]])
  base = jax.tree.map(lambda leaf: jnp.repeat(leaf, 2, axis=0), base)
  limit = game_keys.STEP_LIMITS["go_9x9"]
  edge = limit - R - 1

  def pair_keys(first, second, history):
    states = _replace_x(base, step_count=jnp.array([first, second], jnp.int32))
    keys = keys_of("go_9x9", states, history)
    return keys[0] == keys[1]

  for history in ["bounded", "position"]:
    assert pair_keys(21, 61, history)
    assert pair_keys(edge - 2, edge, history)
    assert not pair_keys(edge - 1, edge + 1, history)
    assert not pair_keys(limit - 4, limit - 2, history)
  assert not pair_keys(21, 61, "exact")


# --- chess -------------------------------------------------------------------------

NF3_D5_D4 = chess("g1f3", "d7d5", "d2d4")
D4_D5_NF3 = chess("d2d4", "d7d5", "g1f3")
KNIGHTS_OUT_AND_BACK = chess("g1f3", "g8f6", "f3g1", "f6g8")
OPEN_E3_E6 = chess("e2e3", "e7e6")
OPEN_E3_E6_AND_BACK = chess("e2e3", "e7e6", "g1f3", "g8f6", "f3g1", "f6g8")


def test_chess_repetition_cycle_stays_apart_in_every_mode():
  """1.e3 e6, then 2.Nf3 Nf6 3.Ng1 Ng8: the position after 1...e6 occurs twice, so
  the position key falls back to the bounded words (flag word 1). (Single pushes:
  after a double push pgx's hash holds the en-passant square, so the position after
  1.e4 e5 never recurs for pgx.)"""
  states = play("chess", [OPEN_E3_E6, OPEN_E3_E6_AND_BACK])
  np.testing.assert_array_equal(states._x.board[0], states._x.board[1])
  assert int(states._x.halfmove_count[1]) == 4
  for history in MODES:
    keys = keys_of("chess", states, history)
    assert keys[0] != keys[1], history
  position = np.asarray(_words("chess", "position")(states))
  np.testing.assert_array_equal(position[:, 0], [0, 1])
  bounded = np.asarray(_words("chess", "bounded")(states))
  np.testing.assert_array_equal(position[1, 1:], bounded[1])


def test_chess_start_never_recurs_for_pgx():
  """pgx records the start's hash as a constant (`INIT_ZOBRIST_HASH`) that differs
  from the hash it computes for the same position later, so after 1.Nf3 Nf6 2.Ng1
  Ng8 no hash has occurred twice: the position key merges the two starts (their
  futures differ only on continuations that repeat a position themselves), the
  others keep them apart."""
  states = play("chess", [[], KNIGHTS_OUT_AND_BACK])
  np.testing.assert_array_equal(states._x.board[0], states._x.board[1])
  history = np.asarray(states._x.hash_history[1, :5])
  assert len({tuple(row) for row in history}) == 5
  for history_mode, meet in [("exact", False), ("bounded", False), ("position", True)]:
    keys = keys_of("chess", states, history_mode)
    assert (keys[0] == keys[1]) == meet, history_mode


def test_chess_nf3_d5_d4_meets_d4_d5_nf3_only_in_position_mode():
  states = play("chess", [NF3_D5_D4, D4_D5_NF3])
  np.testing.assert_array_equal(states._x.board[0], states._x.board[1])
  assert int(states._x.en_passant[0]) >= 0 > int(states._x.en_passant[1])  # pgx's records
  for history, meet in [("exact", False), ("bounded", False), ("position", True)]:
    keys = keys_of("chess", states, history)
    assert (keys[0] == keys[1]) == meet, history


def test_chess_en_passant_square_is_kept_where_a_pawn_can_take():
  """1.e4 Nf6 2.e5 d5: white's e-pawn may take on d6, so the key keeps the square
  (the state without it has fewer legal moves); after 1.Nf3 d5 2.d4 no black pawn can
  take on d3, and the square is dropped."""
  states = play("chess", [chess("e2e4", "g8f6", "e4e5", "d7d5"), NF3_D5_D4])
  cleared = _replace_x(states, en_passant=jnp.full_like(states._x.en_passant, -1))
  assert (np.asarray(states._x.en_passant) >= 0).all()
  live, dead = keys_of("chess", states, "position"), keys_of("chess", cleared, "position")
  assert live[0] != dead[0] and live[1] == dead[1]
  assert keys_of("chess", states, "bounded")[1] != keys_of("chess", cleared, "bounded")[1]


def _with_clock(states, clocks):
  """`states` (two rows) with half-move clocks `clocks`, the rows of the hash history
  since the last pawn move filled with distinct made-up hashes (no repetition)."""
  clocks = jnp.asarray(clocks, jnp.int32)
  rows = jnp.arange(states._x.hash_history.shape[1], dtype=jnp.uint32)
  made_up = jnp.stack([rows * 7 + 1, rows * 13 + 5], axis=-1)
  history = states._x.hash_history
  keep_current = (rows == 0)[None, :, None]
  history = jnp.where(keep_current, history, made_up[None])
  return _replace_x(states, halfmove_count=clocks, hash_history=history)


def test_chess_half_move_clock_near_100_keeps_apart_in_position_mode():
  states = play("chess", [NF3_D5_D4, NF3_D5_D4])
  edge = game_keys.NO_PROGRESS_LIMIT - R - 1

  def meet(clocks, history="position"):
    keys = keys_of("chess", _with_clock(states, clocks), history)
    return keys[0] == keys[1]

  assert meet([10, 40]) and meet([edge - 3, edge])
  assert not meet([edge, edge + 1]) and not meet([95, 97])
  assert not meet([10, 40], "bounded") and not meet([10, 40], "exact")
  flags = np.asarray(_words("chess", "position")(_with_clock(states, [10, 40])))[:, 0]
  np.testing.assert_array_equal(flags, [0, 0])


def test_chess_step_limit_near_512_keeps_apart():
  states = play("chess", [NF3_D5_D4, NF3_D5_D4])
  limit = game_keys.STEP_LIMITS["chess"]

  def meet(steps, history):
    edited = _replace_x(states, step_count=jnp.asarray(steps, jnp.int32))
    keys = keys_of("chess", edited, history)
    return keys[0] == keys[1]

  for history in ["bounded", "position"]:
    assert meet([100, 300], history) and meet([limit - R - 3, limit - R - 1], history)
    assert not meet([limit - R - 1, limit - R], history)
    assert not meet([limit - 7, limit - 5], history)
  assert not meet([100, 300], "exact")


# --- random play -------------------------------------------------------------------

RANDOM_ROWS, RANDOM_STEPS = 32, 24


@functools.cache
def _random_states(env_id: str):
  """Every state of RANDOM_ROWS seeded random games of RANDOM_STEPS plies (one seat
  draw for all), flattened to one batch."""
  env = _env(env_id)

  def run(rng):
    states = jax.vmap(env.init)(jnp.tile(jax.random.PRNGKey(0), (RANDOM_ROWS, 1)))

    def one_step(states, step_rng):
      logits = jnp.where(states.legal_action_mask, 0.0, -jnp.inf)
      states = jax.vmap(env.step)(states, jax.random.categorical(step_rng, logits))
      return states, states

    return jax.lax.scan(one_step, states, jax.random.split(rng, RANDOM_STEPS))[1]

  trajectory = jax.jit(run)(jax.random.PRNGKey(11))
  count = RANDOM_ROWS * RANDOM_STEPS
  return jax.tree.map(lambda leaf: leaf.reshape((count,) + leaf.shape[2:]), trajectory)


@pytest.mark.parametrize("env_id", ["go_9x9", "chess", "gardner_chess", "animal_shogi"])
@pytest.mark.quick_variants("go_9x9")
def test_random_play_never_merges_different_positions_in_any_mode(env_id):
  states = _random_states(env_id)
  count = RANDOM_ROWS * RANDOM_STEPS
  positions = SPECS[env_id].position(states)
  rows = np.concatenate(
    [np.asarray(p).reshape(count, -1).astype(np.int64) for p in positions], axis=1
  )
  distinct = {}
  for history in MODES:
    position_of_key = {}
    for key, position in zip(keys_of(env_id, states, history), map(bytes, rows)):
      assert position_of_key.setdefault(key, position) == position, history
    distinct[history] = len(position_of_key)
  assert distinct["exact"] >= distinct["bounded"] >= distinct["position"] > RANDOM_ROWS


# --- merged states against the truth -------------------------------------------------

TRUTH_DEPTH = 4


EXPLORED = 2048  # states stepped at once while exploring (one compile)


@functools.cache
def _expander(env_id: str):
  """`expand(frontier [EXPLORED], parents [EXPLORED], actions [EXPLORED])`: the
  children of the frontier's states, one per (parent, action)."""
  step = jax.vmap(_env(env_id).step)

  def expand(frontier, parents, actions):
    return step(jax.tree.map(lambda leaf: leaf[parents], frontier), actions)

  return jax.jit(expand)


def _outcomes(env_id: str, root, depth: int) -> dict:
  """`{moves: (terminated, rewards)}` for every legal continuation of `root` (a batch
  of one state) of at most `depth` plies that does not visit one pgx position hash
  twice: the continuations on which the position key promises equal outcomes (a
  continuation that repeats a position may draw by repetition in one history and not
  the other). Explored level by level with pgx's `step`, EXPLORED states at once."""
  frontier = jax.tree.map(lambda leaf: jnp.repeat(leaf, EXPLORED, axis=0), root)
  alive, paths, seen = np.zeros(1, np.int64), [()], [frozenset()]
  outcomes = {}
  for _ in range(depth):
    legal = np.asarray(frontier.legal_action_mask)[alive]
    legal &= ~np.asarray(frontier.terminated)[alive][:, None]
    parents, actions = np.nonzero(legal)
    assert len(parents) <= EXPLORED
    fill = EXPLORED - len(parents)
    frontier = _expander(env_id)(
      frontier, np.pad(alive[parents], (0, fill)), np.pad(actions, (0, fill))
    )
    hashes = np.asarray(
      frontier._x.hash_history[:, 0] if env_id == "chess" else frontier._zobrist_hash
    )
    finished, rewards = np.asarray(frontier.terminated), np.asarray(frontier.rewards)
    kept, next_paths, next_seen = [], [], []
    for child, (parent, action) in enumerate(zip(parents, actions)):
      position = tuple(hashes[child])
      if position in seen[parent]:
        continue
      path = paths[parent] + (int(action),)
      outcomes[path] = (bool(finished[child]), tuple(rewards[child].tolist()))
      kept.append(child)
      next_paths.append(path)
      next_seen.append(seen[parent] | {position})
    alive, paths, seen = np.asarray(kept, np.int64), next_paths, next_seen
  return outcomes


def _merged_pairs(env_id: str, history: str, count: int):
  """Up to `count` pairs of live states of `_random_states(env_id)` that `history`'s
  key merges and the exact key keeps apart."""
  states = _random_states(env_id)
  live = ~np.asarray(states.terminated)
  merged, exact = keys_of(env_id, states, history), keys_of(env_id, states, "exact")
  first_of, pairs = {}, []
  for i in np.flatnonzero(live):
    j = first_of.setdefault(merged[i], i)
    if exact[j] != exact[i] and len(pairs) < count:
      pairs.append((j, i))
  return states, pairs


def _position_pairs(env_id: str):
  """States and pairs of them that the position key merges and the exact key keeps
  apart: from random play (animal shogi), or built (chess: 1.Nf3 d5 2.d4 and 1.d4
  d5 2.Nf3; the start and 1.Nf3 Nf6 2.Ng1 Ng8, see
  `test_chess_start_never_recurs_for_pgx`)."""
  if env_id != "chess":
    return _merged_pairs(env_id, "position", 3)
  states = play("chess", [NF3_D5_D4, D4_D5_NF3, [], KNIGHTS_OUT_AND_BACK])
  return states, [(0, 1), (2, 3)]


@pytest.mark.parametrize("env_id,depth", [("animal_shogi", 4), ("chess", 2)])
@pytest.mark.slow
def test_states_merged_by_the_position_key_have_the_same_futures(env_id, depth):
  """States that the position key merges and the exact key keeps apart (the same
  position reached by other moves) have the same outcome on every continuation of up
  to `depth` plies that does not repeat a position, explored with pgx."""
  states, pairs = _position_pairs(env_id)
  assert len(pairs) >= 2
  merged, exact = keys_of(env_id, states, "position"), keys_of(env_id, states, "exact")
  for first, second in pairs:
    assert merged[first] == merged[second] and exact[first] != exact[second]
    roots = [jax.tree.map(lambda leaf, i=i: leaf[i : i + 1], states) for i in (first, second)]
    outcomes = [_outcomes(env_id, root, depth) for root in roots]
    assert len(outcomes[0]) > 100
    assert outcomes[0] == outcomes[1]


# --- command line ------------------------------------------------------------------


def test_command_line_offers_the_library_s_modes():
  from mcgs_jax.apps.cli import args as cli_args  # noqa: PLC0415

  assert cli_args.KEY_HISTORY_MODES == MODES


def test_search_and_arena_flags_reach_the_key():
  """`--key-history` and `--repetition-bound` of `mcgs-jax search` and `mcgs-jax
  arena` give the game (search) and this library's agents (arena) the key they
  name."""
  from mcgs_jax.apps.arena import agent as arena_agent  # noqa: PLC0415
  from mcgs_jax.apps.cli import (
    arena_command,  # noqa: PLC0415
    search_command,  # noqa: PLC0415
  )
  from mcgs_jax.apps.cli import args as cli_args  # noqa: PLC0415

  state = play("go_9x9", [[20, 22, 24]])
  argv = ["--game", "go_9x9", "--key-history", "position", "--repetition-bound", "5"]
  expected = np.asarray(_key("go_9x9", "position", 5)(state))
  args = search_command.build_parser().parse_args(argv)
  options = tuple(sorted(cli_args.key_history_options(args).items()))
  game = search_command.cached_game("go_9x9", "uniform", 1, options)
  np.testing.assert_array_equal(jax.jit(game.hash_fn)(state), expected)
  args = arena_command.build_parser().parse_args(
    argv + ["--a-evaluator", "uniform", "--b-evaluator", "uniform"]
  )
  game = arena_agent.two_player_game("go_9x9")
  agent = arena_command.agent_from_args(args, "a")
  assert (agent.key_history, agent.repetition_bound) == ("position", 5)
  assert "key=position R=5" in agent.describe()
  hash_fn = arena_agent.agent_game(game, agent).hash_fn
  np.testing.assert_array_equal(jax.jit(hash_fn)(state), expected)
  assert arena_command.agent_from_args(args, "b").key_history is None  # B: mctx's tree, no key
  with pytest.raises(ValueError, match="history must be one of"):
    arena_agent.Agent(evaluator="uniform", policy="muzero", key_history="full")
  with pytest.raises(ValueError, match="key_history"):
    arena_agent.Agent(evaluator="uniform", policy="muzero", engine="mctx", key_history="exact")
