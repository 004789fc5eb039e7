"""Files that long jobs write survive kills and are refused by name when damaged.

`mcgs_jax.apps.files` writes every checkpoint, history and benchmark file through a
unique temporary file and a rename, and seals checkpoints with their length and
SHA-256; `mcgs_jax.apps.train` refuses a checkpoint directory another run filled, a
checkpoint of another width or without the optimiser state asked for, and `params`
of another width.
"""

import dataclasses
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from mcgs_jax.apps import benchmark, files
from mcgs_jax.apps import train as train_lib
from mcgs_jax.games import networks
from mcgs_jax.games.adapter import make_game

pytest.importorskip("pgx")


@pytest.fixture(scope="module")
def network():
  """Params of the (16,) and (24,) tic-tac-toe networks and an Adam state."""
  env = make_game("tic_tac_toe").env
  _, params = networks.init_network(env, jax.random.PRNGKey(0), hidden=(16,))
  _, wider = networks.init_network(env, jax.random.PRNGKey(0), hidden=(24,))
  return params, wider, optax.adam(1e-3).init(params)


def _zeros(tree):
  return jax.tree_util.tree_map(jnp.zeros_like, tree)


def test_sealed_round_trip_and_older_files(network, tmp_path):
  params, _, opt_state = network
  path = train_lib.save_checkpoint(str(tmp_path / "ck.msgpack"), params, opt_state, 3)
  loaded, loaded_opt, iteration = train_lib.load_checkpoint(path, _zeros(params), _zeros(opt_state))
  assert iteration == 3
  for a, b in zip(
    jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(loaded), strict=True
  ):
    np.testing.assert_array_equal(a, b)
  assert jax.tree_util.tree_structure(loaded_opt) == jax.tree_util.tree_structure(opt_state)
  assert not [name for name in os.listdir(tmp_path) if name.endswith(".partial")]
  # A file written before the envelope (bare flax bytes) still loads.
  older = tmp_path / "older.msgpack"
  older.write_bytes(flax.serialization.to_bytes(dict(params=params, opt_state=None, iteration=5)))
  _, _, iteration = train_lib.load_checkpoint(str(older), _zeros(params))
  assert iteration == 5


def _damaged(tmp_path, params, how: str) -> str:
  path = train_lib.save_checkpoint(str(tmp_path / f"{how}.msgpack"), params, None, 1)
  with open(path, "rb") as handle:
    data = handle.read()
  if how == "empty":
    data = b""
  elif how == "truncated":
    data = data[: len(data) // 2]
  elif how == "flipped":  # the payload is the envelope's last field
    data = data[:-1] + bytes([data[-1] ^ 0xFF])
  elif how == "text":
    data = b"not a checkpoint at all"
  with open(path, "wb") as handle:
    handle.write(data)
  return path


@pytest.mark.parametrize(
  "how, message",
  [
    ("empty", "is empty"),
    ("truncated", "truncated or not a checkpoint"),
    ("flipped", "SHA-256 does not match"),
    ("text", "not a"),
  ],
)
def test_damaged_checkpoints_are_refused_by_name(network, tmp_path, how, message):
  params, _, _ = network
  path = _damaged(tmp_path, params, how)
  for load in (
    lambda: train_lib.load_checkpoint(path, _zeros(params)),
    lambda: train_lib.load_network(path, make_game("tic_tac_toe").env),
  ):
    with pytest.raises(files.CheckpointError, match=message) as caught:
      load()
    assert path in str(caught.value)


def test_another_width_and_no_optimiser_state_are_refused(network, tmp_path):
  params, wider, opt_state = network
  path = train_lib.save_checkpoint(str(tmp_path / "narrow.msgpack"), params, None, 1)
  with pytest.raises(files.CheckpointError, match="other shapes") as caught:
    train_lib.load_checkpoint(path, _zeros(wider))
  assert "(16,)" in str(caught.value) or "16)" in str(caught.value)
  with pytest.raises(files.CheckpointError, match="no optimiser state"):
    train_lib.load_checkpoint(path, _zeros(params), _zeros(opt_state))
  with pytest.raises(files.CheckpointError, match="does not exist"):
    train_lib.load_checkpoint(str(tmp_path / "missing.msgpack"), _zeros(params))


def test_a_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
  path = str(tmp_path / "history.json")
  files.write_atomically(path, "old")

  def broken_fsync(_):
    raise OSError(28, "No space left on device")

  monkeypatch.setattr(os, "fsync", broken_fsync)
  with pytest.raises(OSError, match="No space"):
    files.write_atomically(path, "new" * 1000)
  with open(path) as handle:
    assert handle.read() == "old"
  assert os.listdir(tmp_path) == ["history.json"]  # no temporary file left


_WRITER = textwrap.dedent(
  """
  import sys
  from mcgs_jax.apps import files
  path, size = sys.argv[1], int(sys.argv[2])
  index = 1
  files.write_atomically(path, files.seal(bytes([index]) * size))
  print("ready", flush=True)  # one whole file exists: every kill lands on a rewrite
  while True:
    index += 1
    files.write_atomically(path, files.seal(bytes([index % 251]) * size))
  """
)


@pytest.mark.slow
def test_a_kill_during_writes_never_leaves_half_a_file(tmp_path):
  """A process rewriting a 20 MB checkpoint over and over, killed with SIGKILL at
  three moments: the file is always whole (its checksum holds)."""
  path = str(tmp_path / "ck.msgpack")
  rng = np.random.default_rng(0)
  for _ in range(3):
    writer = subprocess.Popen(
      [sys.executable, "-c", _WRITER, path, str(20_000_000)], stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout.readline().strip() == "ready"
    time.sleep(0.2 + float(rng.uniform(0.0, 0.4)))
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=30)
    payload = files.unseal(path)  # raises if half written
    assert len(payload) == 20_000_000 and len(set(payload[::1_000_000])) == 1


def test_two_runs_sharing_a_history_path(tmp_path):
  """Two writers of one path at once: neither fails, the file is always one of
  theirs, whole."""
  path = str(tmp_path / "shared.json")
  errors = []

  def write(label: str):
    try:
      for index in range(200):
        files.write_atomically(path, json.dumps({"run": label, "index": index, "pad": "x" * 5000}))
    except Exception as error:  # noqa: BLE001 - the test reports any failure
      errors.append(error)

  threads = [threading.Thread(target=write, args=(label,)) for label in "ab"]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join()
  assert not errors
  with open(path) as handle:
    assert json.load(handle)["index"] == 199
  assert os.listdir(tmp_path) == ["shared.json"]


def test_written_files_keep_the_mode_a_plain_open_gives(tmp_path):
  previous = os.umask(0o027)
  try:
    plain, atomic = tmp_path / "plain.json", tmp_path / "atomic.json"
    plain.write_text("{}")
    files.write_atomically(str(atomic), "{}")
    mode = lambda path: stat.S_IMODE(os.stat(path).st_mode)
    assert mode(atomic) == mode(plain) == 0o640  # not mkstemp's 0o600
    os.chmod(atomic, 0o644)
    files.write_atomically(str(atomic), "{}")
    assert mode(atomic) == 0o644  # a rewrite keeps the file's own mode
  finally:
    os.umask(previous)


def test_a_checkpoint_dir_where_no_file_can_go_is_refused_by_flag(tmp_path, capsys):
  blocker = tmp_path / "a_file"
  blocker.write_text("")
  places = [str(blocker / "sub")]
  if os.path.isdir("/proc/self"):  # root may "access" /proc, but nothing is created there
    places += ["/proc/forbidden", "/proc"]
  for place in places:
    assert train_lib.main(["--quick", "--checkpoint-dir", place]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"mcgs-jax train: error: --checkpoint-dir {place!r}: cannot write")
    assert len(error.splitlines()) == 1


# Holds a checkpoint directory's lock (as a training run does) until killed.
HOLD_LOCK = textwrap.dedent(
  """
  import sys, time
  from mcgs_jax.apps.train import checkpoint_files

  with checkpoint_files.run_lock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(300)
  """
)


def test_one_run_per_checkpoint_dir(tmp_path, capsys):
  """A run holds its checkpoint directory's lock while it runs: a second run there
  is refused before any work, naming the first one's process; the lock goes with the
  process, however it ends (here SIGKILL)."""
  directory = str(tmp_path / "ck")
  holder = subprocess.Popen(
    [sys.executable, "-c", HOLD_LOCK, directory], stdout=subprocess.PIPE, text=True
  )
  try:
    assert holder.stdout.readline().strip() == "locked"
    assert train_lib.main(["--quick", "--checkpoint-dir", directory]) == 2
    error = capsys.readouterr().err
    assert f"is in use by another training run (process {holder.pid} on " in error
    assert len(error.splitlines()) == 1
    config = train_lib.Config.quick(checkpoint_dir=directory, progress=False)
    with pytest.raises(train_lib.CheckpointDirInUse, match=f"process {holder.pid} on "):
      train_lib.train(config)
    with pytest.raises(train_lib.CheckpointDirInUse):
      train_lib.train(config, resume=True)
  finally:
    holder.kill()
    holder.wait()
  with train_lib.run_lock(directory), train_lib.run_lock(directory):  # free; re-entrant
    text = (tmp_path / "ck" / ".mcgs-jax-train.lock").read_text()
    assert text.startswith(f"process {os.getpid()} on ")
  assert train_lib.existing_checkpoints(directory) == []


def test_a_checkpoint_dir_of_another_run_is_refused(tmp_path):
  directory = tmp_path / "ck"
  directory.mkdir()
  (directory / "iteration_0003.msgpack").write_bytes(b"old")
  (directory / "notes.txt").write_text("kept")
  config = train_lib.Config.quick(checkpoint_dir=str(directory), progress=False)
  with pytest.raises(ValueError, match="already holds 1 checkpoint"):
    train_lib.train(config)
  assert train_lib.main(["--quick", "--checkpoint-dir", str(directory)]) == 2
  assert (directory / "iteration_0003.msgpack").exists()
  train_lib.claim_checkpoint_dir(str(directory), overwrite=True)
  # The checkpoints are gone; the lock file of the refused run stays (unlocked).
  assert sorted(os.listdir(directory)) == [".mcgs-jax-train.lock", "notes.txt"]


def test_params_of_another_width_are_refused(network):
  _, wider, _ = network
  config = train_lib.Config.quick(hidden=(16,), progress=False)
  with pytest.raises(ValueError, match=r"^params: another width"):
    train_lib.train(config, params=wider)


@pytest.mark.parametrize("flag", ["--json", "--markdown"])
def test_bench_output_that_is_a_directory_is_refused_before_work(tmp_path, flag, capsys):
  started = time.perf_counter()
  with pytest.raises(SystemExit) as caught:
    benchmark.main(["--quick", flag, str(tmp_path)])
  assert caught.value.code == 2
  assert "is a directory" in capsys.readouterr().err
  assert time.perf_counter() - started < 30  # refused, not run


@pytest.mark.parametrize("delay", [0.5, 4.0])
@pytest.mark.quick_variants("0.5")
def test_ctrl_c_ends_a_command_with_one_line_and_130(tmp_path, delay):
  """SIGINT during `mcgs-jax train --quick` (after it printed its config, while it
  compiles or plays): exit status 130, one line on stderr, no traceback, and the
  history written so far is whole."""
  history = tmp_path / "history.json"
  command = [sys.executable, "-m", "mcgs_jax.apps.cli", "--no-cache", "train", "--quick"]
  process = subprocess.Popen(
    [*command, "--history", str(history)],
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    cwd=tmp_path,
  )
  lines = [process.stdout.readline(), process.stdout.readline()]
  assert any(line.startswith("Config(") for line in lines), lines
  time.sleep(delay)
  process.send_signal(signal.SIGINT)
  _, err = process.communicate(timeout=120)
  assert process.returncode == 130, err
  assert "Traceback" not in err
  assert err.strip().splitlines()[-1] == "mcgs-jax train: interrupted"
  if history.exists():
    with open(history) as handle:
      assert "history" in json.load(handle)


RESUMABLE = dict(
  num_games=8,
  num_simulations=8,
  hidden=(16,),
  train_steps=5,
  train_batch_size=32,
  eval_games=0,
  progress=False,
  checkpoint_every=1,
)


def _assert_same_params(first, second):
  for a, b in zip(jax.tree_util.tree_leaves(first), jax.tree_util.tree_leaves(second), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.slow
def test_resume_continues_bit_for_bit(tmp_path):
  """A run stopped after 2 of 3 iterations and resumed ends with the params of the
  uninterrupted run, and its history holds every iteration once."""
  whole = train_lib.train(
    train_lib.Config.quick(**RESUMABLE, iterations=3, checkpoint_dir=str(tmp_path / "whole"))
  )
  stopped = train_lib.Config.quick(**RESUMABLE, iterations=2, checkpoint_dir=str(tmp_path / "cut"))
  train_lib.train(stopped)
  resumed = train_lib.train(dataclasses.replace(stopped, iterations=3), resume=True)
  _assert_same_params(whole.params, resumed.params)
  assert [entry["iteration"] for entry in resumed] == [1, 2, 3]
  with pytest.raises(ValueError, match="resume: checkpoint .* num_games=8"):
    train_lib.train(dataclasses.replace(stopped, num_games=16), resume=True)
  # The command line takes the run's flags from its checkpoints, and no others.
  args = train_lib.build_parser().parse_args(
    ["--resume", stopped.checkpoint_dir, "--iterations", "5"]
  )
  config = train_lib.resumed_config(args)
  assert (config.num_games, config.iterations, config.checkpoint_dir) == (
    8,
    5,
    stopped.checkpoint_dir,
  )
  assert train_lib.main(["--resume", stopped.checkpoint_dir, "--games", "4"]) == 2
  assert train_lib.main(["--resume", str(tmp_path / "nothing")]) == 2


_KILLABLE = textwrap.dedent(
  """
  import sys, time
  from mcgs_jax.apps import files
  from mcgs_jax.apps import train
  real_write = files.write_atomically
  slow_iteration = int(sys.argv[2])

  def announced_write(path, data):
    if path.endswith(f"iteration_{slow_iteration:04d}.msgpack"):
      # Stand in the middle of this write (temporary file written, not renamed) for
      # the killer to strike there.
      import os, tempfile
      handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".partial")
      os.write(handle, data[: len(data) // 2])
      print("inside a write", flush=True)
      time.sleep(60)
    return real_write(path, data)

  files.write_atomically = announced_write
  config = train.Config.quick(**eval(sys.argv[3]), iterations=4, checkpoint_dir=sys.argv[1])
  print("started", flush=True)
  train.train(config, resume=True)
  print("finished", flush=True)
  """
)


def _wait_for(process, text: str) -> None:
  """Reads `process`'s output lines until one is `text`."""
  for line in process.stdout:
    if line.strip() == text:
      return
  raise AssertionError(f"the process ended before printing {text!r}")


@pytest.mark.slow
def test_killed_runs_resume_to_the_uninterrupted_result(tmp_path):
  """A run killed with SIGKILL inside a checkpoint write (iteration 2's), resumed,
  killed again at a random moment, and resumed to the end: every checkpoint left
  is readable, and the final params are the uninterrupted run's, bit for bit."""
  directory = str(tmp_path / "run")
  whole = train_lib.train(
    train_lib.Config.quick(**RESUMABLE, iterations=4, checkpoint_dir=str(tmp_path / "whole"))
  )
  script = [sys.executable, "-c", _KILLABLE, directory]
  first = subprocess.Popen([*script, "2", repr(RESUMABLE)], stdout=subprocess.PIPE, text=True)
  _wait_for(first, "inside a write")
  first.send_signal(signal.SIGKILL)
  first.wait(timeout=30)
  # Killed inside iteration 2's write: iteration 1's checkpoint whole, the
  # half-written temporary file beside it.
  assert train_lib.existing_checkpoints(directory) == ["iteration_0001.msgpack"]
  assert any(name.endswith(".partial") for name in os.listdir(directory))
  second = subprocess.Popen([*script, "0", repr(RESUMABLE)], stdout=subprocess.PIPE, text=True)
  _wait_for(second, "started")
  time.sleep(float(np.random.default_rng(1).uniform(2.0, 6.0)))
  second.send_signal(signal.SIGKILL)
  second.wait(timeout=30)
  for name in train_lib.existing_checkpoints(directory):
    files.unseal(os.path.join(directory, name))  # none is unreadable
  config = train_lib.Config.quick(**RESUMABLE, iterations=4, checkpoint_dir=directory)
  resumed = train_lib.train(config, resume=True)
  _assert_same_params(whole.params, resumed.params)
  assert [entry["iteration"] for entry in resumed] == [1, 2, 3, 4]


def test_a_match_that_cannot_fit_is_refused_with_its_estimate(capsys):
  from mcgs_jax.apps.arena import match as arena
  from mcgs_jax.apps.cli import arena_command

  with pytest.raises(ValueError, match=r"needs about 0\.0 GB .* \(A 0\.0, B 0\.0\)"):
    arena.check_memory([10, 20], available=25)
  arena.check_memory([40, 40], available=100)
  assert "warning: the match's searches need" in capsys.readouterr().err
  arena.check_memory([5, 5], available=100)
  assert capsys.readouterr().err == ""
  game = make_game("connect_four")
  state = game.init(jax.random.PRNGKey(0), 4)
  small, large = (
    arena.estimated_search_bytes(game, arena.Agent(num_simulations=s), state) for s in (16, 64)
  )
  assert 3.9 < large / small < 4.1  # capacity 4 S + 1: linear in S
  assert arena_command.main(["--simulations", "100000"]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "GB for its searches' graphs" in err
