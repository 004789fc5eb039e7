"""Where switching pays: mctx as an engine of the arena and of training, reuse by
default, each agent's search time, equal time per move, self-play that keeps its
graph, and the flags that set them."""

import dataclasses

import jax
import numpy as np
import pytest

from mcgs_jax.apps import arena, train
from mcgs_jax.apps.arena import Agent, play_match
from mcgs_jax.apps.cli import arena_command
from mcgs_jax.games import evaluators
from mcgs_jax.games.adapter import make_game

pytest.importorskip("mctx")
pytest.importorskip("pgx")

GAME = "tic_tac_toe"
OPPONENT = Agent(policy="uct", evaluator="rollout", num_simulations=8, reuse=False)
MCTX = Agent(policy="muzero", evaluator="uniform", num_simulations=8, engine="mctx")
# mctx's search in this library: a tree from scratch, no solver.
TREE = Agent(
  policy="muzero",
  evaluator="uniform",
  num_simulations=8,
  transpositions=False,
  reuse=False,
  solver=False,
)


# ---------------------------------------------------------------------------------
# Agents


def test_engine_defaults():
  assert Agent().reuse and Agent().transpositions and Agent().engine == "mcgs"
  assert Agent().solver  # every arena game has exact terminal values
  assert not MCTX.reuse and not MCTX.transpositions and not MCTX.solver
  assert MCTX.describe() == "mctx muzero/uniform/8"
  assert Agent(num_simulations=8).describe() == "uct/rollout/8 graph solver reuse"
  assert Agent(num_simulations=8, solver=False).describe() == "uct/rollout/8 graph reuse"


@pytest.mark.parametrize(
  "settings, message",
  [
    (dict(policy="uct"), "has policies"),
    (dict(reuse=True), "reuse=True is for engine 'mcgs'"),
    (dict(transpositions=True), "transpositions=True is for engine 'mcgs'"),
    (dict(solver=True), "solver=True"),
    (dict(num_parallel=2), "num_parallel > 1"),
    (dict(capacity=64), "capacity"),
    (dict(engine="alphazero"), "unknown engine"),
  ],
)
def test_mctx_engine_refuses_what_it_cannot_do(settings, message):
  with pytest.raises(ValueError, match=message):
    Agent(**{**dict(policy="muzero", num_simulations=8, engine="mctx"), **settings})


@pytest.fixture(scope="module")
def tree_match():
  return play_match(GAME, TREE, OPPONENT, num_games=8, seed=4, opening_moves=1)


@pytest.mark.slow
def test_mctx_engine_plays_our_tree_search(tree_match):
  """Tree mode equals mctx: the mctx agent plays every game exactly as this
  library's tree search without reuse (same moves, same outcomes)."""
  result = play_match(GAME, MCTX, OPPONENT, num_games=8, seed=4, opening_moves=1)
  np.testing.assert_array_equal(result.outcomes, tree_match.outcomes)
  np.testing.assert_array_equal(result.game_lengths, tree_match.game_lengths)
  assert result.agents["a"]["engine"] == "mctx"
  # mctx adds a node every simulation, also below a terminal state, where this
  # library's search stops (a terminal child is never searched below).
  assert result.agents["a"]["mean_nodes"] == 9
  assert tree_match.agents["a"]["mean_nodes"] <= 9
  assert result.agents["a"]["mean_transposition_hits"] == 0


def test_each_agent_search_is_timed(tree_match):
  for side in ("a", "b"):
    times = tree_match.timing[side]
    assert np.isfinite(times["search_seconds_per_ply"]) and times["search_seconds_per_ply"] > 0
    # The first searched ply compiles; it is kept apart from the mean.
    assert times["first_search_seconds"] > times["search_seconds_per_ply"]
    assert tree_match.agents[side]["num_simulations"] == 8
  assert tree_match.calibration is None


@pytest.mark.slow
def test_reuse_agent_counts_this_search_hits_only():
  """A kept graph counts transposition hits over its life; the arena reports each
  search's own, so no search reports more hits than its simulations."""
  reusing = Agent(policy="uct", evaluator="rollout", num_simulations=16)
  result = play_match(GAME, reusing, OPPONENT, num_games=8, seed=1, opening_moves=1)
  stats = result.agents["a"]
  assert stats["mean_transposition_hits"] <= 16
  # Kept nodes plus the new ones: more than one search's 17 at some ply.
  assert np.nanmax(stats["nodes_per_ply"]) > 17


# Slow: it times mctx at several simulation counts, one compilation each.
@pytest.mark.slow
def test_equal_time_calibration():
  game = arena.two_player_game(GAME)
  state = jax.vmap(game.env.init)(jax.random.split(jax.random.PRNGKey(0), 8))
  slow = Agent(policy="muzero", evaluator="uniform", num_simulations=32)
  calibrated, calibration = arena.calibrate_simulations(game, slow, MCTX, state)
  measured = dict((int(s), t) for s, t in calibration["measurements"])
  assert calibrated.num_simulations == calibration["b_simulations"] in measured
  assert calibrated.engine == "mctx"
  assert calibration["a_simulations"] == 32
  # The chosen simulations are the measured ones closest to A's time.
  target = calibration["a_seconds"]
  best = min(measured.values(), key=lambda seconds: abs(seconds - target))
  assert calibration["b_seconds"] == best == measured[calibration["b_simulations"]]
  assert 2 <= len(measured) <= arena.CALIBRATION_ROUNDS


@pytest.mark.slow
def test_equal_time_match_plays_the_calibrated_agent():
  a = Agent(policy="muzero", evaluator="uniform", num_simulations=16)
  result = play_match(GAME, a, MCTX, num_games=4, seed=2, opening_moves=1, equal_time=True)
  assert result.calibration is not None
  assert result.agents["b"]["num_simulations"] == result.calibration["b_simulations"]
  assert result.wins + result.draws + result.losses == 4


# ---------------------------------------------------------------------------------
# The arena command


def parse(argv):
  return arena_command.build_parser().parse_args(argv)


def test_default_command_is_ours_against_mctx():
  args = parse([])
  apply_fn = lambda params, observation: None
  a = arena_command.agent_from_args(args, "a", apply_fn)
  b = arena_command.agent_from_args(args, "b", apply_fn)
  assert (a.engine, a.transpositions, a.reuse, a.policy, a.evaluator) == (
    "mcgs",
    True,
    True,
    "muzero",
    "network",
  )
  assert (b.engine, b.transpositions, b.reuse, b.policy, b.evaluator) == (
    "mctx",
    False,
    False,
    "muzero",
    "network",
  )
  assert a.num_simulations == b.num_simulations == 64
  assert a.describe() == "muzero/network built-in/64 graph solver reuse"
  assert b.describe() == "muzero/network built-in/64 mctx"
  path = arena_command.builtin_checkpoint("connect_four")
  apply_fn, params, iteration = train.load_network(path, make_game("connect_four").env)
  assert iteration == 40 and apply_fn is not None and params is not None
  assert arena_command.builtin_checkpoint("tic_tac_toe") is None


def test_command_parts_flags():
  apply_fn = lambda params, observation: None
  a = arena_command.agent_from_args(parse(["--a-no-reuse"]), "a", apply_fn)
  assert a.transpositions and not a.reuse
  args = parse(["--b-engine", "mcgs", "--b-reuse"])
  b = arena_command.agent_from_args(args, "b", apply_fn)
  assert b.engine == "mcgs" and not b.transpositions and b.reuse
  # mctx as A takes a tree without being told.
  a = arena_command.agent_from_args(parse(["--a-engine", "mctx"]), "a", apply_fn)
  assert a.engine == "mctx" and not a.transpositions
  # A game without a built-in network falls back to rollouts.
  a = arena_command.agent_from_args(parse(["--game", GAME]), "a")
  assert a.evaluator == "rollout"


@pytest.mark.parametrize(
  "argv, message",
  [
    (["--b-policy", "uct"], "--b-engine mctx has policies muzero and gumbel"),
    (["--b-reuse"], "--b-reuse is for --b-engine mcgs"),
    (["--b-mode", "graph"], "--b-mode graph is for --b-engine mcgs"),
    (["--b-solver"], "--b-solver is for --b-engine mcgs"),
    (["--simulations", "3000000000"], "expected a positive integer and <= 1000000"),
    (["--seed", str(2**70)], "--seed: expected an integer >= 0 and <= 4294967295"),
    (["--game", GAME, "--a-evaluator", "network"], "no built-in network for tic_tac_toe"),
    (["--plot", "/no/such/dir/x.png"], "cannot write --plot"),
  ],
)
def test_command_errors(argv, message, capsys):
  assert arena_command.main(argv) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and message in err, err


# ---------------------------------------------------------------------------------
# Training


def self_play(**settings):
  config = train.Config.quick(num_games=8, num_simulations=16, progress=False, **settings)
  base = make_game(config.game)
  apply_fn, params = evaluators.init_network(base.env, jax.random.PRNGKey(0), hidden=config.hidden)
  game = make_game(config.game, evaluators.network_evaluator(apply_fn))
  return config, jax.device_get(train.make_self_play(game, config)(params, jax.random.PRNGKey(1)))


@pytest.fixture(scope="module")
def reused():
  # Without forced playouts (the default since 2026-12-03), whose pruning changes the
  # target these tests count.
  return self_play(policy_target="all", forced_playouts=0.0)


def test_training_defaults_keep_the_graph():
  config = train.Config()
  assert config.reuse and config.transpositions and config.engine == "mcgs"
  assert config.policy_target == "new"
  # Forced playouts by default where they apply (muzero on this engine), else none.
  assert config.self_play_forced_playouts == 2.0
  assert train.Config(policy="gumbel").self_play_forced_playouts == 0.0
  mctx_config = train.Config(engine="mctx", reuse=False, transpositions=False)
  assert mctx_config.self_play_forced_playouts == 0.0
  assert train.Config(forced_playouts=0.0).self_play_forced_playouts == 0.0
  with pytest.raises(ValueError, match="forced_playouts must be 0 with engine 'mctx'"):
    train.Config(engine="mctx", reuse=False, transpositions=False, forced_playouts=2.0)
  assert config.search_capacity == 4 * config.num_simulations + 1
  assert train.Config(reuse=False).search_capacity == config.num_simulations + 1


def test_mctx_self_play_equals_our_tree_self_play():
  """`engine="mctx"` and this library's tree without reuse play the same games (the
  same sampled moves, noise included) with the same policy targets."""
  _, with_mctx = self_play(engine="mctx", reuse=False, transpositions=False)
  _, tree = self_play(reuse=False, transpositions=False, forced_playouts=0.0)
  np.testing.assert_array_equal(with_mctx["observation"], tree["observation"])
  np.testing.assert_allclose(with_mctx["policy"], tree["policy"], atol=1e-6)
  assert not with_mctx["carried_visits"].any() and not tree["carried_visits"].any()


def test_reused_self_play_carries_visits_and_counts_every_root_visit(reused):
  config, trajectory = reused
  valid = trajectory["valid"]
  carried = trajectory["carried_visits"]
  assert not carried[0].any()  # a first move starts from a fresh graph
  assert carried[1:][valid[1:]].mean() > 1  # later moves start from kept visits
  # "all": the target is the visit distribution over every root edge visit, the
  # S new ones plus the carried root's own (its visits less its evaluation).
  edge_visits = np.where(carried > 0, carried - 1, 0) + config.num_simulations
  counts = trajectory["policy"] * edge_visits[..., None]
  np.testing.assert_allclose(counts[valid], np.round(counts[valid]), atol=1e-3)
  np.testing.assert_allclose(trajectory["policy"][valid].sum(-1), 1.0, atol=1e-5)
  assert not trajectory["capacity_overflows"].any()


def test_new_visits_policy_target():
  # The default target: this search's visits (unpruned: no forced playouts).
  config, trajectory = self_play(forced_playouts=0.0)
  valid = trajectory["valid"]
  assert trajectory["carried_visits"][1:][valid[1:]].mean() > 1
  counts = trajectory["policy"][valid] * config.num_simulations
  np.testing.assert_allclose(counts, np.round(counts), atol=1e-3)
  np.testing.assert_allclose(counts.sum(-1), config.num_simulations, atol=1e-3)


@pytest.mark.slow
def test_capacity_overflows_are_counted():
  _, trajectory = self_play(capacity=4)
  assert trajectory["capacity_overflows"].sum() > 0
  history = train.train(
    train.Config.quick(num_games=4, num_simulations=8, capacity=4, iterations=1, eval_games=0)
  )
  assert history[0]["capacity_overflows"] > 0


@pytest.mark.slow
def test_max_seconds_stops_starting_iterations():
  history = train.train(
    train.Config.quick(num_games=4, num_simulations=4, iterations=5, eval_games=0, max_seconds=1e-3)
  )
  assert len(history) == 1  # the first iteration always runs; none after the budget


@pytest.mark.parametrize(
  "settings, message",
  [
    (dict(engine="mctx"), "transpositions must be False with engine 'mctx'"),
    (dict(engine="mctx", transpositions=False), "reuse must be False"),
    (dict(policy_target="fresh"), "policy_target must be one of"),
    (dict(iterations=0), "iterations must be an integer >= 1"),
    (dict(learning_rate=float("nan")), "learning_rate must be a finite number > 0"),
    (dict(hidden=(0,)), "hidden must be one or more positive layer widths"),
    (dict(eval_games=3), "eval_games must be 0 or even"),
    (dict(num_simulations=3_000_000_000), "num_simulations must be an integer from 1"),
    (dict(seed=2**70), "seed must be an integer from 0"),
    (dict(capacity=1), "capacity must be an integer >= 2"),
    (dict(max_seconds=0.0), "max_seconds must be a finite number > 0"),
  ],
)
def test_config_errors(settings, message):
  with pytest.raises(ValueError, match=message):
    train.Config(**settings)


@pytest.mark.parametrize(
  "argv, message",
  [
    (["--iterations", "0"], "--iterations: iterations must be an integer >= 1"),
    (["--learning-rate", "nan"], "--learning-rate: learning_rate must be a finite number"),
    (["--hidden", "0"], "--hidden: hidden must be one or more positive layer widths"),
    (["--hidden", "a,b"], "expected comma-separated integers"),
    (["--game", "nim:1,2"], "--game 'nim:1,2'"),
    (["--game", "no_such_game"], "--game 'no_such_game': unknown game"),
    (["--eval-games", "3"], "--eval-games: eval_games must be 0 or even"),
    (["--simulations", "3000000000"], "--simulations: num_simulations must be"),
    (["--seed", str(2**70)], "--seed: seed must be an integer from 0 to"),
    (["--engine", "mctx", "--capacity", "9"], "--capacity: capacity must be None"),
    (["--plot", "/no/such/dir/curve.png"], "--plot '/no/such/dir/curve.png': no directory"),
    (["--history", "/no/such/dir/h.json"], "--history"),
    (["--save-params", "/no/such/dir/p.msgpack"], "--save-params"),
    (["--frobnicate"], "unrecognized arguments"),
  ],
)
def test_train_command_errors(argv, message, capsys):
  try:
    status = train.main(argv)
  except SystemExit as exit_:  # what argparse itself refuses
    status = exit_.code
  assert status == 2
  captured = capsys.readouterr()
  assert captured.out == ""
  lines = captured.err.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("mcgs-jax train: error: "), captured.err
  assert message in lines[0], lines[0]


def test_engine_mctx_flag_implies_a_tree():
  config = train.config_from_args(train.build_parser().parse_args(["--engine", "mctx"]))
  assert config.engine == "mctx" and not config.transpositions and not config.reuse
  config = train.config_from_args(train.build_parser().parse_args(["--tree", "--no-reuse"]))
  assert not config.transpositions and not config.reuse and config.engine == "mcgs"


def test_replace_keeps_checks():
  with pytest.raises(ValueError, match="num_games"):
    dataclasses.replace(train.Config(), num_games=0)
