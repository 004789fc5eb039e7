"""Rules of the Nim and DAG environments, checked against plain-Python rules and the
exact solvers."""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcgs_jax.games import dag, nim, solvers


def _random_legal_actions(key, legal_action_mask):
  """int32 [B]: a uniformly random legal action of every state."""
  return jax.random.categorical(key, jnp.where(legal_action_mask, 0.0, -jnp.inf))


def _assert_pgx_dtypes(states):
  """The fields every pgx state has, with pgx's dtypes (batched over one axis)."""
  assert states.current_player.dtype == jnp.int32
  assert states.rewards.dtype == jnp.float32 and states.rewards.shape[1:] == (2,)
  assert states.terminated.dtype == jnp.bool_ and states.truncated.dtype == jnp.bool_
  assert states.legal_action_mask.dtype == jnp.bool_
  assert states._step_count.dtype == jnp.int32
  assert states.observation.dtype == jnp.bool_


# ---------------------------------------------------------------------------------
# Nim

NIM = nim.Nim((3, 4, 5))
NIM_INIT_FROM_HEAPS = jax.jit(jax.vmap(NIM.init_from_heaps))
NIM_STEP = jax.jit(jax.vmap(NIM.step))
NIM_WORDS = jax.jit(jax.vmap(nim.transposition_words))
ALL_NIM_HEAPS = list(itertools.product(range(4), range(5), range(6)))  # 120 positions


@functools.cache
def _nim_transitions():
  """Every (position, action) pair of Nim 3-4-5 stepped in one batch.

  Returns `(heaps [P, 3], players [P], before, after)`, where `before` and `after` are
  batched states over `P * A` pairs, row `p * A + a` being position `p`, action `a`.
  """
  heaps = np.array(ALL_NIM_HEAPS, np.int32)
  players = np.arange(len(heaps), dtype=np.int32) % 2
  states = NIM_INIT_FROM_HEAPS(heaps, players)
  num_actions = NIM.num_actions
  before = jax.tree.map(lambda leaf: jnp.repeat(leaf, num_actions, axis=0), states)
  actions = jnp.tile(jnp.arange(num_actions, dtype=jnp.int32), len(heaps))
  after = NIM_STEP(before, actions)
  return heaps, players, jax.device_get(states), jax.device_get(after)


def test_nim_protocol_and_init():
  assert (NIM.id, NIM.num_players, NIM.num_actions) == ("nim", 2, 15)
  assert NIM.observation_shape == (3, 6)
  states = jax.jit(jax.vmap(NIM.init))(jax.random.split(jax.random.PRNGKey(0), 32))
  np.testing.assert_array_equal(states.heaps, np.tile([3, 4, 5], (32, 1)))
  assert set(np.asarray(states.current_player).tolist()) == {0, 1}
  assert states.observation.shape == (32, 3, 6)
  _assert_pgx_dtypes(states)
  assert not np.any(states.terminated) and not np.any(states.truncated)
  # Heap 0 holds 3 stones and heap 1 holds 4, so takes above those are illegal.
  mask = np.asarray(NIM.init(jax.random.PRNGKey(1)).legal_action_mask).reshape(3, 5)
  np.testing.assert_array_equal(mask, [[1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
  assert NIM.action(1, 2) == 6
  assert [NIM.describe_action(NIM.action(h, t)) for h, t in ((0, 1), (2, 5))] == [
    "heap 0 take 1",
    "heap 2 take 5",
  ]
  assert nim.parse_heaps("3,4,5") == (3, 4, 5)
  for bad_heaps in [(6, 0, 0), (1, 2), (-1, 0, 0)]:
    with pytest.raises(ValueError):
      NIM.init_from_heaps(bad_heaps)


def test_nim_every_transition_follows_the_rules():
  heaps, players, states, after = _nim_transitions()
  num_actions, max_heap = NIM.num_actions, NIM.max_heap
  for p, (position, player) in enumerate(zip(heaps, players)):
    mask = np.asarray(states.legal_action_mask[p])
    terminal = not position.any()
    assert bool(states.terminated[p]) == terminal
    for action in range(num_actions):
      heap_index, take = divmod(action, max_heap)
      take += 1
      row = p * num_actions + action
      rewards = np.asarray(after.rewards[row])
      if terminal:  # stepping a terminated state changes nothing
        assert mask[action]
        np.testing.assert_array_equal(after.heaps[row], position)
        assert int(after.current_player[row]) == player
        assert int(after._step_count[row]) == 0
        np.testing.assert_array_equal(rewards, [0, 0])
        continue
      legal = take <= position[heap_index]
      assert mask[action] == legal
      assert int(after.current_player[row]) == 1 - player
      assert int(after._step_count[row]) == 1
      if not legal:  # pgx's rule: an illegal action loses at once
        np.testing.assert_array_equal(after.heaps[row], position)
        assert bool(after.terminated[row])
        assert rewards[player] == -1 and rewards[1 - player] == 1
        continue
      expected = position.copy()
      expected[heap_index] -= take
      np.testing.assert_array_equal(after.heaps[row], expected)
      took_last = not expected.any()
      assert bool(after.terminated[row]) == took_last
      assert rewards[player] == (1 if took_last else 0)
      assert rewards[1 - player] == -rewards[player]
      assert np.all(after.legal_action_mask[row]) or not took_last
      np.testing.assert_array_equal(
        after.observation[row], np.arange(max_heap + 1)[None, :] == expected[:, None]
      )


def test_nim_env_transitions_give_the_solver_values_and_the_tree_size():
  """Minimax and game-tree size computed from the environment's own transitions."""
  heaps, _, states, after = _nim_transitions()
  num_actions = NIM.num_actions
  index = {tuple(h): p for p, h in enumerate(heaps.tolist())}
  mask = np.asarray(states.legal_action_mask)
  next_heaps = np.asarray(after.heaps).reshape(len(heaps), num_actions, 3)
  rewards = np.asarray(after.rewards).reshape(len(heaps), num_actions, 2)
  movers = np.asarray(states.current_player)
  values, tree_sizes = {}, {}
  for p in sorted(range(len(heaps)), key=lambda p: heaps[p].sum()):
    if not heaps[p].any():
      values[p], tree_sizes[p] = -1, 1
      continue
    children = [(a, index[tuple(next_heaps[p, a])]) for a in range(num_actions) if mask[p, a]]
    values[p] = max(
      rewards[p, a, movers[p]] if not heaps[c].any() else -values[c] for a, c in children
    )
    tree_sizes[p] = 1 + sum(tree_sizes[c] for _, c in children)
  for p, h in enumerate(heaps.tolist()):
    assert values[p] == solvers.nim_value(h)
  # The full game tree of Nim 3-4-5 has 1,038,768 nodes.
  assert tree_sizes[index[(3, 4, 5)]] == 1_038_768


def test_nim_random_playouts_under_jit_and_vmap():
  batch = 64
  keys = jax.random.split(jax.random.PRNGKey(7), batch)
  states = jax.jit(jax.vmap(NIM.init))(keys)
  first_player = np.asarray(states.current_player)
  total_rewards = np.zeros((batch, 2))
  key = jax.random.PRNGKey(8)
  for _ in range(12):  # 3 + 4 + 5 stones: at most 12 moves
    key, subkey = jax.random.split(key)
    movers = np.asarray(states.current_player)
    was_terminated = np.asarray(states.terminated)
    states = NIM_STEP(states, _random_legal_actions(subkey, states.legal_action_mask))
    rewards = np.asarray(states.rewards)
    ended_now = np.asarray(states.terminated) & ~was_terminated
    # The player who took the last stone gets +1, the other -1; else no reward.
    np.testing.assert_array_equal(rewards[np.arange(batch), movers], ended_now * 1.0)
    np.testing.assert_array_equal(rewards.sum(axis=1), 0)
    total_rewards += rewards
  assert np.all(states.terminated)
  _assert_pgx_dtypes(states)
  np.testing.assert_array_equal(np.abs(total_rewards), 1)
  winners = np.argmax(total_rewards, axis=1)
  # The winner took the last stone, so made the (step_count)-th move.
  moves = np.asarray(states._step_count)
  np.testing.assert_array_equal(winners, np.where(moves % 2 == 1, first_player, 1 - first_player))


def test_nim_transposition_words():
  max_heap = NIM.max_heap
  start = NIM.init_from_heaps((3, 4, 5), 0)
  take_1_from_0 = jnp.int32(0 * max_heap + 0)
  take_1_from_1 = jnp.int32(1 * max_heap + 0)
  take_2_from_2 = jnp.int32(2 * max_heap + 1)
  a = NIM.step(NIM.step(start, take_1_from_0), take_1_from_1)
  b = NIM.step(NIM.step(start, take_1_from_1), take_1_from_0)
  c = NIM.step(start, take_2_from_2)  # 3-4-3, player 1 to move
  d = NIM.init_from_heaps((3, 4, 3), 0)  # 3-4-3, player 0 to move
  words = NIM_WORDS(jax.tree.map(lambda *leaves: jnp.stack(leaves), a, b, c, d, start))
  assert words.dtype == jnp.uint32 and words.shape == (5, 4)
  np.testing.assert_array_equal(words[0], words[1])
  np.testing.assert_array_equal(words[2], words[3])  # who moves is deliberately left out
  np.testing.assert_array_equal(words[0], [2, 3, 5, 0])
  illegal = NIM.step(start, jnp.int32(0 * max_heap + 3))  # take 4 from a heap of 3
  assert bool(illegal.terminated)
  np.testing.assert_array_equal(nim.transposition_words(illegal), [3, 4, 5, 1])


@pytest.mark.parametrize("heaps", ALL_NIM_HEAPS)
def test_nim_solver_agrees_with_xor_formula(heaps):
  assert solvers.nim_value(heaps) == (1 if heaps[0] ^ heaps[1] ^ heaps[2] else -1)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=4))
def test_nim_winning_actions_are_the_xor_zeroing_ones(heaps):
  max_heap = max(max(heaps), 1)
  action_values = solvers.nim_action_values(heaps, max_heap)
  assert len(action_values) == sum(heaps)
  for action, value in action_values.items():
    heap_index, take = action // max_heap, action % max_heap + 1
    after = list(heaps)
    after[heap_index] -= take
    assert value == (1 if functools.reduce(int.__xor__, after) == 0 else -1)
  if action_values:
    assert max(action_values.values()) == solvers.nim_value(heaps)


def test_nim_facts_of_the_uct_chapter():
  """The positions of the chapter "Tìm kiếm cây Monte Carlo" (Monte Carlo tree search;
  its author is not named), which runs UCT with random rollouts on Nim, solved exactly."""
  # Nim 2-4: the first player wins, and the only right first move is taking 2 from
  # heap B (leaving 2-2).
  action_values = solvers.nim_action_values((2, 4), max_heap=4)
  assert solvers.nim_value((2, 4)) == 1
  assert [a for a, v in action_values.items() if v == 1] == [1 * 4 + (2 - 1)]
  # Nim 3-4-5: taking 2 from the first heap (leaving 1-4-5) is the only winning move,
  # and taking 3 from it (MCTS's pick in the chapter) loses.
  action_values = solvers.nim_action_values((3, 4, 5), max_heap=5)
  assert solvers.nim_value((3, 4, 5)) == 1
  assert [a for a, v in action_values.items() if v == 1] == [NIM.action(0, 2)]
  assert action_values[NIM.action(0, 3)] == -1


# ---------------------------------------------------------------------------------
# DAG game

DAG = dag.DagGame(num_actions=3, depth=5, width=6, seed=11, illegal_fraction=0.25)
DAG_INIT_AT = jax.jit(jax.vmap(DAG.init_at))
DAG_STEP = jax.jit(jax.vmap(DAG.step))


def test_dag_is_deterministic_per_seed():
  same = dag.DagGame(num_actions=3, depth=5, width=6, seed=11, illegal_fraction=0.25)
  other = dag.DagGame(num_actions=3, depth=5, width=6, seed=12, illegal_fraction=0.25)
  for name in ("next_index", "legal", "terminal_values"):
    np.testing.assert_array_equal(getattr(DAG, name), getattr(same, name))
  assert not all(
    np.array_equal(getattr(DAG, name), getattr(other, name))
    for name in ("next_index", "legal", "terminal_values")
  )
  np.testing.assert_array_equal(DAG.exact_values(), same.exact_values())


def test_dag_protocol_and_tables():
  assert (DAG.id, DAG.num_players, DAG.num_actions) == ("dag", 2, 3)
  assert DAG.observation_shape == (5 + 1 + 6,)
  assert DAG.next_index.shape == (5, 6, 3) and DAG.legal.shape == (5, 6, 3)
  assert DAG.next_index.min() >= 0 and DAG.next_index.max() < 6
  assert set(DAG.terminal_values.tolist()) <= {-1, 0, 1}
  assert np.all(DAG.legal.any(axis=2)) and not np.all(DAG.legal)
  states = jax.vmap(DAG.init)(jax.random.split(jax.random.PRNGKey(0), 16))
  assert set(np.asarray(states.current_player).tolist()) == {0, 1}
  np.testing.assert_array_equal(states.layer, 0)
  np.testing.assert_array_equal(states.index, 0)
  np.testing.assert_array_equal(states.legal_action_mask, np.tile(DAG.legal[0, 0], (16, 1)))
  _assert_pgx_dtypes(states)
  assert states.observation.shape == (16,) + DAG.observation_shape


def test_dag_every_transition_follows_the_tables():
  layers, indices, actions = (
    a.reshape(-1)
    for a in np.meshgrid(
      np.arange(DAG.depth + 1), np.arange(DAG.width), np.arange(DAG.num_actions), indexing="ij"
    )
  )
  players = (layers + indices) % 2
  states = DAG_INIT_AT(layers, indices, players)
  after = DAG_STEP(states, jnp.asarray(actions, jnp.int32))
  states, after = jax.device_get((states, after))
  for row, (layer, index, action, player) in enumerate(zip(layers, indices, actions, players)):
    rewards = np.asarray(after.rewards[row])
    if layer == DAG.depth:
      assert bool(states.terminated[row]) and np.all(states.legal_action_mask[row])
      assert (int(after.layer[row]), int(after.index[row])) == (layer, index)
      np.testing.assert_array_equal(rewards, [0, 0])
      continue
    legal = DAG.legal[layer, index, action]
    assert bool(states.legal_action_mask[row, action]) == legal
    assert int(after.current_player[row]) == 1 - player
    if not legal:
      assert bool(after.terminated[row]) and rewards[player] == -1
      continue
    next_index = DAG.next_index[layer, index, action]
    assert (int(after.layer[row]), int(after.index[row])) == (layer + 1, next_index)
    assert bool(after.terminated[row]) == (layer + 1 == DAG.depth)
    outcome = DAG.terminal_values[next_index] if layer + 1 == DAG.depth else 0
    assert rewards[player] == outcome and rewards[1 - player] == -outcome


def test_dag_has_transpositions():
  """Two action sequences from the start reach the same state, and the env's
  transposition words agree on it."""
  num_moves = 3
  reached = {}
  for actions in itertools.product(range(DAG.num_actions), repeat=num_moves):
    index, legal = 0, True
    for layer, action in enumerate(actions):
      legal &= bool(DAG.legal[layer, index, action])
      index = DAG.next_index[layer, index, action]
    if legal:
      reached.setdefault(int(index), []).append(actions)
  first, second = next(seqs[:2] for seqs in reached.values() if len(seqs) > 1)
  states = DAG_INIT_AT(jnp.zeros(2, jnp.int32), jnp.zeros(2, jnp.int32), jnp.zeros(2, jnp.int32))
  for ply in range(num_moves):
    states = DAG_STEP(states, jnp.int32([first[ply], second[ply]]))
  words = jax.vmap(dag.transposition_words)(states)
  np.testing.assert_array_equal(words[0], words[1])
  assert int(words[0, 0]) == num_moves and not np.any(states.terminated)


def test_dag_random_playouts_end_after_depth_moves():
  batch = 64
  states = jax.vmap(DAG.init)(jax.random.split(jax.random.PRNGKey(3), batch))
  key = jax.random.PRNGKey(4)
  total_rewards = np.zeros((batch, 2))
  for ply in range(DAG.depth):
    assert not np.any(states.terminated)
    key, subkey = jax.random.split(key)
    movers = np.asarray(states.current_player)
    states = DAG_STEP(states, _random_legal_actions(subkey, states.legal_action_mask))
    total_rewards += np.asarray(states.rewards)
  assert np.all(states.terminated) and np.all(states.legal_action_mask)
  _assert_pgx_dtypes(states)
  np.testing.assert_array_equal(states._step_count, DAG.depth)
  final = DAG.terminal_values[np.asarray(states.index)]
  np.testing.assert_array_equal(total_rewards[np.arange(batch), movers], final)
  np.testing.assert_array_equal(total_rewards.sum(axis=1), 0)


def _brute_force_value(game, layer, index):
  """Minimax without memo, straight from the tables."""
  if layer == game.depth:
    return -int(game.terminal_values[index])
  return max(
    -_brute_force_value(game, layer + 1, game.next_index[layer, index, a])
    for a in np.flatnonzero(game.legal[layer, index])
  )


@settings(max_examples=25, deadline=None)
@given(
  seed=st.integers(0, 2**31 - 1),
  num_actions=st.integers(1, 4),
  depth=st.integers(1, 5),
  width=st.integers(1, 7),
  illegal_fraction=st.sampled_from([0.0, 0.3, 0.7]),
)
def test_dag_exact_values_obey_minimax(seed, num_actions, depth, width, illegal_fraction):
  game = dag.DagGame(num_actions, depth, width, seed, illegal_fraction)
  assert np.all(game.legal.any(axis=2))
  values = solvers.dag_values(game)
  assert values.shape == (depth + 1, width)
  np.testing.assert_array_equal(values[depth], -game.terminal_values)
  for layer in range(depth):
    for index in range(width):
      action_values = game.exact_action_values(layer, index)
      assert sorted(action_values) == np.flatnonzero(game.legal[layer, index]).tolist()
      assert values[layer, index] == max(action_values.values())
      for action, value in action_values.items():
        assert value == -values[layer + 1, game.next_index[layer, index, action]]
  assert values[0, 0] == _brute_force_value(game, 0, 0)
  assert game.exact_action_values(depth, 0) == {}
