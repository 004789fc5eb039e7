"""Tests of the AlphaZero loop (`mcgs_jax.train`) in quick mode on tic_tac_toe."""

import types

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from mcgs_jax.apps import registry
from mcgs_jax.apps import train as train_lib
from mcgs_jax.games import evaluators
from mcgs_jax.games.adapter import make_game

pytest.importorskip("pgx")

TINY = dict(
  num_games=16,
  num_simulations=8,
  hidden=(32, 32),
  train_steps=20,
  train_batch_size=64,
  iterations=2,
  eval_games=0,
  progress=False,
)


@pytest.fixture(scope="module")
def setup():
  """A tiny tic_tac_toe config, its network and one batch of self-play data."""
  config = train_lib.Config.quick(**TINY)
  base = make_game(config.game)
  apply_fn, params = evaluators.init_network(base.env, jax.random.PRNGKey(0), hidden=config.hidden)
  game = make_game(config.game, evaluators.network_evaluator(apply_fn))
  self_play = train_lib.make_self_play(game, config)
  trajectory = jax.device_get(self_play(params, jax.random.PRNGKey(1)))
  return config, apply_fn, params, trajectory


@pytest.mark.quick_variants("muzero")  # the others build a self-play of their own
@pytest.mark.parametrize("policy", registry.TRAINING_POLICY_NAMES)
def test_self_play_targets_are_valid(setup, policy):
  config, apply_fn, params, trajectory = setup
  if policy == "gumbel":
    config = train_lib.Config.quick(**dict(TINY, policy="gumbel"))
    game = make_game(config.game, evaluators.network_evaluator(apply_fn))
    trajectory = jax.device_get(
      train_lib.make_self_play(game, config)(params, jax.random.PRNGKey(2))
    )
  valid = trajectory["valid"]
  assert valid.shape == (9, config.num_games)
  assert valid[0].all()  # every game has a first move
  # Once a game is over it stays over: valid is a prefix along time.
  assert np.all(valid[1:] <= valid[:-1])
  policy_target = trajectory["policy"][valid]
  legal = trajectory["legal"][valid]
  assert np.all(np.isfinite(policy_target))
  np.testing.assert_allclose(policy_target.sum(-1), 1.0, atol=1e-5)
  assert np.all(policy_target[~legal] <= 1e-6)
  assert set(np.unique(trajectory["value"][valid])) <= {-1.0, 0.0, 1.0}
  # Padding is zero, so it cannot leak into the buffer.
  assert np.all(trajectory["policy"][~valid] == 0)
  assert np.all(trajectory["value"][~valid] == 0)
  # Zero-sum: the two players' outcomes of a game are opposite.
  lengths = valid.sum(0)
  for b in range(config.num_games):
    if lengths[b] >= 2:
      assert trajectory["value"][0, b] == -trajectory["value"][1, b]


def test_replay_buffer_keeps_valid_positions_and_wraps(setup):
  _, _, _, trajectory = setup
  count = int(trajectory["valid"].sum())
  buffer = train_lib.ReplayBuffer(capacity=count + 5)
  assert buffer.add(trajectory) == count
  assert buffer.size == count
  buffer.add(trajectory)
  assert buffer.size == count + 5  # full, oldest overwritten
  batch = buffer.sample(np.random.default_rng(0), 32)
  assert batch["observation"].shape[0] == 32
  np.testing.assert_allclose(batch["policy"].sum(-1), 1.0, atol=1e-5)


def test_loss_falls_on_a_fixed_batch(setup):
  config, apply_fn, params, trajectory = setup
  buffer = train_lib.ReplayBuffer(1000)
  buffer.add(trajectory)
  batch = buffer.sample(np.random.default_rng(0), 128)
  optimizer = optax.adam(3e-3)
  step = train_lib.make_train_step(apply_fn, optimizer, config.l2)
  opt_state = optimizer.init(params)
  losses = []
  for _ in range(40):
    params, opt_state, metrics = step(params, opt_state, batch)
    losses.append(float(metrics["loss"]))
  assert np.all(np.isfinite(losses))
  assert losses[-1] < 0.8 * losses[0]
  leaves = jax.tree_util.tree_leaves(params)
  assert all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in leaves)


def test_checkpoint_round_trip(setup, tmp_path):
  _, _, params, _ = setup
  optimizer = optax.adam(1e-3)
  opt_state = optimizer.init(params)
  path = train_lib.save_checkpoint(str(tmp_path / "ck.msgpack"), params, opt_state, 7)
  zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
  loaded, loaded_opt, iteration = train_lib.load_checkpoint(path, zeros, optimizer.init(zeros))
  assert iteration == 7
  for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(loaded)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert jax.tree_util.tree_structure(loaded_opt) == jax.tree_util.tree_structure(opt_state)


class _FakeMatch:
  """Stands in for `arena.play_match` (compiling two arena searches would double
  this file's run time); records what the loop asked for and answers each call with
  a different result, so that the history shows which answer went where."""

  def __init__(self):
    self.calls = []
    self.results = []

  def __call__(self, game, agent_a, agent_b, *, num_games, seed, params_a, params_b, opening_moves):
    self.calls.append(
      dict(
        game=game,
        agent_a=agent_a,
        agent_b=agent_b,
        num_games=num_games,
        params_a=params_a,
        params_b=params_b,
      )
    )
    wins = len(self.calls) % (num_games + 1)
    result = types.SimpleNamespace(
      wins=wins,
      draws=0,
      losses=num_games - wins,
      score=wins / num_games,
      elo=10.0 * len(self.calls),
      first_ply_seconds=0.5,
    )
    self.results.append(result)
    return result


def _same_leaves(first, second):
  return all(
    np.array_equal(np.asarray(a), np.asarray(b))
    for a, b in zip(jax.tree_util.tree_leaves(first), jax.tree_util.tree_leaves(second))
  )


def test_train_quick_runs_checkpoints_and_plots(tmp_path, monkeypatch):
  from mcgs_jax.apps import arena

  fake = _FakeMatch()
  monkeypatch.setattr(arena, "play_match", fake)
  config = train_lib.Config.quick(
    **dict(TINY, iterations=3, eval_games=2, eval_every=2, checkpoint_dir=str(tmp_path))
  )
  base = make_game(config.game)
  _, initial = evaluators.init_network(base.env, jax.random.PRNGKey(5), hidden=config.hidden)
  history = train_lib.train(config, params=initial)
  assert [entry["iteration"] for entry in history] == [1, 2, 3]
  # Compilation is timed apart, once; the first evaluation says it compiles too.
  assert history[0]["compile_s"] > 0
  assert all("compile_s" not in entry for entry in history[1:])
  assert history[1]["eval_compiles"] and not history[2]["eval_compiles"]
  assert train_lib.format_entry(history[0]).startswith("iter   1  compile ")
  # Two fake matches of 0.5 s first plies each, reported apart from the arena time.
  assert history[1]["eval_first_ply_s"] == 1.0
  assert "(of which 1.0s first plies, compiling the arena)" in train_lib.format_entry(history[1])
  for entry in history:
    for name in ("loss", "policy_loss", "value_loss", "first_loss", "last_loss"):
      assert np.isfinite(entry[name])
    assert entry["positions"] >= 5 * config.num_games  # tic_tac_toe lasts 5+ moves
  # Within an iteration the minibatch loss goes down (robust: averaged over
  # iterations rather than per iteration).
  assert np.mean([e["last_loss"] for e in history]) < np.mean([e["first_loss"] for e in history])
  assert all(
    leaf is not None and bool(jnp.all(jnp.isfinite(leaf)))
    for leaf in jax.tree_util.tree_leaves(history.params)
  )
  # Training moved the weights, from the given ones and between evaluations.
  assert not _same_leaves(history.params, initial)

  # Checkpoints every iteration; the last one holds the final params.
  assert sorted(p.name for p in tmp_path.glob("*.msgpack")) == [
    "iteration_0001.msgpack",
    "iteration_0002.msgpack",
    "iteration_0003.msgpack",
  ]
  loaded, _, iteration = train_lib.load_checkpoint(
    str(tmp_path / "iteration_0003.msgpack"), history.params
  )
  assert iteration == 3
  assert _same_leaves(history.params, loaded)

  # Evaluated at iterations 2 and 3 (every 2, and the last): each time against the
  # uniform MCTS baseline, then against the previously evaluated network.
  assert "vs_baseline" not in history[0] and "vs_previous" not in history[0]
  assert len(fake.calls) == 4
  for entry, (baseline, previous) in zip(history[1:], [fake.results[0:2], fake.results[2:4]]):
    for label, result in (("vs_baseline", baseline), ("vs_previous", previous)):
      assert entry[label] == dict(
        wins=result.wins,
        draws=result.draws,
        losses=result.losses,
        score=result.score,
        elo=result.elo,
      ), label
  for call in fake.calls:
    assert call["game"] == config.game and call["num_games"] == config.eval_games
    assert call["agent_a"].evaluator == "network"
  baseline_call, previous_call = fake.calls[2], fake.calls[3]
  assert baseline_call["agent_b"].evaluator == "uniform"
  assert not baseline_call["agent_b"].transpositions
  assert baseline_call["agent_b"].num_simulations == config.num_simulations
  assert baseline_call["params_a"] is history.params
  assert previous_call["agent_b"].evaluator == "network"
  # At iteration 2 the previous opponent is the starting network; at iteration 3 it
  # is the network evaluated at iteration 2, which training has moved on from.
  assert fake.calls[1]["params_b"] is initial
  assert previous_call["params_b"] is fake.calls[0]["params_a"]
  assert not _same_leaves(fake.calls[0]["params_a"], initial)
  assert not _same_leaves(fake.calls[0]["params_a"], history.params)

  figure = train_lib.plot_history(history, str(tmp_path / "curve.png"))
  assert (tmp_path / "curve.png").stat().st_size > 0
  import matplotlib.pyplot as plt

  plt.close(figure)


@pytest.mark.slow
def test_evaluate_plays_real_arena_matches():
  config = train_lib.Config.quick(**dict(TINY, eval_games=2))
  base = make_game(config.game)
  apply_fn, params = evaluators.init_network(base.env, jax.random.PRNGKey(0), hidden=config.hidden)
  results = train_lib.evaluate(config, apply_fn, params, params, seed=0)
  assert results["eval_first_ply_s"] > 0  # the first plies compiled the match steps
  for label in ("vs_baseline", "vs_previous"):
    result = results[label]
    assert result["wins"] + result["draws"] + result["losses"] == 2
    assert result["score"] == pytest.approx((result["wins"] + result["draws"] / 2) / 2)
    assert np.sign(result["elo"]) == np.sign(result["score"] - 0.5)


def test_help_shows_every_default(capsys):
  with pytest.raises(SystemExit):
    train_lib.main(["--help"])
  out = " ".join(capsys.readouterr().out.split())
  assert "smoke test" in out
  for flag, default in [
    ("--game", "default: connect_four; with --quick: tic_tac_toe"),
    ("--games", "default: 64; with --quick: 32"),
    ("--simulations", "default: 32"),
    ("--policy", "default: muzero"),
    ("--hidden", "default: 128,128; with --quick: 64,64"),
    ("--learning-rate", "default: 0.001"),
    ("--seed", "default: 0"),
    ("--plot", "default: no plot"),
  ]:
    assert flag in out and default in out, (flag, default)
  assert "None" not in out


def test_quick_is_labelled_a_smoke_test(capsys, monkeypatch):
  from mcgs_jax.apps.cli import train_command as train_lib

  history = train_lib.History()
  monkeypatch.setattr(train_lib, "train", lambda config, on_iteration=None, resume=False: history)
  assert train_lib.main(["--quick"]) == 0
  assert capsys.readouterr().out.startswith("--quick: smoke test")
