"""How a training run stops and resumes (issue 50): every stop (`--max-seconds`,
Ctrl-C) checkpoints the last iteration played; a diverged run stops, naming it, with
only finite checkpoints; a resume finds its directory by identity, not spelling, and
refuses what would lose or mislabel work (`--overwrite`, fewer `--iterations` than
its last checkpoint, a directory of params-only checkpoints); numpy values in a
`Config` are written as JSON.

The Ctrl-C test runs `mcgs-jax train` in a subprocess held inside its second
iteration until the interrupt has come, so the moment is known.
"""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mcgs_jax.apps import files, registry
from mcgs_jax.apps import train as train_lib
from mcgs_jax.apps.train import checkpoint_files
from mcgs_jax.games import networks

pytest.importorskip("pgx")

# A run of a few seconds an iteration (as tests/test_checkpoint_files.py's).
TINY = dict(
  num_games=8,
  num_simulations=8,
  hidden=(16,),
  train_steps=5,
  train_batch_size=32,
  eval_games=0,
  progress=False,
)


def _bytes_of(directory) -> dict[str, bytes]:
  """The checkpoints in `directory`, by name."""
  names = train_lib.existing_checkpoints(str(directory))
  return {name: (directory / name).read_bytes() for name in names}


@pytest.mark.slow
def test_a_max_seconds_stop_checkpoints_its_last_iteration(tmp_path):
  """With `checkpoint_every=0` only the last of 3 iterations would be checkpointed;
  a budget that stops the run after iteration 1 checkpoints iteration 1, and the
  run resumes from it."""
  config = train_lib.Config.quick(
    **TINY, iterations=3, checkpoint_every=0, max_seconds=1e-6, checkpoint_dir=str(tmp_path)
  )
  history = train_lib.train(config)
  assert [entry["iteration"] for entry in history] == [1]
  assert history[-1]["checkpoint"] == train_lib.checkpoint_path(str(tmp_path), 1)
  assert train_lib.existing_checkpoints(str(tmp_path)) == ["iteration_0001.msgpack"]
  resumed = train_lib.train(
    dataclasses.replace(config, iterations=2, max_seconds=None), resume=True
  )
  assert [entry["iteration"] for entry in resumed] == [1, 2]


@pytest.mark.slow
def test_a_resume_finds_its_directory_by_identity_and_refuses_what_loses_work(
  tmp_path, monkeypatch, capsys
):
  monkeypatch.chdir(tmp_path)
  config = train_lib.Config.quick(**TINY, iterations=2, checkpoint_dir="r1")
  train_lib.train(config)
  written = _bytes_of(tmp_path / "r1")
  # --overwrite would delete the checkpoints --resume continues from.
  assert train_lib.main(["--resume", "r1", "--overwrite"]) == 2
  assert "--overwrite deletes the checkpoints that --resume" in capsys.readouterr().err
  # Fewer iterations than the last checkpoint's: that network, mislabelled.
  with pytest.raises(ValueError, match=r"iteration 2, past iterations=1"):
    train_lib.train(dataclasses.replace(config, iterations=1), resume=True)
  assert train_lib.main(["--resume", "r1", "--iterations", "1"]) == 2
  assert "--iterations 1: resume: the run's last checkpoint" in capsys.readouterr().err
  assert _bytes_of(tmp_path / "r1") == written
  # Another spelling, another working directory, a moved directory: the same run.
  for spelling in ("r1/", str(tmp_path / "r1"), os.path.join("..", tmp_path.name, "r1")):
    if spelling.startswith(".."):
      monkeypatch.chdir(tmp_path / "r1")
    resumed = train_lib.train(dataclasses.replace(config, checkpoint_dir=spelling), resume=True)
    assert [entry["iteration"] for entry in resumed] == [1, 2]
  monkeypatch.chdir(tmp_path)
  os.rename("r1", "moved")
  args = train_lib.build_parser().parse_args(["--resume", "moved/", "--iterations", "2"])
  resumed = train_lib.train(train_lib.resumed_config(args), resume=True)
  assert [entry["iteration"] for entry in resumed] == [1, 2]


def test_a_resume_refuses_a_directory_of_params_only_checkpoints(tmp_path):
  """Params-only files (`--save-params`) hold no run to resume: resuming there would
  start afresh over them, so it is refused as another run's directory."""
  directory = tmp_path / "ck"
  config = train_lib.Config.quick(**TINY, checkpoint_dir=str(directory))
  _, params = networks.init_network(
    registry.game_from_spec("tic_tac_toe").env, jax.random.PRNGKey(0), hidden=(16,)
  )
  train_lib.save_checkpoint(str(directory / "iteration_0001.msgpack"), params, None, 7)
  written = _bytes_of(directory)
  with pytest.raises(ValueError, match="already holds 1 checkpoint"):
    train_lib.train(config, resume=True)
  assert _bytes_of(directory) == written


@pytest.mark.slow
def test_a_diverged_run_stops_by_name_with_only_finite_checkpoints(tmp_path, capsys):
  directory, history = tmp_path / "ck", tmp_path / "history.json"
  argv = ["--quick", "--games", "8", "--simulations", "8", "--hidden", "16"]
  argv += ["--train-steps", "5", "--train-batch-size", "32", "--eval-games", "0"]
  argv += ["--learning-rate", "1e30", "--checkpoint-dir", str(directory), "--checkpoint-at", "0"]
  assert train_lib.main([*argv, "--history", str(history)]) == 1
  error = capsys.readouterr().err.strip()
  assert error.startswith("mcgs-jax train: error: iteration 1: the training loss is nan")
  assert len(error.splitlines()) == 1
  assert train_lib.existing_checkpoints(str(directory)) == ["iteration_0000.msgpack"]
  assert not history.exists()  # no iteration finished
  _, params = networks.init_network(
    registry.game_from_spec("tic_tac_toe").env, jax.random.PRNGKey(0), hidden=(16,)
  )
  config = train_lib.Config.quick(**TINY)
  half = jax.tree_util.tree_map(lambda leaf: leaf.astype(jnp.float16), params)
  with pytest.raises(ValueError, match=r"^params: .* is float16, the network's is float32"):
    train_lib.train(config, params=half)
  nan = jax.tree_util.tree_map(lambda leaf: leaf.at[0].set(jnp.nan), params)
  with pytest.raises(ValueError, match=r"^params: .* holds a NaN or an infinity"):
    train_lib.train(config, params=nan)


def test_numpy_values_in_a_config_are_written_as_json():
  config = train_lib.Config.quick(
    seed=np.int64(1),
    learning_rate=np.float32(0.5),
    make_room=np.bool_(False),
    hidden=np.array([16, 8]),
    checkpoint_at=[np.int64(0)],
  )
  assert (config.seed, config.hidden, config.checkpoint_at) == (1, (16, 8), (0,))
  assert type(config.seed) is int and type(config.learning_rate) is float
  assert json.loads(json.dumps(dataclasses.asdict(config)))["seed"] == 1


# `mcgs-jax train` (through the command line's SIGINT handler) whose second iteration
# waits, once its self-play is done, until Ctrl-C has asked the run to stop.
HOLD_TRAIN = textwrap.dedent(
  """
  import sys, time
  from mcgs_jax.apps import partial
  from mcgs_jax.apps import cli
  from mcgs_jax.apps.train import loop as train

  self_play_iteration = train._self_play_iteration

  def held_in_iteration_two(entry, *args):
    result = self_play_iteration(entry, *args)
    if entry["iteration"] == 2:
      print("held in iteration 2", file=sys.stderr, flush=True)
      while not partial.stop_requested():
        time.sleep(0.05)
    return result

  train._self_play_iteration = held_in_iteration_two
  sys.exit(cli.main(sys.argv[1:]))
  """
)


@pytest.mark.slow
def test_ctrl_c_ends_the_running_iteration_and_checkpoints_it(tmp_path):
  directory = tmp_path / "ck"
  argv = ["--no-cache", "train", "--quick", "--games", "8", "--simulations", "8"]
  argv += ["--hidden", "16", "--train-steps", "5", "--train-batch-size", "32"]
  argv += ["--eval-games", "0", "--iterations", "4", "--checkpoint-every", "0"]
  process = subprocess.Popen(
    [sys.executable, "-c", HOLD_TRAIN, *argv, "--checkpoint-dir", str(directory)],
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )
  try:
    for line in process.stderr:
      if line.startswith("held in iteration 2"):
        break
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
  finally:
    if process.poll() is None:
      process.kill()
      process.wait()
  assert process.returncode == 130, err
  assert "Traceback" not in err
  lines = err.strip().splitlines()
  assert lines[-2].startswith("mcgs-jax train: interrupted: the running iteration ends")
  assert lines[-1] == "mcgs-jax train: interrupted"
  # Without the stop only iteration 4 would have been checkpointed.
  assert train_lib.existing_checkpoints(str(directory)) == ["iteration_0002.msgpack"]
  state = checkpoint_files.read_state(str(directory / "iteration_0002.msgpack"))
  assert [entry["iteration"] for entry in json.loads(state["run_state"]["history"])] == [1, 2]
  files.unseal(str(directory / "iteration_0002.msgpack"))


@pytest.mark.slow
def test_a_run_killed_before_its_first_checkpoint_resumes_afresh(tmp_path, capsys):
  """`mcgs-jax train --resume DIR` for a run killed (SIGKILL) before its first
  checkpoint starts that run afresh, with its own flags (the docs said so and the
  command exited 2; issue 60, defect 6): the run's config is in DIR from its start.
  The resumed run ends with the params of the same run never killed; a directory
  with neither a checkpoint nor a config is still refused."""
  argv = ["train", "--quick", "--games", "8", "--simulations", "8", "--hidden", "16"]
  argv += ["--train-steps", "5", "--train-batch-size", "32", "--eval-games", "0"]
  argv += ["--iterations", "1", "--checkpoint-every", "0"]
  killed = tmp_path / "killed"
  config_file = killed / checkpoint_files.RUN_CONFIG_NAME
  command = [sys.executable, "-m", "mcgs_jax.apps.cli", "--no-cache", *argv]
  process = subprocess.Popen(command + ["--checkpoint-dir", str(killed)])
  try:
    while process.poll() is None and not config_file.exists():
      time.sleep(0.01)
    process.kill()
    process.wait()
  finally:
    if process.poll() is None:
      process.kill()
  assert config_file.exists() and train_lib.existing_checkpoints(str(killed)) == []

  assert train_lib.main(["--resume", str(killed)]) == 0
  whole = tmp_path / "whole"
  assert train_lib.main(argv[1:] + ["--checkpoint-dir", str(whole)]) == 0
  env = registry.game_from_spec("tic_tac_toe").env  # --quick's game
  resumed, uninterrupted = (
    checkpoint_files.load_network(train_lib.checkpoint_path(str(d), 1), env)[1]
    for d in (killed, whole)
  )
  for a, b in zip(jax.tree.leaves(resumed), jax.tree.leaves(uninterrupted), strict=True):
    np.testing.assert_array_equal(a, b)

  (tmp_path / "empty").mkdir()
  capsys.readouterr()
  assert train_lib.main(["--resume", str(tmp_path / "empty")]) == 2
  assert "no checkpoint or config of a train run there" in capsys.readouterr().err
