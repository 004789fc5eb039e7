"""Data-parallel training (`mcgs_jax.apps.train.data_parallel`): on two CPU devices of one
process and on two processes under `jax.distributed`, the same seed and total batch
play the same self-play games as one device, bit for bit, and end with the same
params to rounding: a training step sums its minibatch in another order across
devices (a partial sum per device, then an all-reduce), and float addition is not
associative. Measured: at most about 1e-5 apart after six Adam steps; the tests allow
1e-4."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from worker_processes import run_workers

from mcgs_jax.apps import train

HERE = os.path.dirname(__file__)
WORKER = os.path.join(HERE, "train_worker.py")
PARAMS_TOLERANCE = 1e-4


def _env(devices: int) -> dict:
  flags = os.environ.get("XLA_FLAGS", "")
  flags = f"{flags} --xla_force_host_platform_device_count={devices}".strip()
  return dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu")


def test_bad_devices_are_refused_by_name():
  with pytest.raises(ValueError, match=r"^devices must be an integer >= 1, got 0"):
    train.Config.quick(devices=0)
  with pytest.raises(ValueError, match=r"^devices must be at most the 1 device\(s\)"):
    train.train(train.Config.quick(devices=2, progress=False))


@pytest.mark.parametrize(
  "argv, message",
  [
    (["--devices", "0"], "--devices: devices must be an integer >= 1, got 0"),
    (["--devices", "2"], "--devices: devices must be at most the 1 device(s) JAX sees, got 2"),
  ],
)
def test_train_command_refuses_bad_devices_before_work(argv, message, capsys):
  assert train.main(argv) == 2
  captured = capsys.readouterr()
  lines = captured.err.strip().splitlines()
  assert captured.out == "" and len(lines) == 1, captured
  assert lines[0] == f"mcgs-jax train: error: {message}"


TWO_DEVICES = textwrap.dedent(
  """
  import dataclasses, json
  import jax, numpy as np
  from train_worker import TINY
  from mcgs_jax.apps import registry
  from mcgs_jax.apps.train import data_parallel
  from mcgs_jax.apps import train
  from mcgs_jax.games import networks

  report = dict(devices=jax.device_count())
  config = train.Config.quick(**TINY)
  board = registry.game_from_spec(config.game)
  apply_fn, params = networks.init_network(board.env, jax.random.PRNGKey(0), hidden=config.hidden)
  game = dataclasses.replace(
    board, evaluator=registry.make_evaluator("network", board.env, apply_fn=apply_fn)
  )
  mesh = data_parallel.training_mesh(None, num_games=4, train_batch_size=8)
  key = jax.random.PRNGKey(5)
  one = jax.device_get(train.make_self_play(game, config)(params, key))
  sharded = train.make_self_play(game, config, mesh)(params, key)
  report["self_play_devices"] = len(sharded["policy"].sharding.device_set)
  two = jax.device_get(sharded)
  report["self_play_equal"] = {name: bool(np.array_equal(one[name], two[name])) for name in one}

  runs = {}
  for devices in (1, None):
    history = train.train(train.Config.quick(**TINY, devices=devices))
    runs[devices] = (history, jax.tree_util.tree_leaves(history.params))
  report["positions"] = [[entry["positions"] for entry in runs[d][0]] for d in (1, None)]
  report["params_gap"] = max(
    float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
    for a, b in zip(runs[1][1], runs[None][1])
  )
  # Stopped after its first iteration and resumed on the two devices: the same run.
  import tempfile
  with tempfile.TemporaryDirectory() as directory:
    stopped = dict(TINY, iterations=1, checkpoint_dir=directory)
    train.train(train.Config.quick(**stopped))
    resumed = train.train(train.Config.quick(**dict(stopped, iterations=2)), resume=True)
  report["resumed_equal"] = all(
    np.array_equal(a, b)
    for a, b in zip(jax.tree_util.tree_leaves(resumed.params), runs[None][1])
  )
  for field, value in (("num_games", 3), ("train_batch_size", 7)):
    try:
      train.train(train.Config.quick(**dict(TINY, **{field: value})))
      report[field] = "accepted"
    except ValueError as error:
      report[field] = str(error)
  print(json.dumps(report))
  """
)


@pytest.mark.slow
def test_two_devices_train_as_one_device():
  completed = subprocess.run(
    [sys.executable, "-c", TWO_DEVICES],  # run from HERE: `-c` puts it first on the path
    cwd=HERE,
    env=_env(2),
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  report = json.loads(completed.stdout.strip().splitlines()[-1])
  assert report["devices"] == 2
  assert report["self_play_devices"] == 2, "self-play was not split over both devices"
  assert all(report["self_play_equal"].values()), report["self_play_equal"]
  one_device, two_devices = report["positions"]
  assert one_device == two_devices
  assert report["params_gap"] < PARAMS_TOLERANCE
  assert report["resumed_equal"], "a run stopped and resumed on two devices differs"
  assert report["num_games"].startswith("num_games must be a multiple of the 2 devices")
  assert report["train_batch_size"].startswith("train_batch_size must be a multiple of the 2")


def _train_in_processes(num_processes: int, out_path: str) -> dict:
  run_workers(WORKER, num_processes, out_path, _env(1), timeout=300)
  with np.load(out_path) as stored:
    return {name: stored[name] for name in stored.files}


@pytest.mark.slow
def test_two_processes_train_as_one(tmp_path):
  single = _train_in_processes(1, str(tmp_path / "one.npz"))
  double = _train_in_processes(2, str(tmp_path / "two.npz"))
  assert int(single["processes"]) == 1 and int(double["processes"]) == 2
  assert int(double["devices"]) == 2, "training was not spread over both processes"
  np.testing.assert_array_equal(double["positions"], single["positions"])
  leaves = sorted(name for name in single if name.startswith("leaf_"))
  assert leaves and leaves == sorted(name for name in double if name.startswith("leaf_"))
  for name in leaves:
    np.testing.assert_allclose(double[name], single[name], rtol=0, atol=PARAMS_TOLERANCE)
