"""The MCTS-solver on the graph: proofs are exact (checked against minimax) and they
decide positions that plain search gets wrong."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax.testing import check_graph
from mcgs_jax.games import evaluators, solvers
from mcgs_jax.games.adapter import make_game
from mcgs_jax.games.nim import Nim


@functools.lru_cache(maxsize=None)
def nim_search(heaps, num_simulations, transpositions, num_games=12):
  env = Nim(heaps)
  game = make_game(env, evaluators.rollout_evaluator(env))

  @jax.jit
  def run(key):
    keys = jax.random.split(key, num_games)
    state = jax.vmap(lambda k: env.init_from_heaps(jnp.array(heaps)))(keys)
    root = game.root(None, keys[0], state)
    return mg.muzero_policy(None, keys[1], root, game.recurrent_fn, num_simulations,
                            invalid_actions=game.invalid_actions(state),
                            hash_fn=game.hash_fn, transpositions=transpositions,
                            solver=True, temperature=0.0)
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


def nim_exact(graph):
  heaps = np.asarray(graph.embeddings.heaps)
  terminal = np.asarray(graph.node_terminal)
  # A terminal node's own value is 0: its outcome is the reward on the edge into it.
  return lambda game, node: 0 if terminal[game, node] else solvers.nim_value(
      tuple(heaps[game, node]))


@pytest.mark.parametrize("heaps", [(2, 4), (1, 2, 3), (3, 4, 5)])
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


def test_graph_solver_beats_tree_solver_on_nim_3_4_5():
  """Seed 003's position: rollouts mislead; proofs on the 120-state graph settle it,
  while the tree (about a million nodes) cannot be proven at this budget."""
  _, graph_out = nim_search((3, 4, 5), 800, True)
  _, tree_out = nim_search((3, 4, 5), 800, False)
  assert np.all(np.asarray(graph_out.action) == 1)          # take 2 from heap 0
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
    root = game.root(None, key, state)
    return mg.uct_policy(None, key, root, game.recurrent_fn, 300,
                         invalid_actions=game.invalid_actions(state),
                         hash_fn=game.hash_fn, solver=True)
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


def test_solver_off_proves_nothing_and_is_unchanged():
  env = Nim((2, 4))
  game = make_game(env, evaluators.uniform_evaluator())
  state = jax.vmap(lambda k: env.init_from_heaps(jnp.array((2, 4))))(
      jax.random.split(jax.random.PRNGKey(0), 2))
  root = game.root(None, jax.random.PRNGKey(0), state)
  run = lambda solver: mg.muzero_policy(
      None, jax.random.PRNGKey(1), root, game.recurrent_fn, 30, hash_fn=game.hash_fn,
      invalid_actions=game.invalid_actions(state), solver=solver).search_graph
  plain = run(False)
  assert not np.any(np.asarray(plain.node_proven))
  check_graph(plain, 30, tree_mode=False)


def test_gumbel_policy_with_solver_plays_the_proven_win():
  heaps = (2, 4)
  env = Nim(heaps)
  game = make_game(env, evaluators.rollout_evaluator(env))
  keys = jax.random.split(jax.random.PRNGKey(3), 4)
  state = jax.vmap(lambda k: env.init_from_heaps(jnp.array(heaps)))(keys)

  @jax.jit
  def run(key):
    root = game.root(None, key, state)
    return mg.gumbel_muzero_policy(None, key, root, game.recurrent_fn, 200,
                                   invalid_actions=game.invalid_actions(state),
                                   hash_fn=game.hash_fn, solver=True)
  out = run(jax.random.PRNGKey(4))
  graph = out.search_graph
  assert assert_proofs_exact(graph, nim_exact(graph)) > 0
  assert np.all(np.asarray(graph.node_proven[:, 0]))
  winning = [a for a, v in solvers.nim_action_values(heaps, env.max_heap).items() if v == 1]
  assert set(np.asarray(out.action).tolist()) == set(winning)
