"""Tests of the game adapter (`mcgs_jax.games.adapter`) and the evaluators."""

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest

from mcgs_jax._src.logits import mask_invalid_actions
from mcgs_jax.apps import registry
from mcgs_jax.games import adapter, evaluators, search_game
from mcgs_jax.games.nim import Nim

FLOAT32_MIN = np.finfo(np.float32).min


def stack_states(*states):
  """A batch `[B, ...]` from unbatched states."""
  return jax.tree.map(lambda *leaves: jnp.stack(leaves), *states)


def repeat_state(state, batch_size):
  """A batch `[batch_size, ...]` of copies of one unbatched state."""
  return jax.tree.map(lambda leaf: jnp.stack([leaf] * batch_size), state)


def constant_evaluator(value):
  """Logits `0, 1, ..., A-1` (so the masking shift shows) and a constant value."""

  def evaluate(params, rng_key, state):
    del params, rng_key
    num_actions = state.legal_action_mask.shape[-1]
    batch_size = state.legal_action_mask.shape[0]
    logits = jnp.broadcast_to(jnp.arange(num_actions, dtype=jnp.float32), (batch_size, num_actions))
    return logits, jnp.full((batch_size,), value, jnp.float32)

  return evaluate


@pytest.fixture(scope="module")
def connect_four():
  return adapter.make_game("connect_four", constant_evaluator(0.5))


@pytest.fixture(scope="module")
def tic_tac_toe_env():
  return adapter.make_game("tic_tac_toe").env


# In tic_tac_toe, after X: 0, 1 and O: 4, 8, X (to move) wins at once with 2, and O
# has no line of two: random play favours X clearly.
TIC_TAC_TOE_FORCED_WIN = (0, 4, 1, 8)


def test_recurrent_fn_connect_four_conventions(connect_four):
  game = connect_four
  three_stacked = game.play([0, 1, 0, 1, 0, 1])  # the mover wins by playing column 0
  full_column = game.play([0] * 6)  # column 0 full, nobody has won
  won = game.play([0, 1, 0, 1, 0, 1, 0])  # already over
  state = stack_states(three_stacked, three_stacked, full_column, won)
  action = jnp.array([0, 2, 1, 3], jnp.int32)

  output, next_state = jax.jit(game.recurrent_fn)(None, jax.random.PRNGKey(0), action, state)

  np.testing.assert_array_equal(output.reward, [1.0, 0.0, 0.0, 0.0])
  np.testing.assert_array_equal(output.discount, [0.0, -1.0, -1.0, 0.0])
  np.testing.assert_array_equal(output.value, [0.0, 0.5, 0.5, 0.0])
  np.testing.assert_array_equal(next_state.terminated, [True, False, False, True])
  np.testing.assert_array_equal(next_state.current_player[1:3], 1 - state.current_player[1:3])
  logits = np.asarray(output.prior_logits)
  assert np.all(np.isfinite(logits))
  # Column 0 is full after `full_column`: very negative; the others shifted to max 0.
  assert logits[2, 0] == FLOAT32_MIN
  np.testing.assert_array_equal(logits[2, 1:], np.arange(-5.0, 1.0))
  for leaf in jax.tree.leaves((output, next_state)):
    if jnp.issubdtype(leaf.dtype, jnp.floating):
      assert not np.any(np.isnan(leaf))


def test_root_masks_illegal_actions_and_keeps_state(connect_four):
  state = stack_states(connect_four.play([0] * 6), connect_four.play([]))
  root = connect_four.root(None, jax.random.PRNGKey(0), state)
  assert root.prior_logits.shape == (2, 7)
  assert root.prior_logits[0, 0] == FLOAT32_MIN
  np.testing.assert_array_equal(root.value, [0.5, 0.5])
  np.testing.assert_array_equal(connect_four.invalid_actions(state)[0], [True] + [False] * 6)
  assert root.embedding.observation.shape == (2, 0)  # stored without its observation
  chex_equal(root.embedding.replace(observation=state.observation), state)


def chex_equal(tree_a, tree_b):
  leaves_a, structure_a = jax.tree.flatten(tree_a)
  leaves_b, structure_b = jax.tree.flatten(tree_b)
  assert structure_a == structure_b
  for leaf_a, leaf_b in zip(leaves_a, leaves_b):
    np.testing.assert_array_equal(leaf_a, leaf_b)


@pytest.mark.parametrize(
  "spec",
  [
    "connect_four",
    pytest.param("nim:2,3", marks=pytest.mark.slow),
    pytest.param("dag:actions=3,depth=5,width=4,seed=3", marks=pytest.mark.slow),
  ],
)
def test_a_search_without_stored_observations_is_the_same_search(spec):
  """Dropping the observation from the embeddings (the default) changes nothing a
  search computes: same statistics, same stored states but the observation, and the
  evaluator still reads the real observation of every new state."""
  from mcgs_jax import muzero_policy
  from mcgs_jax.testing import to_numpy

  def observation_evaluator(params, rng_key, state):
    del params, rng_key
    features = jnp.reshape(state.observation, (state.observation.shape[0], -1))
    weights = jnp.arange(features.shape[1], dtype=jnp.float32) % 5 - 2.0
    value = jnp.tanh(features.astype(jnp.float32) @ weights / 4)
    num_actions = state.legal_action_mask.shape[-1]
    return jnp.zeros((features.shape[0], num_actions)), value

  outputs = {}
  for store in (True, False):
    game = adapter.make_game(spec, observation_evaluator, store_observation=store)
    state = game.init(jax.random.PRNGKey(3), 4)
    outputs[store] = jax.jit(
      lambda state, game=game: search_game(
        muzero_policy,
        game,
        state,
        24,
        jax.random.PRNGKey(5),
        root_key=jax.random.PRNGKey(4),
        dirichlet_fraction=0.0,  # not what this checks; a smaller program without it
      )
    )(state)
    stored = outputs[store].search_graph.embeddings
    observation_shape = state.observation.shape[1:]
    assert stored.observation.shape[2:] == (observation_shape if store else (0,))
  full, compact = outputs[True].search_graph, outputs[False].search_graph
  np.testing.assert_array_equal(outputs[True].action_weights, outputs[False].action_weights)
  for name, table in to_numpy(full).items():
    np.testing.assert_array_equal(table, to_numpy(compact)[name], err_msg=name)
  chex_equal(
    full.embeddings.replace(observation=compact.embeddings.observation), compact.embeddings
  )
  assert float(np.std(np.asarray(full.raw_values))) > 0  # the evaluator saw observations


def test_all_illegal_logits_are_finite():
  logits = jnp.array([[0.0, 3.0], [1.0, 2.0]])
  invalid = jnp.array([[True, True], [True, False]])
  masked = np.asarray(mask_invalid_actions(logits, invalid))
  np.testing.assert_array_equal(masked, [[FLOAT32_MIN, FLOAT32_MIN], [FLOAT32_MIN, 0.0]])


def test_init_and_step_are_batched(connect_four):
  state = jax.jit(connect_four.init, static_argnums=1)(jax.random.PRNGKey(1), 5)
  keys = jax.jit(connect_four.hash_fn)(state)
  stepped = jax.jit(connect_four.step)(state, jnp.zeros(5, jnp.int32))
  assert state.legal_action_mask.shape == (5, 7)
  assert keys.shape == (5, 2) and keys.dtype == jnp.uint32
  np.testing.assert_array_equal(stepped.current_player, 1 - state.current_player)


@pytest.fixture(scope="module")
def forced_win_rollouts(tic_tac_toe_env):
  """64 copies of `TIC_TAC_TOE_FORCED_WIN` and jitted rollout evaluators on it."""
  game = adapter.make_game(tic_tac_toe_env)
  state = repeat_state(game.play(TIC_TAC_TOE_FORCED_WIN), 64)
  evaluate = {
    num_rollouts: jax.jit(evaluators.rollout_evaluator(tic_tac_toe_env, num_rollouts=num_rollouts))
    for num_rollouts in (1, 16)
  }
  return state, evaluate


def test_rollout_evaluator_is_reproducible_and_bounded(forced_win_rollouts):
  state, evaluate = forced_win_rollouts
  logits, value = evaluate[1](None, jax.random.PRNGKey(0), state)
  _, same_value = evaluate[1](None, jax.random.PRNGKey(0), state)
  _, other_value = evaluate[1](None, jax.random.PRNGKey(1), state)

  assert logits.shape == (64, 9) and value.shape == (64,)
  np.testing.assert_array_equal(logits, np.zeros((64, 9)))
  np.testing.assert_array_equal(value, same_value)
  assert not np.array_equal(value, other_value)
  assert np.all(np.abs(value) <= 1.0)


def test_rollout_evaluator_is_vmappable_and_zero_when_finished(tic_tac_toe_env):
  game = adapter.make_game(tic_tac_toe_env)
  x_won = game.play([0, 3, 1, 4, 2])
  assert bool(x_won.terminated)
  state = stack_states(game.play(TIC_TAC_TOE_FORCED_WIN), x_won)
  evaluate = evaluators.rollout_evaluator(tic_tac_toe_env, num_rollouts=2)
  keys = jax.random.split(jax.random.PRNGKey(2), 3)

  _, values = jax.jit(jax.vmap(evaluate, in_axes=(None, 0, None)))(None, keys, state)
  _, first_values = jax.jit(evaluate)(None, keys[0], state)

  assert values.shape == (3, 2)
  np.testing.assert_array_equal(values[0], first_values)
  np.testing.assert_array_equal(values[:, 1], [0.0, 0.0, 0.0])


def test_rollouts_favour_the_player_with_a_forced_win(forced_win_rollouts):
  state, evaluate = forced_win_rollouts
  _, single_values = evaluate[1](None, jax.random.PRNGKey(0), state)
  _, averaged_values = evaluate[16](None, jax.random.PRNGKey(0), state)

  assert np.mean(averaged_values) > 0.25  # about 0.45 for uniform random play
  assert np.all(np.abs(averaged_values) <= 1.0)
  assert np.std(averaged_values) < 0.5 * np.std(single_values)


def test_rollout_evaluator_rejects_bad_arguments(tic_tac_toe_env):
  with pytest.raises(ValueError, match="num_rollouts"):
    evaluators.rollout_evaluator(tic_tac_toe_env, num_rollouts=0)
  with pytest.raises(ValueError, match="max_steps"):
    evaluators.rollout_evaluator(tic_tac_toe_env, max_steps=0)


def test_network_evaluator_with_mlp(connect_four):
  apply_fn, params = evaluators.init_network(connect_four.env, jax.random.PRNGKey(0), hidden=(16,))
  game = adapter.make_game(connect_four.env, evaluators.network_evaluator(apply_fn))
  state = jax.jit(game.init, static_argnums=1)(jax.random.PRNGKey(1), 4)

  logits, value = jax.jit(game.evaluator)(params, jax.random.PRNGKey(2), state)
  root = jax.jit(game.root)(params, jax.random.PRNGKey(2), state)

  assert logits.shape == (4, 7) and value.shape == (4,)
  assert logits.dtype == jnp.float32 and value.dtype == jnp.float32
  assert np.all(np.isfinite(logits)) and np.all(np.abs(value) <= 1.0)
  assert np.all(np.isfinite(root.prior_logits)) and root.value.shape == (4,)


def test_uniform_is_the_default_evaluator():
  game = adapter.make_game("tic_tac_toe")
  state = game.init(jax.random.PRNGKey(0), 3)
  root = game.root(None, jax.random.PRNGKey(0), state)
  np.testing.assert_array_equal(root.prior_logits, np.zeros((3, 9)))
  np.testing.assert_array_equal(root.value, np.zeros(3))


@pytest.mark.parametrize(
  "spec",
  [
    "no_such_game",
    "connect_four:7",
    "kuhn_poker",
    "nim:a,b",
    "nim:0,0",
    "dag:colour=3",
    "dag:depth",
  ],
)
def test_make_game_rejects_unknown_specs(spec):
  with pytest.raises(ValueError):
    adapter.make_game(spec)


def test_make_game_rejects_an_env_without_a_key():
  with pytest.raises(ValueError, match="transposition"):
    adapter.make_game(object())


@pytest.mark.parametrize(
  "moves, message",
  [
    ([3, 7], r"move 1 \(7\) is out of range"),
    ([3, -1], r"move 1 \(-1\) is out of range"),
    ([0] * 7, r"move 6 \(0\) is illegal"),
    ([0, 1, 0, 1, 0, 1, 0, 2], r"move 7 \(2\) is played after the game ended"),
  ],
)
def test_play_rejects_bad_moves(connect_four, moves, message):
  with pytest.raises(ValueError, match=message):
    connect_four.play(moves)


def test_nim_rewards_taking_the_last_stone():
  game = adapter.make_game("nim:3,4,5")
  env = game.env
  assert isinstance(env, Nim) and game.num_actions == 15
  only_last_heap = game.play([env.action(0, 3), env.action(1, 4)])  # heaps (0, 0, 5)
  state = repeat_state(only_last_heap, 2)
  action = jnp.array([env.action(2, 5), env.action(2, 1)], jnp.int32)

  output, next_state = jax.jit(game.recurrent_fn)(None, jax.random.PRNGKey(0), action, state)

  np.testing.assert_array_equal(output.reward, [1.0, 0.0])
  np.testing.assert_array_equal(output.discount, [0.0, -1.0])
  np.testing.assert_array_equal(next_state.terminated, [True, False])
  # After taking one stone, only the takes of 1..4 from the last heap remain legal.
  legal = np.asarray(output.prior_logits[1]) > FLOAT32_MIN
  np.testing.assert_array_equal(np.flatnonzero(legal), [10, 11, 12, 13])
  assert game.hash_fn(state).shape == (2, 2)


def test_dag_spec_arguments():
  game = adapter.make_game("dag:actions=3,depth=6,width=5,seed=0", lanes=4)
  assert game.num_actions == 3
  assert (game.env.depth, game.env.width) == (6, 5)
  state = game.init(jax.random.PRNGKey(0), 2)
  assert game.hash_fn(state).shape == (2, 4)


def test_mctx_muzero_policy_runs_on_the_adapter():
  game = adapter.make_game("connect_four")

  @jax.jit
  def search(rng_key):
    init_key, search_key = jax.random.split(rng_key)
    state = game.init(init_key, 4)
    root = game.root(None, search_key, state)
    return mctx.muzero_policy(
      None,
      search_key,
      root,
      game.recurrent_fn,
      num_simulations=16,
      invalid_actions=game.invalid_actions(state),
    )

  output = search(jax.random.PRNGKey(0))
  weights = np.asarray(output.action_weights)
  assert weights.shape == (4, 7)
  assert not np.any(np.isnan(weights))
  np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-5)


def test_game_is_a_static_argument_of_jit(connect_four):
  @jax.jit
  def first_rewards(state):
    output, _ = connect_four.recurrent_fn(
      None, jax.random.PRNGKey(0), jnp.zeros(2, jnp.int32), state
    )
    return output.reward

  reward_via_static = jax.jit(
    lambda game, state: (
      game.recurrent_fn(None, jax.random.PRNGKey(0), jnp.zeros(2, jnp.int32), state)[0].reward
    ),
    static_argnums=0,
  )
  state = connect_four.init(jax.random.PRNGKey(0), 2)
  np.testing.assert_array_equal(first_rewards(state), reward_via_static(connect_four, state))


def test_rollout_value_on_a_one_move_dag_is_the_mean_outcome():
  game = adapter.make_game("dag:actions=4,depth=1,width=6,seed=3")
  env = game.env
  outcomes = env.terminal_values[env.next_index[0, 0]]  # for the mover, per action
  evaluate = evaluators.rollout_evaluator(env, num_rollouts=4000)
  _, value = jax.jit(evaluate)(None, jax.random.PRNGKey(0), game.init(jax.random.PRNGKey(1), 2))
  np.testing.assert_allclose(value, np.mean(outcomes), atol=0.05)


@pytest.mark.quick_variants("muzero")
@pytest.mark.parametrize("policy", registry.POLICY_NAMES)
def test_a_finished_root_is_terminal(tic_tac_toe_env, policy):
  """pgx marks every action legal once the game is over; the adapter makes them all
  invalid, so a finished root is terminal: nothing is searched, the weights are all
  zero and the action is 0, beside a live game searched as usual."""

  game = adapter.make_game(tic_tac_toe_env)
  x_won = game.play([0, 3, 1, 4, 2])
  assert bool(x_won.terminated) and bool(np.all(x_won.legal_action_mask))
  state = stack_states(x_won, game.play([0, 4]))
  invalid = game.invalid_actions(state)
  np.testing.assert_array_equal(invalid[0], [True] * 9)
  np.testing.assert_array_equal(invalid[1], ~np.asarray(state.legal_action_mask[1]))
  run = registry.POLICIES[policy]

  @jax.jit
  def search(key):
    return search_game(run, game, state, 16, key, solver=True)

  out = search(jax.random.PRNGKey(0))
  graph = out.search_graph
  weights = np.asarray(out.action_weights)
  assert bool(graph.node_terminal[0, 0]) and not bool(graph.node_terminal[1, 0])
  np.testing.assert_array_equal(weights[0], np.zeros(9))
  assert int(out.action[0]) == 0
  assert int(graph.num_nodes[0]) == 1 and int(np.sum(graph.edge_visits[0])) == 0
  np.testing.assert_allclose(weights[1].sum(), 1.0, rtol=1e-5)
  assert not invalid[1, int(out.action[1])]


def test_make_game_2048_returns_the_game_with_chance():
  """`make_game("2048")` hands back what `stochastic_muzero_policy` takes (2048 split
  at its afterstate), on pgx's 4x4 board or on a smaller one."""
  from mcgs_jax.games import play2048

  game = adapter.make_game("2048")
  assert isinstance(game, play2048.Stochastic2048)
  assert (game.size, game.num_chance_outcomes) == (4, 32)
  assert adapter.make_game("2048:3").size == 3
  with pytest.raises(ValueError, match="2048"):
    adapter.make_game("2049")


@pytest.mark.parametrize("spec", ["nim:", "dag:", "2048:"])
def test_a_spec_with_an_empty_argument_list_is_refused(spec):
  """`nim:` used to play the default heaps silently: a colon promises arguments."""
  with pytest.raises(ValueError, match="after ':'|must be an integer in"):
    adapter.make_game(spec)
