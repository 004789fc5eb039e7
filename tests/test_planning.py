"""Planning on jumanji's environments (issue 58): the exact references against brute
force, episodes played by each engine against those references, the
`mcgs-jax evaluate` command, and one-player training (return-to-go value targets,
value bounds of the network)."""

import dataclasses
import itertools
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("jumanji")
pytest.importorskip("ortools")

from mcgs_jax.apps.arena.agent import Agent  # noqa: E402
from mcgs_jax.apps.cli import evaluate_command  # noqa: E402
from mcgs_jax.apps.planning import episodes  # noqa: E402
from mcgs_jax.games import make_game, networks, optima  # noqa: E402


def _brute_knapsack(weights, values, budget):
  best = 0.0
  for chosen in itertools.product([False, True], repeat=len(weights)):
    chosen = np.array(chosen)
    if np.sum(weights[chosen]) <= budget:
      best = max(best, float(np.sum(values[chosen])))
  return best


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), count=st.integers(1, 10))
def test_knapsack_optimum_equals_brute_force(seed, count):
  rng = np.random.default_rng(seed)
  weights = rng.uniform(0, 1, count).astype(np.float32)
  values = rng.uniform(0, 1, count).astype(np.float32)
  budget = float(rng.uniform(0, count / 2))
  assert optima.knapsack_optimum(weights, values, budget) == pytest.approx(
    _brute_knapsack(weights.astype(np.float64), values.astype(np.float64), budget), abs=1e-5
  )


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), count=st.integers(3, 7))
def test_tsp_optimum_equals_brute_force(seed, count):
  points = np.random.default_rng(seed).uniform(0, 1, (count, 2)).astype(np.float32)
  best = min(
    optima.tour_length(points, [0, *order]) for order in itertools.permutations(range(1, count))
  )
  assert optima.tsp_optimum(points) == pytest.approx(best, rel=1e-6)


def test_exact_references_of_the_jumanji_instances():
  """Knapsack's optimum fits the instance's budget and no random packing beats it;
  TSP's is minus a tour no random tour beats; puzzles are solvable (1)."""
  rng = np.random.default_rng(0)
  knapsack = make_game("jumanji:Knapsack-v1")
  state = episodes.instances(knapsack, 2, seed=0)
  best = optima.optimal_returns(knapsack.env, state)
  for b in range(2):
    weights = np.asarray(state.env_state.weights[b])
    values = np.asarray(state.env_state.values[b])
    for _ in range(200):
      order = rng.permutation(len(weights))
      fits = np.cumsum(weights[order]) <= knapsack.env.env.total_budget
      assert np.sum(values[order][fits]) <= best[b] + 1e-5
  tsp = make_game("jumanji:TSP-v1")
  state = episodes.instances(tsp, 2, seed=0)
  best = optima.optimal_returns(tsp.env, state)
  for b in range(2):
    points = np.asarray(state.env_state.coordinates[b])
    assert best[b] < 0
    for _ in range(200):
      assert optima.tour_length(points, list(rng.permutation(len(points)))) >= -best[b] - 1e-5
  sudoku = make_game("jumanji:Sudoku-very-easy-v0")
  assert np.all(optima.optimal_returns(sudoku.env, episodes.instances(sudoku, 2, 0)) == 1.0)
  with pytest.raises(ValueError, match="no exact reference"):
    optima.optimal_returns(make_game("jumanji:Minesweeper-v0").env, None)


def test_instances_do_not_depend_on_how_many_are_drawn():
  game = make_game("jumanji:Knapsack-v1")
  few, many = episodes.instances(game, 2, seed=3), episodes.instances(game, 5, seed=3)
  np.testing.assert_array_equal(few.env_state.weights, many.env_state.weights[:2])
  other = episodes.instances(game, 2, seed=4)
  assert not np.array_equal(few.env_state.weights, other.env_state.weights)


@pytest.mark.parametrize("engine", ["graph", "tree", "mctx"])
@pytest.mark.quick_variants("graph")
def test_episodes_reach_at_most_the_optimum_and_repeat_under_one_seed(engine):
  game = make_game("jumanji:Knapsack-v1")
  if engine == "mctx":
    agent = Agent(policy="muzero", evaluator="uniform", num_simulations=8, engine="mctx")
  else:
    agent = Agent(
      policy="muzero", evaluator="uniform", num_simulations=8, transpositions=engine == "graph"
    )
  first = episodes.play_episodes(game, agent, num_instances=3, seed=1)
  again = episodes.play_episodes(game, agent, num_instances=3, seed=1, optimal=first.optimal)
  np.testing.assert_array_equal(first.returns, again.returns)
  assert np.all(first.returns <= first.optimal + 1e-5) and np.all(first.returns > 0)
  assert np.all(first.gap >= -1e-6) and first.solved is None
  assert np.all(first.steps >= 1) and np.all(first.steps <= 50)
  if engine != "graph":
    assert first.hits_per_simulation == 0.0


@pytest.mark.slow
def test_a_solved_sudoku_is_counted_and_merges_are_found():
  game = make_game("jumanji:Sudoku-very-easy-v0")
  agent = Agent(policy="muzero", evaluator="rollout", num_simulations=16)
  result = episodes.play_episodes(game, agent, num_instances=2, seed=0)
  np.testing.assert_array_equal(result.solved, result.returns >= 1.0)
  assert result.hits_per_simulation > 0
  summary = result.summary()
  assert summary["solved"] == np.mean(result.solved)
  assert summary["mean_gap"] == pytest.approx(1.0 - np.mean(result.returns))


@pytest.mark.slow
def test_evaluate_command_reports_every_engine(capsys):
  argv = ["--game", "jumanji:Knapsack-v1", "--instances", "2", "--simulations", "4"]
  assert evaluate_command.main(argv + ["--evaluator", "uniform", "--json"]) == 0
  report = json.loads(capsys.readouterr().out)
  assert [row["agent"] for row in report["engines"]] == ["graph", "tree", "mctx"]
  assert report["held_equal"] == "simulations per step"
  for row in report["engines"]:
    assert row["instances"] == 2 and row["mean_gap"] >= -1e-6 and row["solved"] is None


@pytest.mark.parametrize(
  "argv, message",
  [
    (["--game", "connect_four"], "expected a one-player game 'jumanji:<env id>'"),
    (["--game", "jumanji:Sudoko-v0"], "did you mean"),
    (["--game", "jumanji:JobShop-v0"], "MAX_ACTIONS"),
    (["--engines", "graph,alpha"], "--engines: expected distinct names"),
    (["--game", "jumanji:Sudoku-v0", "--evaluator", "network"], "no network is shipped for"),
    (["--evaluator", "rollout", "--checkpoint", "x.msgpack"], "--checkpoint is for --evaluator"),
    (["--instances", "0"], "argument --instances"),
  ],
)
def test_evaluate_command_refuses_bad_input_in_one_line(argv, message, capsys):
  assert evaluate_command.main(argv) == 2
  captured = capsys.readouterr()
  assert captured.out == "" and captured.err.count("\n") == 1 and message in captured.err


@pytest.mark.slow
def test_the_network_value_lies_within_the_game_bounds():
  for spec, bounds in (
    ("jumanji:Sudoku-very-easy-v0", (0.0, 1.0)),
    ("jumanji:Knapsack-v1", None),
    ("tic_tac_toe", (-1.0, 1.0)),
  ):
    game = make_game(spec)
    assert game.value_bounds == bounds
    apply_fn, params = networks.init_network(game.env, jax.random.PRNGKey(0), hidden=(8,))
    observation = (
      jax.random.normal(
        jax.random.PRNGKey(1), (64, game.env.init(jax.random.PRNGKey(0)).observation.size)
      )
      * 100
    )
    _, value = apply_fn(params, observation)
    if bounds is None:
      assert float(jnp.max(jnp.abs(value))) > 1.0  # unsquashed
    else:
      assert float(jnp.min(value)) >= bounds[0] and float(jnp.max(value)) <= bounds[1]
  assert math.isclose(
    float(networks.squash_value(jnp.float32(0.3), (-1.0, 1.0))), math.tanh(0.3), rel_tol=1e-6
  )


@pytest.mark.slow
def test_one_player_self_play_targets_the_return_to_go():
  """Self-play on a jumanji env records, for every move, the return from that move
  on: the value of the item it packs plus every later one (Knapsack pays each
  item's value as it is packed), and the run evaluates by episodes."""
  from mcgs_jax.apps import registry  # noqa: PLC0415
  from mcgs_jax.apps import train as train_lib  # noqa: PLC0415
  from mcgs_jax.apps.train.self_play import make_self_play  # noqa: PLC0415

  config = train_lib.Config(
    game="jumanji:Knapsack-v1",
    num_games=2,
    num_simulations=4,
    hidden=(16,),
    train_steps=2,
    train_batch_size=16,
    iterations=1,
    eval_games=2,
    progress=False,
  )
  game = registry.game_from_spec(config.game)
  apply_fn, params = networks.init_network(game.env, jax.random.PRNGKey(0), hidden=(16,))
  game = dataclasses.replace(
    game, evaluator=registry.make_evaluator("network", game.env, apply_fn=apply_fn)
  )
  record = jax.tree_util.tree_map(
    np.asarray, make_self_play(game, config)(params, jax.random.PRNGKey(1))
  )
  for b in range(config.num_games):
    valid = np.flatnonzero(record["valid"][:, b])
    # One row per item: weight, value, packed, legal, log value per weight, budget.
    values = record["observation"][valid, b, :, 1]
    packed = record["observation"][valid, b, :, 2]
    for t in valid[:-1]:
      item = np.flatnonzero(packed[t + 1] != packed[t])
      assert len(item) == 1
      assert record["value"][t, b] - record["value"][t + 1, b] == pytest.approx(
        values[t, item[0]], abs=1e-5
      )
    assert record["value"][valid[-1], b] > 0  # the last item packed
  history = train_lib.train(config)
  assert history[-1]["eval_return"] > 0 and history[-1]["eval_solved"] is None
  assert history[-1]["eval_gap"] >= -1e-6


@pytest.mark.slow
def test_the_set_network_scores_each_item_from_its_row_in_any_order(tmp_path):
  """`EntityPolicyValueNet` on Knapsack's rows: permuting the items permutes the
  logits and keeps the value; a checkpoint of it loads by its shapes alone; it is
  refused for an env without a row per action; bad specs name themselves."""
  from mcgs_jax.apps.train import checkpoint_files  # noqa: PLC0415

  game = make_game("jumanji:Knapsack-v1")
  state = episodes.instances(game, 3, seed=0)
  for spec in ("entity:1,16", "entity:0,16"):
    apply_fn, params = networks.init_network(game.env, jax.random.PRNGKey(0), network=spec)
    logits, value = apply_fn(params, state.observation)
    order = jax.random.permutation(jax.random.PRNGKey(1), 50)
    permuted_logits, permuted_value = apply_fn(params, state.observation[:, order])
    np.testing.assert_allclose(permuted_logits, logits[:, order], atol=1e-5)
    np.testing.assert_allclose(permuted_value, value, atol=1e-5)
    path = str(tmp_path / f"{spec.replace(':', '_')}.msgpack")
    checkpoint_files.save_checkpoint(path, params)
    loaded_fn, loaded, _ = checkpoint_files.load_network(path, game.env)
    np.testing.assert_array_equal(loaded_fn(loaded, state.observation)[0], logits)
  with pytest.raises(ValueError, match="needs an observation with one row per action"):
    networks.init_network(
      make_game("jumanji:Sudoku-v0").env, jax.random.PRNGKey(0), network="entity"
    )
  for spec in ("entity:0,0", "mlp:2", "cnn"):
    with pytest.raises(ValueError, match=f"network '{spec}'"):
      networks.parse_network(spec)
  from mcgs_jax.apps import train as train_lib  # noqa: PLC0415

  with pytest.raises(
    ValueError, match="network must be 'mlp', 'resnet:BLOCKS,CHANNELS' .* or 'entity:BLOCKS,WIDTH'"
  ):
    train_lib.Config(network="cnn")


@pytest.mark.parametrize("env_id", ["Knapsack-v1", "TSP-v1"])
@pytest.mark.slow
def test_the_shipped_networks_load_and_are_the_default_evaluator(env_id, capsys):
  """The networks shipped for Knapsack and TSP load for their game and are what
  `mcgs-jax evaluate` searches with when no evaluator is named; a trained network's
  search beats the uniform one's on the same instances."""
  from mcgs_jax.apps.cli.arena_parser import builtin_checkpoint  # noqa: PLC0415
  from mcgs_jax.apps.train.checkpoint_files import load_network  # noqa: PLC0415

  game = make_game(f"jumanji:{env_id}")
  apply_fn, params, _ = load_network(builtin_checkpoint(f"jumanji:{env_id}"), game.env)
  logits, _ = apply_fn(params, episodes.instances(game, 2, seed=0).observation)
  assert logits.shape == (2, game.num_actions)
  argv = ["--game", f"jumanji:{env_id}", "--instances", "8", "--simulations", "8"]
  argv += ["--engines", "graph", "--json"]
  assert evaluate_command.main(argv) == 0
  trained = json.loads(capsys.readouterr().out)
  assert evaluate_command.main(argv + ["--evaluator", "uniform"]) == 0
  uniform = json.loads(capsys.readouterr().out)
  assert trained["evaluator"] == "network"
  assert trained["engines"][0]["mean_gap"] < uniform["engines"][0]["mean_gap"]
