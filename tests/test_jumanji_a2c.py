"""`benchmarks/jumanji_a2c.py`: jumanji's A2C baseline for a wall-clock budget. Its
instances are `mcgs-jax evaluate`'s, its training returns are the episodes' reward
sums, a bad flag or a missing dependency exits 2 with one line, and a tiny run trains
and plays Knapsack within the exact optimum."""

import json
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import load_benchmark, run_benchmark

pytest.importorskip("jumanji.training.setup_train")  # jumanji and its training extras

import jumanji  # noqa: E402
from jumanji.wrappers import VmapAutoResetWrapper  # noqa: E402

from mcgs_jax.apps.planning import episodes  # noqa: E402
from mcgs_jax.games import make_game  # noqa: E402


@pytest.fixture(scope="module")
def a2c():
  return load_benchmark("jumanji_a2c")


def _leaves(tree):
  return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(tree)]


def test_instances_are_the_episodes_instances(a2c):
  env = jumanji.make("Knapsack-v1")
  states, timesteps = a2c.draw_instances(env, 6, 12345)
  theirs = episodes.instances(make_game("jumanji:Knapsack-v1"), 6, 12345).env_state
  assert jax.tree_util.tree_structure(states) == jax.tree_util.tree_structure(theirs)
  for mine, other in zip(_leaves(states), _leaves(theirs)):
    assert mine.dtype == other.dtype and np.array_equal(mine, other)
  assert a2c.same_leaves(states, theirs)
  # Instance i does not depend on N, and another seed draws other instances.
  first, _ = a2c.draw_instances(env, 2, 12345)
  assert a2c.same_leaves(first, jax.tree_util.tree_map(lambda x: x[:2], states))
  other_seed, _ = a2c.draw_instances(env, 6, 12346)
  assert not a2c.same_leaves(other_seed, states)
  assert timesteps.first().all()


def test_return_extras_sum_each_episode_s_rewards(a2c):
  """The wrapped training env reports, where an episode ends, its summed rewards."""
  batch = 3
  env = a2c.return_extras_wrapper()(VmapAutoResetWrapper(jumanji.make("Knapsack-v1")))
  keys = jax.random.split(jax.random.PRNGKey(1), batch)
  state, timestep = jax.jit(env.reset)(keys)
  step = jax.jit(env.step)
  sums, ended = np.zeros(batch), 0
  for _ in range(60):  # more than an episode (at most 50 items)
    mask = np.asarray(timestep.observation.action_mask)
    action = jnp.asarray(np.argmax(mask, axis=-1), jnp.int32)  # the first legal item
    state, timestep = step(state, action)
    sums += np.asarray(timestep.reward, np.float64)
    last = np.asarray(timestep.last())
    extras = timestep.extras
    np.testing.assert_allclose(np.asarray(extras[a2c.ENDED]), last.astype(np.float32))
    np.testing.assert_allclose(
      np.asarray(extras[a2c.ENDED_RETURN]), np.where(last, sums, 0.0), rtol=1e-5
    )
    ended += int(last.sum())
    sums[last] = 0.0
  assert ended >= batch


@pytest.mark.parametrize(
  "flags",
  [
    ["--seconds", "0"],
    ["--seconds", "nan"],
    ["--env", "Snake-v1"],
    ["--instances", "0"],
    ["--learner-steps", "-1"],
    ["--total-batch-size", "x"],
    ["--json", "/no/such/folder/out.json"],
  ],
)
def test_bad_flags_exit_2_with_one_line(a2c, flags, capsys):
  with pytest.raises(SystemExit) as exit_:
    a2c.parse_args(flags)
  assert exit_.value.code == 2
  assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_missing_training_dependencies_exit_2_naming_them(a2c, monkeypatch, capsys):
  modules = {**a2c.TRAINING_MODULES, "no_such_module_for_a2c": "no-such-package"}
  monkeypatch.setattr(a2c, "TRAINING_MODULES", modules)
  assert a2c.run(["--env", "Knapsack-v1"]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and "no-such-package" in err[0] and "pip install dm-haiku" in err[0]


@pytest.mark.slow
def test_more_than_one_device_exits_2_with_one_line():
  flags = "--xla_force_host_platform_device_count=2"
  env = {
    **os.environ,
    "JAX_PLATFORMS": "cpu",
    "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {flags}",
  }
  done = run_benchmark("jumanji_a2c", "--seconds", "1", env=env, timeout=300)
  assert done.returncode == 2
  assert len(done.stderr.strip().splitlines()) == 1 and "one device" in done.stderr


def test_config_keeps_jumanji_s_hyperparameters(a2c):
  cfg, changed = a2c.jumanji_config(a2c.parse_args(["--env", "Sudoku-v0", "--seed", "3"]))
  assert cfg.agent == "a2c" and cfg.seed == 3
  assert cfg.env.name == "sudoku" and cfg.env.registered_version == "Sudoku-v0"
  assert cfg.env.training.total_batch_size == 128 and cfg.env.training.n_steps == 40
  assert cfg.env.a2c.learning_rate == pytest.approx(1e-4)
  assert changed == {"num_learner_steps_per_epoch": (1000, 1)}
  cfg, changed = a2c.jumanji_config(
    a2c.parse_args(["--env", "Knapsack-v1", "--total-batch-size", "64", "--n-steps", "7"])
  )
  assert changed == {"num_learner_steps_per_epoch": (50, 1), "n_steps": (20, 7)}


@pytest.mark.slow
def test_a_tiny_run_trains_and_plays_within_the_optimum(tmp_path):
  out = tmp_path / "a2c.json"
  done = run_benchmark(
    "jumanji_a2c",
    "--env",
    "Knapsack-v1",
    "--seconds",
    "15",
    "--total-batch-size",
    "4",
    "--n-steps",
    "5",
    "--instances",
    "4",
    "--eval-seed",
    "7",
    "--json",
    str(out),
    timeout=600,
  )
  assert done.returncode == 0, done.stderr
  assert "greedy on 4 instances" in done.stdout
  report = json.loads(out.read_text())
  assert report["env"] == "Knapsack-v1" and report["epochs"] >= 1
  assert report["env_steps"] == report["epochs"] * 4 * 5
  curve = report["curve"]
  assert len(curve) == report["epochs"] and curve[-1]["env_steps"] == report["env_steps"]
  assert [point["epoch"] for point in curve] == list(range(1, report["epochs"] + 1))
  assert report["changed"]["total_batch_size"] == dict(jumanji=64, used=4)
  evaluation = report["evaluation"]
  assert evaluation["instances"] == 4 and evaluation["eval_seed"] == 7
  assert math.isfinite(evaluation["mean_return"]) and evaluation["mean_return"] > 0
  returns, optimal = np.array(evaluation["returns"]), np.array(evaluation["optimal"], float)
  assert np.all(returns <= optimal + 1e-4)
  assert evaluation["mean_return"] <= float(np.mean(optimal)) + 1e-4
  assert 0 <= evaluation["mean_gap"] <= 1 and evaluation["solved"] is None
