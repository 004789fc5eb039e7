"""Solvers: the exact solvers of `mcgs_jax.games.solvers` (hand-checked positions,
brute-force references, agreement with pgx's own rules on random games), and the
MCTS-solver on the graph, checked against them: its proofs are exact (against minimax,
and on single-player MDPs with rewards against dynamic programming), they take a
shortcut only at the highest value the game allows, and they decide positions that
plain search gets wrong."""

import functools
import random
import time
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mcgs_jax as mg
from mcgs_jax._src import proofs
from mcgs_jax._src.search import select
from mcgs_jax.games import evaluators, search_game, solvers
from mcgs_jax.games.adapter import make_game
from mcgs_jax.games.nim import Nim
from mcgs_jax.games.solvers import ConnectFourPosition
from mcgs_jax.testing import check_graph, to_numpy

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


# ---------------------------------------------------------------------------------
# The MCTS-solver on the graph


@functools.cache
def nim_search(heaps, num_simulations, transpositions, num_games=12):
  env = Nim(heaps)
  game = make_game(env, evaluators.rollout_evaluator(env))

  @jax.jit
  def run(key):
    keys = jax.random.split(key, num_games)
    state = jax.vmap(lambda k: env.init_from_heaps(jnp.array(heaps)))(keys)
    return search_game(
      mg.muzero_policy,
      game,
      state,
      num_simulations,
      keys[1],
      root_key=keys[0],
      transpositions=transpositions,
      solver=True,
      temperature=0.0,
    )

  return env, run(jax.random.PRNGKey(0))


def assert_proofs_exact(graph, exact_value_of_node):
  """Every proven node's value equals the exact one, and its Q is that value."""
  proven = np.asarray(graph.node_proven)
  checked = 0
  for game, node in zip(*np.nonzero(proven)):
    expected = exact_value_of_node(game, node)
    assert graph.proven_values[game, node] == expected, (game, node)
    if not graph.node_terminal[game, node]:
      assert graph.node_values[game, node] == expected
    checked += 1
  return checked


def assert_proofs_close(graph, exact_value_of_node):
  """`assert_proofs_exact` for float values (sums of float32 rewards): to 1e-5."""
  proven = np.asarray(graph.node_proven)
  for game, node in zip(*np.nonzero(proven)):
    expected = exact_value_of_node(game, node)
    np.testing.assert_allclose(
      graph.proven_values[game, node], expected, atol=1e-5, err_msg=f"game {game} node {node}"
    )
    if not graph.node_terminal[game, node]:
      np.testing.assert_allclose(graph.node_values[game, node], expected, atol=1e-5)
  return int(proven.sum())


def nim_exact(graph):
  heaps = np.asarray(graph.embeddings.heaps)
  terminal = np.asarray(graph.node_terminal)
  # A terminal node's own value is 0: its outcome is the reward on the edge into it.
  return lambda game, node: (
    0 if terminal[game, node] else solvers.nim_value(tuple(heaps[game, node]))
  )


@pytest.mark.parametrize(
  "heaps",
  [
    (2, 4),
    pytest.param((1, 2, 3), marks=pytest.mark.slow),
    pytest.param((3, 4, 5), marks=pytest.mark.slow),
  ],
)
def test_nim_proofs_are_exact_and_decide_the_root(heaps):
  env, out = nim_search(heaps, 800, True)
  graph = out.search_graph
  assert assert_proofs_exact(graph, nim_exact(graph)) > 12 * 5
  check_graph(graph, 800, tree_mode=False)
  # 800 playouts prove every root here, with the exact value.
  assert np.all(np.asarray(graph.node_proven[:, 0]))
  np.testing.assert_array_equal(graph.proven_values[:, 0], solvers.nim_value(heaps))
  winning = [a for a, v in solvers.nim_action_values(heaps, env.max_heap).items() if v == 1]
  if winning:
    assert set(np.asarray(out.action).tolist()) <= set(winning)


def _path_to(children: np.ndarray, target: int) -> list[tuple[int, int]]:
  """`[(node, action), ...]` from the root to `target` in one game's `children [N,
  A]`, by a breadth-first search."""
  edges_to = {0: []}
  frontier = [0]
  while target not in edges_to:
    next_frontier = []
    for node in frontier:
      for action, child in enumerate(children[node].tolist()):
        if child >= 0 and child not in edges_to:
          edges_to[child] = edges_to[node] + [(node, action)]
          next_frontier.append(child)
    frontier = next_frontier
  return edges_to[target]


def test_a_playout_stops_at_a_child_whose_proof_is_stale():
  # A node whose children prove it, not yet marked proven (a shared node's other
  # parents see a proof only when next on a path), counts as proven: the playout ends
  # at the edge into it, and the node keeps the path mark it held.
  _, out = nim_search((2, 4), 800, True)
  graph = out.search_graph
  proven = np.asarray(graph.node_proven) & ~np.asarray(graph.node_terminal)
  proven[:, 0] = False
  game, stale = (int(index[0]) for index in np.nonzero(proven))
  children = np.asarray(graph.children_index[game])
  edges = _path_to(children, stale)
  next_action = np.zeros(graph.node_proven.shape, np.int32)
  for node, action in edges:
    next_action[game, node] = action
  next_action[game, stale] = int(np.argmax(children[stale] >= 0))  # an expanded edge
  graph = graph.replace(
    node_proven=graph.node_proven.at[game, stale].set(False), extra_data=jnp.asarray(next_action)
  )

  def playout(solver):
    return select(
      jax.random.PRNGKey(1),
      graph,
      root_action_selection_fn=lambda key, graph, node: graph.extra_data[node],
      interior_action_selection_fn=lambda key, graph, node, depth: graph.extra_data[node],
      max_depth=40,
      options=mg.GraphOptions(solver=solver),
    )

  after, path = playout(solver=True)
  assert int(path.length[game]) == len(edges)
  np.testing.assert_array_equal(path.nodes[game, : len(edges)], [node for node, _ in edges])
  np.testing.assert_array_equal(path.actions[game, : len(edges)], [a for _, a in edges])
  marks = np.asarray(after.path_marks[game])
  stamp = int(graph.playouts_started[game])
  assert marks[stale] == int(graph.path_marks[game, stale]) != stamp
  assert all(marks[node] == stamp for node, _ in edges)
  # Without the solver the playout goes on through the node.
  _, path = playout(solver=False)
  assert int(path.length[game]) > len(edges)


@pytest.mark.slow
def test_graph_solver_beats_tree_solver_on_nim_3_4_5():
  """Nim 3-4-5, where random rollouts mislead UCT (the chapter "Tìm kiếm cây Monte
  Carlo", Monte Carlo tree search; its author is not named): proofs on the 120-state
  graph settle it, while the tree (about a million nodes) cannot be proven at this
  budget."""
  _, graph_out = nim_search((3, 4, 5), 800, True)
  _, tree_out = nim_search((3, 4, 5), 800, False)
  assert np.all(np.asarray(graph_out.action) == 1)  # take 2 from heap 0
  assert np.all(np.asarray(graph_out.search_graph.node_proven[:, 0]))
  assert not np.any(np.asarray(tree_out.search_graph.node_proven[:, 0]))
  assert np.sum(np.asarray(tree_out.action) == 1) < 12
  tree = tree_out.search_graph
  assert_proofs_exact(tree, nim_exact(tree))


def test_tic_tac_toe_end_game_proofs_are_exact():
  moves = [(0, 4, 8, 2, 6), (4, 0, 8, 2, 1, 6), (0, 1, 2, 4, 3)]
  game = make_game("tic_tac_toe", evaluators.rollout_evaluator(make_game("tic_tac_toe").env))
  states = [game.play(m) for m in moves]
  state = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *states)

  @jax.jit
  def run(key):
    return search_game(mg.uct_policy, game, state, 300, key, solver=True)

  out = run(jax.random.PRNGKey(0))
  graph = out.search_graph
  terminal = np.asarray(graph.node_terminal)
  step_counts = np.asarray(graph.embeddings._step_count)

  def exact(game_index, node):
    if terminal[game_index, node]:
      return 0
    node_state = jax.tree_util.tree_map(lambda x: x[game_index, node], graph.embeddings)
    return solvers.tic_tac_toe_values(node_state)[0]

  assert step_counts.shape[0] == 3
  assert assert_proofs_exact(graph, exact) > 3
  for index, m in enumerate(moves):
    value, action_values = solvers.tic_tac_toe_values_from_actions(list(m))
    assert bool(graph.node_proven[index, 0])
    assert float(graph.proven_values[index, 0]) == value
    assert action_values[int(out.action[index])] == value


@pytest.mark.slow
def test_solver_off_proves_nothing_and_changes_nothing_until_a_proof():
  """Without the solver, terminal nodes stay unproven; with it, a search that reaches
  no terminal state (tic-tac-toe from the empty board, 30 playouts: no line yet) is
  the same search, bit for bit, as without it."""
  env = Nim((2, 4))
  game = make_game(env, evaluators.uniform_evaluator())
  state = jax.vmap(lambda k: env.init_from_heaps(jnp.array((2, 4))))(
    jax.random.split(jax.random.PRNGKey(0), 2)
  )

  def search(game, state, root_key, key, *, solver):
    """30 playouts of muzero on `game` from `state`, jitted (one program)."""
    return jax.jit(
      lambda root_key, key: search_game(
        mg.muzero_policy, game, state, 30, key, root_key=root_key, solver=solver
      )
    )(root_key, key)

  plain = search(
    game, state, jax.random.PRNGKey(0), jax.random.PRNGKey(1), solver=False
  ).search_graph
  assert np.any(np.asarray(plain.node_terminal))
  assert not np.any(np.asarray(plain.node_proven))
  check_graph(plain, 30, tree_mode=False)

  tic_tac_toe = make_game("tic_tac_toe")
  state = tic_tac_toe.init(jax.random.PRNGKey(2), 2)
  off, on = (
    search(tic_tac_toe, state, jax.random.PRNGKey(3), jax.random.PRNGKey(4), solver=solver)
    for solver in (False, True)
  )
  assert not np.any(np.asarray(on.search_graph.node_terminal))
  assert not np.any(np.asarray(on.search_graph.node_proven))
  for name, expected in to_numpy(off.search_graph).items():
    np.testing.assert_array_equal(to_numpy(on.search_graph)[name], expected, err_msg=name)
  np.testing.assert_array_equal(on.action, off.action)
  np.testing.assert_array_equal(on.action_weights, off.action_weights)


def test_gumbel_policy_with_solver_plays_the_proven_win():
  heaps = (2, 4)
  env = Nim(heaps)
  game = make_game(env, evaluators.rollout_evaluator(env))
  keys = jax.random.split(jax.random.PRNGKey(3), 4)
  state = jax.vmap(lambda k: env.init_from_heaps(jnp.array(heaps)))(keys)

  @jax.jit
  def run(key):
    return search_game(mg.gumbel_muzero_policy, game, state, 200, key, solver=True)

  out = run(jax.random.PRNGKey(4))
  graph = out.search_graph
  assert assert_proofs_exact(graph, nim_exact(graph)) > 0
  assert np.all(np.asarray(graph.node_proven[:, 0]))
  winning = [a for a, v in solvers.nim_action_values(heaps, env.max_heap).items() if v == 1]
  assert set(np.asarray(out.action).tolist()) == set(winning)


# Single-player MDPs with rewards along the way: values far outside (-1, 1), so an
# edge "worth at least +1" proves nothing. Each is a table: `next_state [S, A]`,
# `rewards [S, A]`, `logits [S, A]` (the prior; -inf: illegal), `estimates [S]` (the
# evaluator's values);
# reaching `terminal` ends the episode.


def three_step_mdp():
  """Moving 0 at the root ends at once with reward 3; moving 1 twice, then any move,
  earns 10; state 1's move 0 ends with reward 2. The best return is 10, by 1, 1. The
  prior prefers move 0, so the ends worth 3 and 2 are found first: "an edge worth
  >= 1 wins" proved state 1 at 2 and the root at 3, for good. The evaluator guesses
  5 everywhere (with 0, PUCT starves move 1 after the 3 is found: a search
  weakness, not a proof one)."""
  next_state = np.array([[3, 1], [3, 2], [3, 3]])
  rewards = np.array([[3.0, 0.0], [2.0, 0.0], [10.0, 10.0]])
  logits = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
  return next_state, rewards, logits, np.full(3, 5.0), 3


def grid_mdp(size=5, seed=0):
  """A `size x size` grid walked right (action 0) or down (1) from the top-left
  corner; entering a cell earns its reward (uniform in [0, 0.6) from a fixed numpy
  seed); the episode ends on entering the bottom-right cell. States: `row * size +
  col`. The evaluator's value is the mean reward (0.3) times the moves left: with
  value 0, PUCT's Q undervalues every new node so much that it never tries some
  edges (a search weakness, not a proof one)."""
  cell_rewards = np.random.default_rng(seed).uniform(0.0, 0.6, (size, size))
  num_states = size * size
  next_state = np.zeros((num_states, 2), np.int32)
  rewards = np.zeros((num_states, 2))
  logits = np.full((num_states, 2), -np.inf)
  for row in range(size):
    for col in range(size):
      for action, (r, c) in enumerate(((row, col + 1), (row + 1, col))):
        if r < size and c < size:
          next_state[row * size + col, action] = r * size + c
          rewards[row * size + col, action] = cell_rewards[r, c]
          logits[row * size + col, action] = 0.0
  rows, cols = np.divmod(np.arange(num_states), size)
  estimates = 0.3 * (2 * (size - 1) - rows - cols)
  return next_state, rewards, logits, estimates, num_states - 1


def mdp_exact_values(next_state, rewards, logits, estimates, terminal):
  """`(V [S], Q [S, A])` by dynamic programming (value iteration to the fixed point
  of an acyclic MDP): `Q(s, a) = r(s, a) + V(s')`, `V(terminal) = 0`, illegal
  actions -inf."""
  del estimates
  legal = np.isfinite(logits)
  values = np.zeros(next_state.shape[0] + 1)
  for _ in range(next_state.shape[0] + 1):
    successor = np.where(next_state == terminal, 0.0, values[next_state])
    qvalues = np.where(legal, rewards + successor, -np.inf)
    values[:-1] = qvalues.max(axis=1)
  return values[:-1], qvalues


def mdp_recurrent_fn(next_state, rewards, logits, estimates, terminal):
  """`(recurrent_fn, root)` of a table MDP: embedding = state id `[B]` int32,
  discount 1 until the episode ends (0 there), value `estimates[state]`, prior
  `logits[state]`. `root(batch_size)` is the start state 0."""
  next_state, rewards, logits = map(jnp.asarray, (next_state, rewards, logits))
  rewards = rewards.astype(jnp.float32)
  # The terminal state's value (index S) is 0.
  estimates = jnp.asarray(np.append(estimates, 0.0), jnp.float32)

  def logits_of(state):
    # Illegal moves: the lowest finite logit, a zero prior (what the solver reads).
    row = logits[jnp.minimum(state, logits.shape[0] - 1)]
    return jnp.where(jnp.isfinite(row), row, jnp.finfo(jnp.float32).min)

  def recurrent_fn(params, rng_key, action, state):
    del params, rng_key
    new_state = next_state[state, action]
    output = mg.RecurrentFnOutput(
      reward=rewards[state, action],
      discount=jnp.where(new_state == terminal, 0.0, 1.0),
      prior_logits=logits_of(new_state),
      value=estimates[new_state],
    )
    return output, new_state

  def root(batch_size):
    state = jnp.zeros((batch_size,), jnp.int32)
    return mg.RootFnOutput(prior_logits=logits_of(state), value=estimates[state], embedding=state)

  return recurrent_fn, root


@functools.cache
def mdp_search(name, num_simulations, value_bounds, num_games=4):
  """`(mdp, muzero_policy output)` on `num_games` copies of the start state, greedy
  (temperature 0) and without Dirichlet noise."""
  mdp = {"three_step": three_step_mdp, "grid": grid_mdp}[name]()
  recurrent_fn, root = mdp_recurrent_fn(*mdp)

  @jax.jit
  def run(key):
    return mg.muzero_policy(
      None,
      key,
      root(num_games),
      recurrent_fn,
      num_simulations,
      solver=True,
      value_bounds=value_bounds,
      temperature=0.0,
      dirichlet_fraction=0.0,
    )

  return mdp, run(jax.random.PRNGKey(0))


@pytest.mark.quick_variants("three_step-200-value_bounds0", "grid-200-None")
@pytest.mark.parametrize("value_bounds", [(-1.0, 1.0), None])
@pytest.mark.parametrize("num_simulations", [200, 2000])
@pytest.mark.parametrize("name", ["three_step", "grid"])
def test_mdp_with_rewards_is_proven_exactly_and_played_right(name, num_simulations, value_bounds):
  """The default bounds (-1, 1) are wrong here (returns up to 10): no edge may prove
  its node early, every proof is by full expansion and exact; `value_bounds=None`
  (no bounds) proves the same way."""
  mdp, out = mdp_search(name, num_simulations, value_bounds)
  values, qvalues = mdp_exact_values(*mdp)
  graph = out.search_graph
  states = np.asarray(graph.embeddings)
  terminal = np.asarray(graph.node_terminal)
  checked = assert_proofs_close(
    graph, lambda game, node: 0.0 if terminal[game, node] else values[states[game, node]]
  )
  assert checked > 0
  best_action = int(np.argmax(qvalues[0]))
  np.testing.assert_array_equal(out.action, best_action)
  if name == "three_step":
    # Every edge is tried within 200 playouts: the root is proven by full expansion.
    assert np.all(np.asarray(graph.node_proven[:, 0]))
    np.testing.assert_allclose(graph.proven_values[:, 0], values[0], rtol=1e-6)
  check_graph(graph, num_simulations, tree_mode=False)


def test_grid_mdp_greedy_play_is_not_optimal():
  """The grid's rewards make the search matter: its best return (about 3.35) is not
  the greedy walk's, and the two root moves differ by more than float noise."""
  next_state, rewards, logits, _, terminal = mdp = grid_mdp()
  values, qvalues = mdp_exact_values(*mdp)
  state, greedy = 0, 0.0
  while state != terminal:
    action = int(np.argmax(np.where(np.isfinite(logits[state]), rewards[state], -np.inf)))
    greedy, state = greedy + rewards[state, action], next_state[state, action]
  assert values[0] > greedy + 0.1 and values[0] > 1.0
  assert abs(qvalues[0, 0] - qvalues[0, 1]) > 0.1


def one_node_graph(rewards, children, value_bounds):
  """One game's graph, as the proof functions read it: node 1 with one edge per
  entry of `rewards`, leading to the terminal (proven, value 0) node `children[a]`
  (-1: unexpanded), every action legal, a dense graph (no dropped actions)."""
  num_actions = len(rewards)
  edge_rewards = np.zeros((num_actions + 2, num_actions), np.float32)
  edge_rewards[1] = rewards
  children_index = np.full((num_actions + 2, num_actions), -1, np.int32)
  children_index[1] = children
  return types.SimpleNamespace(
    children_index=jnp.asarray(children_index),
    node_proven=jnp.asarray([False, False] + [True] * num_actions),
    proven_values=jnp.zeros(num_actions + 2, jnp.float32),
    edge_rewards=jnp.asarray(edge_rewards),
    edge_discounts=jnp.zeros((num_actions + 2, num_actions), jnp.float32),
    children_prior_logits=jnp.zeros((num_actions + 2, num_actions), jnp.float32),
    root_invalid_edges=jnp.zeros(num_actions, bool),
    node_dropped_actions=None,
    value_bounds=jnp.asarray(
      (-jnp.inf, jnp.inf) if value_bounds is None else value_bounds, jnp.float32
    ),
  )


@pytest.mark.parametrize(
  "reward, other, value_bounds, early",
  [
    (1.0, 0.5, (-1.0, 1.0), True),
    (np.float32(1.0) - 1e-7, 0.5, (-1.0, 1.0), True),  # a rounding below the bound
    (1.0 + 1e-6, 0.5, (-1.0, 1.0), False),  # above it: out of bounds
    (0.999, 0.5, (-1.0, 1.0), False),
    (1.0, 3.0, (-1.0, 1.0), False),  # another proven edge out of bounds
    (1.0, 0.5, None, False),  # no bounds: no shortcut
    (10.0, 3.0, (0.0, 10.0), True),
    (10.0, 3.0, (0.0, 9.99), False),
  ],
)
def test_a_node_is_proven_early_only_at_the_highest_bound(reward, other, value_bounds, early):
  """Two proven edges (`reward`, `other`) and one unexpanded edge: the node is proven
  before full expansion only when an exact value equals the highest bound (within
  float tolerance, never above it) and no proven value lies outside the bounds."""
  graph = one_node_graph([reward, other, 0.0], [2, 3, -1], value_bounds)
  proven, value = proofs.prove_node(graph, 1)
  assert bool(proven) == early
  if early:
    assert float(value) == np.float32(max(reward, other))
  settled = one_node_graph([reward, other, 0.0], [2, 3, 4], value_bounds)
  proven, value = proofs.prove_node(settled, 1)
  assert bool(proven) and float(value) == np.float32(max(reward, other))


@pytest.mark.parametrize(
  "reward, value_bounds, excluded",
  [
    (-1.0, (-1.0, 1.0), True),  # worth the lowest bound: nothing is worse
    (-1.0, None, False),
    (-1.5, (-1.0, 1.0), False),  # below the bound: the bounds are wrong
    (-0.5, (-1.0, 1.0), False),
  ],
)
def test_only_a_proven_loss_at_the_lowest_bound_is_excluded_unbeaten(
  reward, value_bounds, excluded
):
  graph = one_node_graph([reward, 0.0, 0.0], [2, -1, -1], value_bounds)
  np.testing.assert_array_equal(proofs.excluded_edges(graph, 1), [excluded, False, False])
  # Beaten by another proven edge, it is excluded whatever the bounds.
  beaten = one_node_graph([reward, 0.5, 0.0], [2, 3, -1], value_bounds)
  np.testing.assert_array_equal(proofs.excluded_edges(beaten, 1), [True, False, False])


@pytest.mark.quick_variants("value_bounds0-True")
@pytest.mark.parametrize(
  "value_bounds, shortcut",
  [((0.0, 10.0), True), ((0.0, 9.99), False), ((0.0, 10.01), False), (None, False)],
)
def test_three_step_mdp_takes_the_shortcut_only_at_its_bound(value_bounds, shortcut):
  """With the true bounds (0, 10), state 2 is proven by its first edge worth 10 and
  its other edge is never tried; with bounds that 10 is above (out of bounds) or
  below, or none, state 2 is proven by both edges. The root is proven at 10 each
  time."""
  mdp, out = mdp_search("three_step", 200, value_bounds)
  graph = out.search_graph
  states = np.asarray(graph.embeddings)
  for game in range(states.shape[0]):
    node = int(np.flatnonzero(states[game, : int(graph.num_nodes[game])] == 2)[0])
    expanded = int(np.sum(np.asarray(graph.children_index[game, node]) >= 0))
    assert expanded == (1 if shortcut else 2), (game, expanded)
  assert np.all(np.asarray(graph.node_proven[:, 0]))
  np.testing.assert_array_equal(graph.proven_values[:, 0], 10.0)
  np.testing.assert_array_equal(out.action, 1)
