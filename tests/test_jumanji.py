"""jumanji's environments as games (`make_game("jumanji:<env id>")`): the wrapper
plays as jumanji does, its keys merge what commutes and keep apart what differs,
and a search on it is sound and, as a tree, mctx's."""

import functools
import pathlib
import subprocess
import sys

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

jumanji = pytest.importorskip("jumanji")

import mctx  # noqa: E402

import mcgs_jax as mg  # noqa: E402
from mcgs_jax.games import jumanji_env as je  # noqa: E402
from mcgs_jax.games import make_game, search_game  # noqa: E402
from mcgs_jax.testing import check_graph  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
WRITTEN = tuple(je.JUMANJI_KEY_CONTENTS)
# Steps per episode test: past every time limit (Rubik's 20 and 200, sliding tiles
# 500), every Sudoku, Knapsack, TSP and Minesweeper episode; 2048 is cut at 300.
EPISODE_STEPS = {
  "Sudoku-v0": 82,
  "Sudoku-very-easy-v0": 82,
  "Knapsack-v1": 51,
  "TSP-v1": 21,
  "RubiksCube-v0": 202,
  "RubiksCube-partly-scrambled-v0": 22,
  "SlidingTilePuzzle-v0": 502,
  "Minesweeper-v0": 101,
  "Game2048-v1": 300,
  "Cleaner-v0": 102,
}


# Random play never solves these (test_solving_the_cube_pays_one_and_ends_the_episode
# checks the reward of a solve).
NEVER_PAID = ("Sudoku-v0", "RubiksCube-v0", "RubiksCube-partly-scrambled-v0")


@functools.cache
def game_of(env_id):
  return make_game(f"jumanji:{env_id}")


@functools.cache
def stepper(env_id):
  """Jitted unbatched `init`, `step` and key words of the env's wrapper."""
  env = game_of(env_id).env
  return jax.jit(env.init), jax.jit(env.step), jax.jit(env.transposition_words)


def play(env_id, actions, key=0):
  """The wrapper's state after `actions` from `init(PRNGKey(key))`, and its key words."""
  init, step, words = stepper(env_id)
  state = init(jax.random.PRNGKey(key))
  for action in actions:
    assert bool(state.legal_action_mask[action]), f"action {action} is not legal"
    state = step(state, jnp.int32(action))
  return state, np.asarray(words(state))


def reference_action(sizes, flat):
  """jumanji's action of a flat index, by the test's own arithmetic (row-major)."""
  parts = []
  for size in reversed(sizes):
    parts.append(flat % size)
    flat = flat // size
  return jnp.stack(parts[::-1]).astype(jnp.int32)


def reference_mask(env, observation):
  """bool [A]: jumanji's mask read at each flat action's multi-index (per agent: every
  agent's part legal), or all True without a mask."""
  sizes, count = env.action_sizes, env.num_actions
  mask = getattr(observation, "action_mask", None)
  if mask is None:
    return jnp.ones(count, jnp.bool_)
  indices = jax.vmap(lambda i: reference_action(sizes, i))(jnp.arange(count))
  if mask.shape == tuple(sizes):
    return mask[tuple(indices.T)]
  return jnp.all(mask[jnp.arange(len(sizes))[None, :], indices], axis=1)


def both_episodes(env, key, steps):
  """One random legal episode, stepped by the wrapper and by jumanji side by side."""
  raw = env.env
  discrete = np.ndim(np.asarray(raw.action_spec.num_values)) == 0
  ours = env.init(key)
  theirs, timestep = raw.reset(key)

  def one(carry, step_key):
    ours, theirs, done = carry
    logits = jnp.where(ours.legal_action_mask, 0.0, -jnp.inf)
    flat = jax.random.categorical(step_key, logits).astype(jnp.int32)
    action = flat if discrete else reference_action(env.action_sizes, flat)
    ours = env.step(ours, flat)
    stepped, timestep = raw.step(theirs, action)
    theirs = jax.tree.map(lambda a, b: jnp.where(done, a, b), theirs, stepped)
    reward = jnp.where(done, 0.0, timestep.reward)
    done = done | timestep.last()
    our_end = ours.terminated | ours.truncated
    masks = (ours.legal_action_mask, reference_mask(env, timestep.observation))
    return (ours, theirs, done), (ours.rewards[0], reward, our_end, done, *masks)

  start = (ours.legal_action_mask, reference_mask(env, timestep.observation))
  _, rows = jax.lax.scan(one, (ours, theirs, jnp.bool_(False)), jax.random.split(key, steps))
  return start, rows


@pytest.mark.parametrize("env_id", WRITTEN + ("Cleaner-v0",))
@pytest.mark.quick_variants("Sudoku-v0", "Knapsack-v1", "TSP-v1")
def test_the_wrapper_plays_as_jumanji(env_id):
  env = game_of(env_id).env
  run = jax.jit(jax.vmap(lambda key: both_episodes(env, key, EPISODE_STEPS[env_id])))
  start, rows = jax.device_get(run(jax.random.split(jax.random.PRNGKey(7), 3)))
  ours, theirs, our_end, their_end, our_mask, their_mask = rows
  np.testing.assert_array_equal(ours, theirs)  # every step's reward, so every return
  np.testing.assert_array_equal(ours.sum(axis=1), theirs.sum(axis=1))
  np.testing.assert_array_equal(our_end, their_end)  # the episode ends at the same step
  if env_id != "Game2048-v1":
    assert our_end[:, -1].all(), "an episode outlived the steps the test allows"
  np.testing.assert_array_equal(start[0], start[1])
  live = ~their_end  # the mask of every state not over
  np.testing.assert_array_equal(our_mask[live], their_mask[live])
  if env_id not in NEVER_PAID:
    assert (ours != 0).any(), "no reward was ever paid"


def test_multi_discrete_actions_flatten_row_major():
  sudoku, cube = game_of("Sudoku-very-easy-v0").env, game_of("RubiksCube-v0").env
  assert (sudoku.num_actions, sudoku.action_sizes) == (729, (9, 9, 9))
  assert (cube.num_actions, cube.action_sizes) == (18, (6, 1, 3))
  np.testing.assert_array_equal(sudoku.unflatten_action(81 * 4 + 9 * 7 + 2), [4, 7, 2])
  np.testing.assert_array_equal(cube.unflatten_action(3 * 5 + 2), [5, 0, 2])
  state, _ = play("Sudoku-very-easy-v0", [])
  board = np.asarray(state.env_state.board)
  mask = np.asarray(state.legal_action_mask).reshape(9, 9, 9)
  assert not mask[board != -1].any(), "a filled cell has a legal digit"
  np.testing.assert_array_equal(mask, np.asarray(state.env_state.action_mask))


def legal_pair(state):
  """Two legal Sudoku actions in different cells, rows, columns and boxes."""
  legal = np.flatnonzero(np.asarray(state.legal_action_mask))
  cells = [divmod(int(a) // 9, 9) for a in legal]
  for i, (r1, c1) in enumerate(cells):
    for j, (r2, c2) in enumerate(cells):
      if r1 != r2 and c1 != c2 and (r1 // 3, c1 // 3) != (r2 // 3, c2 // 3):
        return int(legal[i]), int(legal[j])
  raise AssertionError("no two independent legal actions")


def test_sudoku_keys_merge_fill_orders():
  start, _ = play("Sudoku-v0", [])
  a, b = legal_pair(start)
  one, one_words = play("Sudoku-v0", [a, b])
  other, other_words = play("Sudoku-v0", [b, a])
  np.testing.assert_array_equal(one_words, other_words)
  np.testing.assert_array_equal(one.env_state.board, other.env_state.board)
  assert not np.array_equal(play("Sudoku-v0", [a])[1], play("Sudoku-v0", [b])[1])
  # Another puzzle is another key, even with the same cells filled.
  assert not np.array_equal(play("Sudoku-v0", [], key=1)[1], play("Sudoku-v0", [])[1])


def budget_split_pair(weights, budget):
  """Items `(i, j)` whose float32 budgets `budget - w_i - w_j` and `budget - w_j - w_i`
  differ, as jumanji subtracts them."""
  w = np.asarray(weights, np.float32)
  b = np.float32(budget)
  for i in range(len(w)):
    for j in range(i + 1, len(w)):
      if (b - w[i]) - w[j] != (b - w[j]) - w[i]:
        return i, j
  raise AssertionError("no pair of items rounds differently")


def test_knapsack_keys_merge_packing_orders_whatever_the_rounding():
  start, _ = play("Knapsack-v1", [])
  i, j = budget_split_pair(start.env_state.weights, start.env_state.remaining_budget)
  k = next(x for x in range(50) if x not in (i, j))
  one, one_words = play("Knapsack-v1", [i, j, k])
  other, other_words = play("Knapsack-v1", [j, k, i])
  np.testing.assert_array_equal(one.env_state.packed_items, other.env_state.packed_items)
  # The float sums differ (order (i, j) vs (j, i) rounds differently), the keys do not.
  budgets = [
    np.asarray(s.env_state.remaining_budget)
    for s in (play("Knapsack-v1", [i, j])[0], play("Knapsack-v1", [j, i])[0])
  ]
  assert budgets[0].tobytes() != budgets[1].tobytes()
  np.testing.assert_array_equal(play("Knapsack-v1", [i, j])[1], play("Knapsack-v1", [j, i])[1])
  np.testing.assert_array_equal(one_words, other_words)
  assert not np.array_equal(one_words, play("Knapsack-v1", [i, j])[1])  # another packed set
  assert not np.array_equal(play("Knapsack-v1", [i])[1], play("Knapsack-v1", [j])[1])


def test_tsp_keys_merge_visit_orders_but_keep_the_start_city():
  orders = {"s0": [0, 1, 2, 3], "s0_swapped": [0, 2, 1, 3], "s1": [1, 0, 2, 3]}
  states = {name: play("TSP-v1", order) for name, order in orders.items()}
  np.testing.assert_array_equal(states["s0"][1], states["s0_swapped"][1])
  assert not np.array_equal(
    states["s0"][0].env_state.trajectory, states["s0_swapped"][0].env_state.trajectory
  )
  # Same visited set and current city, another start: the return leg differs.
  assert not np.array_equal(states["s0"][1], states["s1"][1])
  assert not np.array_equal(states["s0"][1], play("TSP-v1", [0, 1, 2, 4])[1])  # another city


UP_CLOCKWISE, UP_ANTICLOCKWISE, DOWN_CLOCKWISE = 0, 1, 15  # face * 3 + amount


def test_rubiks_keys_merge_opposite_faces_and_keep_step_counts():
  env_id = "RubiksCube-partly-scrambled-v0"
  start, start_words = play(env_id, [])
  one, one_words = play(env_id, [UP_CLOCKWISE, DOWN_CLOCKWISE])
  other, other_words = play(env_id, [DOWN_CLOCKWISE, UP_CLOCKWISE])
  np.testing.assert_array_equal(one.env_state.cube, other.env_state.cube)
  np.testing.assert_array_equal(one_words, other_words)
  back, back_words = play(env_id, [UP_CLOCKWISE, UP_ANTICLOCKWISE])
  np.testing.assert_array_equal(back.env_state.cube, start.env_state.cube)  # the same cube
  assert not np.array_equal(back_words, start_words)  # two steps later: fewer remain


def test_solving_the_cube_pays_one_and_ends_the_episode():
  _, step, _ = stepper("RubiksCube-v0")
  start, _ = play("RubiksCube-v0", [])
  solved = jnp.broadcast_to(
    jnp.arange(6, dtype=start.env_state.cube.dtype)[:, None, None], (6, 3, 3)
  )
  state = start.replace(env_state=start.env_state.replace(cube=solved))
  turned = step(state, jnp.int32(UP_CLOCKWISE))
  assert float(turned.rewards[0]) == 0.0 and not bool(turned.terminated)
  done = step(turned, jnp.int32(UP_ANTICLOCKWISE))
  assert float(done.rewards[0]) == 1.0 and bool(done.terminated) and not bool(done.truncated)
  after = step(done, jnp.int32(UP_CLOCKWISE))  # a finished state does not move
  assert float(after.rewards[0]) == 0.0
  np.testing.assert_array_equal(after.env_state.cube, solved)


def with_prng_key(state, seed):
  return state.replace(env_state=state.env_state.replace(key=jax.random.PRNGKey(seed)))


@pytest.mark.parametrize("env_id", WRITTEN + ("Maze-v0",))
def test_the_prng_key_enters_a_key_only_where_step_draws_from_it(env_id):
  state, words = play(env_id, [])
  other = np.asarray(stepper(env_id)[2](with_prng_key(state, 12345)))
  draws = env_id in ("Game2048-v1", "Maze-v0")  # 2048's tiles; Maze has the exact key
  assert np.array_equal(words, other) != draws
  assert (game_of(env_id).env.key_contents == je.EXACT_KEY_CONTENTS) == (env_id == "Maze-v0")


def test_2048_orders_meet_at_equal_depth():
  # The key splits once per step whatever the move: same board, same depth, one key.
  init, step, words = stepper("Game2048-v1")
  state = init(jax.random.PRNGKey(5))
  firsts = [step(state, jnp.int32(a)) for a in range(4) if state.legal_action_mask[a]]
  ends = [step(s, jnp.int32(b)) for s in firsts for b in range(4) if s.legal_action_mask[b]]
  keys = {np.asarray(words(s)).tobytes(): np.asarray(s.env_state.board).tobytes() for s in ends}
  boards = {np.asarray(s.env_state.board).tobytes() for s in ends}
  assert len(boards) < len(ends)  # some two-move orders reach one board
  assert len(keys) == len(boards)  # one key per board, and no board split


def test_stored_states_step_exactly():
  game = game_of("Sudoku-very-easy-v0")
  state = game.init(jax.random.PRNGKey(0), 2)
  action = jnp.argmax(state.legal_action_mask, axis=-1)
  full, stored = jax.jit(game.step)(state, action), jax.jit(game.step)(game.stored(state), action)
  assert game.stored(state).observation.shape == (2, 0)
  chex.assert_trees_all_equal(full, stored)


def test_refusals_say_why():
  with pytest.raises(ValueError, match=r"16,679,880,978,201 joint actions.*MAX_ACTIONS"):
    make_game("jumanji:JobShop-v0")
  with pytest.raises(ValueError, match=r"unknown jumanji env 'Sudoku-v1'.*'Sudoku-v0'"):
    make_game("jumanji:Sudoku-v1")
  with pytest.raises(ValueError, match=r"multi-agent"):
    make_game("jumanji:LevelBasedForaging-v0")
  with pytest.raises(ValueError, match=r"BoundedArray, not a DiscreteArray"):
    make_game("jumanji:MultiCVRP-v0")


def test_without_jumanji_the_package_imports_and_refuses_with_the_install_line():
  code = (
    "import sys; sys.modules['jumanji'] = None\n"
    "import mcgs_jax.games, mcgs_jax.games.jumanji_env\n"
    "from mcgs_jax.games import make_game\n"
    "try:\n  make_game('jumanji:Sudoku-v0')\nexcept ValueError as e:\n  print(e)\n"
  )
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
  assert out.returncode == 0, out.stderr[-2000:]
  assert "pip install 'mcgs-jax[jumanji]'" in out.stdout


@chex.dataclass(frozen=True)
class CounterState:
  count: chex.Array  # int32 []
  key: chex.Array  # uint32 [2]


class DiscountedCounter:
  """A jumanji-style env: reward = action, discount 0.5, cut off (truncated, discount
  1) after 3 steps."""

  action_spec = jumanji.specs.DiscreteArray(2)

  def reset(self, key):
    return CounterState(count=jnp.int32(0), key=key), jumanji.types.restart(jnp.zeros(1))

  def step(self, state, action):
    state = state.replace(count=state.count + 1)
    reward = jnp.asarray(action, jnp.float32)
    observation = jnp.asarray(state.count, jnp.float32)[None]
    mid = jumanji.types.transition(reward, observation, discount=jnp.float32(0.5))
    cut = jumanji.types.truncation(reward, observation)
    return state, jax.tree.map(lambda a, b: jnp.where(state.count >= 3, a, b), cut, mid)


def test_env_discounts_and_truncation_reach_the_search():
  game = make_game(je.JumanjiEnv(DiscountedCounter()))
  assert game.env.key_contents == je.EXACT_KEY_CONTENTS
  state = game.init(jax.random.PRNGKey(0), 1)
  discounts, rewards = [], []
  for _ in range(3):
    output, state = game.recurrent_fn(None, jax.random.PRNGKey(1), jnp.ones(1, jnp.int32), state)
    discounts.append(float(output.discount[0]))
    rewards.append(float(output.reward[0]))
  assert discounts == [0.5, 0.5, 0.0] and rewards == [1.0, 1.0, 1.0]
  assert bool(state.truncated[0]) and not bool(state.terminated[0])


def test_graph_search_on_sudoku_finds_transpositions_soundly():
  game, sims = game_of("Sudoku-very-easy-v0"), 64
  state = game.init(jax.random.PRNGKey(0), 2)
  run = jax.jit(lambda key: search_game(mg.muzero_policy, game, state, sims, key))
  graph = run(jax.random.PRNGKey(1)).search_graph
  assert (np.asarray(graph.transposition_hits) > 0).all(), graph.transposition_hits
  check_graph(graph, sims, tree_mode=False)


def test_tree_mode_matches_mctx_on_knapsack():
  game, sims = game_of("Knapsack-v1"), 24
  state = game.init(jax.random.PRNGKey(0), 4)

  @jax.jit
  def both(key):
    root = game.root(None, key, state)
    invalid = game.invalid_actions(state)
    mctx_root = mctx.RootFnOutput(
      prior_logits=root.prior_logits, value=root.value, embedding=root.embedding
    )
    theirs = mctx.muzero_policy(
      None, key, mctx_root, game.recurrent_fn, sims, invalid_actions=invalid
    )
    ours = mg.muzero_policy(
      None, key, root, game.recurrent_fn, sims, invalid_actions=invalid, transpositions=False
    )
    return theirs, ours

  theirs, ours = both(jax.random.PRNGKey(3))
  np.testing.assert_array_equal(ours.action, theirs.action)
  np.testing.assert_array_equal(ours.action_weights, theirs.action_weights)
  np.testing.assert_array_equal(
    ours.search_graph.summary().visit_counts, theirs.search_tree.summary().visit_counts
  )


def docs_table() -> dict[str, str]:
  text = (ROOT / "docs" / "games.md").read_text()
  section = text.split("## jumanji environments", 1)[1].split("\n## ", 1)[0]
  rows = [line.split(" | ", 1) for line in section.splitlines() if line.startswith("| `")]
  return {env.strip("| `"): key.rstrip(" |") for env, key in rows}


def test_docs_list_every_written_key_as_the_code_does():
  assert docs_table() == je.JUMANJI_KEY_CONTENTS
  assert je.EXACT_KEY_CONTENTS in (ROOT / "docs" / "games.md").read_text()
