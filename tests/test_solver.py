"""The MCTS-solver on the graph: proofs are exact (checked against minimax, and on
single-player MDPs with rewards against dynamic programming), they take a shortcut
only at the highest value the game allows, and they decide positions that plain
search gets wrong."""

import functools
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax._src import proofs
from mcgs_jax.games import evaluators, solvers
from mcgs_jax.games.adapter import make_game
from mcgs_jax.games.nim import Nim
from mcgs_jax.testing import check_graph, to_numpy


@functools.cache
def nim_search(heaps, num_simulations, transpositions, num_games=12):
  env = Nim(heaps)
  game = make_game(env, evaluators.rollout_evaluator(env))

  @jax.jit
  def run(key):
    keys = jax.random.split(key, num_games)
    state = jax.vmap(lambda k: env.init_from_heaps(jnp.array(heaps)))(keys)
    root = game.root(None, keys[0], state)
    return mg.muzero_policy(
      None,
      keys[1],
      root,
      game.recurrent_fn,
      num_simulations,
      invalid_actions=game.invalid_actions(state),
      hash_fn=game.hash_fn,
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


@pytest.mark.slow
def test_graph_solver_beats_tree_solver_on_nim_3_4_5():
  """Seed 003's position: rollouts mislead; proofs on the 120-state graph settle it,
  while the tree (about a million nodes) cannot be proven at this budget."""
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
    root = game.root(None, key, state)
    return mg.uct_policy(
      None,
      key,
      root,
      game.recurrent_fn,
      300,
      invalid_actions=game.invalid_actions(state),
      hash_fn=game.hash_fn,
      solver=True,
    )

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

  def search(game, state, root, key, *, solver):
    """30 playouts of muzero on `game` from `root`, jitted (one program)."""
    return jax.jit(
      lambda key: mg.muzero_policy(
        None,
        key,
        root,
        game.recurrent_fn,
        30,
        hash_fn=game.hash_fn,
        invalid_actions=game.invalid_actions(state),
        solver=solver,
      )
    )(key)

  root = game.root(None, jax.random.PRNGKey(0), state)
  plain = search(game, state, root, jax.random.PRNGKey(1), solver=False).search_graph
  assert np.any(np.asarray(plain.node_terminal))
  assert not np.any(np.asarray(plain.node_proven))
  check_graph(plain, 30, tree_mode=False)

  tic_tac_toe = make_game("tic_tac_toe")
  state = tic_tac_toe.init(jax.random.PRNGKey(2), 2)
  root = tic_tac_toe.root(None, jax.random.PRNGKey(3), state)
  off, on = (
    search(tic_tac_toe, state, root, jax.random.PRNGKey(4), solver=solver)
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
    root = game.root(None, key, state)
    return mg.gumbel_muzero_policy(
      None,
      key,
      root,
      game.recurrent_fn,
      200,
      invalid_actions=game.invalid_actions(state),
      hash_fn=game.hash_fn,
      solver=True,
    )

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
  (-1: unexpanded), every action legal."""
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
    root_invalid_actions=jnp.zeros(num_actions, bool),
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
