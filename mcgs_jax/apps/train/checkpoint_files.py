"""The training loop's checkpoint files: a network with its optimiser state
(`save_checkpoint`, `load_checkpoint`), a trained network alone (`load_network`),
where `train` writes them (`checkpoint_path`), the lock that keeps one run per
checkpoint directory (`run_lock`), and the state of a run that every checkpoint
`train` writes holds, so that `train(..., resume=True)` continues it exactly (`RunState`,
`save_run`, `resume_run`)."""

import contextlib
import dataclasses
import datetime
import json
import os
import socket
import sys
from collections.abc import Iterator
from typing import Any

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax.apps import files
from mcgs_jax.apps.train import data_parallel
from mcgs_jax.apps.train.config import Config
from mcgs_jax.apps.train.history import History
from mcgs_jax.apps.train.replay import ReplayBuffer
from mcgs_jax.games import networks

try:
  import fcntl
except ImportError:  # Windows: no flock, and no lock (`run_lock`)
  fcntl = None  # type: ignore[assignment]


def save_checkpoint(path: str, params, opt_state=None, iteration: int = 0, run_state=None) -> str:
  """Writes params (and optimiser state) with `flax.serialization.to_bytes`, sealed
  with its length and SHA-256 and written atomically (`mcgs_jax.apps.files`): a kill
  during the write leaves the old file or none, never a part of one.

  Without `opt_state` the file holds the network only (about a third of the size
  with Adam's state), which is all an arena agent or an evaluation needs.
  """
  payload = dict(params=params, opt_state=opt_state, iteration=iteration)
  if run_state is not None:  # what `train(..., resume=True)` needs besides
    payload["run_state"] = run_state
  return files.write_atomically(path, files.seal(flax.serialization.to_bytes(payload)))


def read_state(path: str) -> dict:
  """The state dict stored in the checkpoint `path` (verified by `files.unseal`)."""
  payload = files.unseal(path)
  try:
    state = flax.serialization.msgpack_restore(payload)
  except Exception:  # msgpack's and flax's many error types: all mean the same here
    raise files.CheckpointError(f"checkpoint {path!r} is not a flax checkpoint") from None
  if not isinstance(state, dict) or "params" not in state:
    raise files.CheckpointError(f"checkpoint {path!r} holds no params (not written by train)")
  return state


def shape_mismatch(template, restored) -> str | None:
  """The first leaf whose shape differs, as `'path: file (..) vs expected (..)'`."""
  expected = jax.tree_util.tree_leaves_with_path(template)
  found = jax.tree_util.tree_leaves(restored)
  for (leaf_path, want), got in zip(expected, found, strict=True):
    if np.shape(want) != np.shape(got):
      name = jax.tree_util.keystr(leaf_path)
      return f"{name}: {np.shape(got)} in the file, {np.shape(want)} expected"
  return None


def load_checkpoint(path: str, params_template, opt_state_template=None):
  """Reads a checkpoint into the given templates; returns `(params, opt_state,
  iteration)`.

  Raises:
    files.CheckpointError (a ValueError) naming `path` when the file is missing,
    empty, truncated or damaged, holds another network (other layers or widths than
    `params_template`), or holds no optimiser state while `opt_state_template` asks
    for one.
  """
  state = read_state(path)
  if opt_state_template is not None and state.get("opt_state") is None:
    raise files.CheckpointError(
      f"checkpoint {path!r} holds no optimiser state (written with params only, e.g. "
      "by --save-params); load it without opt_state_template"
    )
  template = dict(params=params_template, opt_state=opt_state_template, iteration=0)
  if opt_state_template is None:
    state = dict(state, opt_state=None)
  try:
    payload = flax.serialization.from_state_dict(template, state)
  except (ValueError, KeyError, TypeError) as error:
    raise files.CheckpointError(
      f"checkpoint {path!r} holds another network or optimiser: {error}"
    ) from None
  for name in ("params", "opt_state"):
    mismatch = shape_mismatch(template[name], payload[name])
    if mismatch:
      raise files.CheckpointError(
        f"checkpoint {path!r} holds {name} of other shapes (another width or game?): {mismatch}"
      )
  return payload["params"], payload["opt_state"], int(payload["iteration"])


_NETWORKS: dict[Any, Any] = {}  # (env, hidden) -> (apply_fn, params template)


def _architecture(path: str, layers: dict) -> tuple[str, tuple[int, ...]]:
  """`(network spec, hidden widths)` of the params' layers (`networks.init_network`'s
  arguments), read from the kernels' shapes."""
  if "embed" in layers and "policy_head" in layers:  # an EntityPolicyValueNet
    blocks = sum(name.startswith("MultiHeadDotProductAttention_") for name in layers)
    width = int(np.shape(layers["embed"]["kernel"])[-1])
    return f"entity:{blocks},{width}", ()
  if "stem" in layers and "policy_head" in layers:  # a ResNetPolicyValueNet
    blocks = sum(name.startswith("ResidualBlock_") for name in layers)
    channels = int(np.shape(layers["stem"]["kernel"])[-1])
    return f"resnet:{blocks},{channels}", ()
  if "Dense_0" not in layers or "policy_head" not in layers:
    raise files.CheckpointError(f"checkpoint {path!r} holds no policy-value network")
  hidden: list[int] = []
  while f"Dense_{len(hidden)}" in layers:
    hidden.append(int(np.shape(layers[f"Dense_{len(hidden)}"]["kernel"])[-1]))
  return "mlp", tuple(hidden)


def load_network(path: str, env):
  """`(apply_fn, params, iteration)` of the network in a checkpoint: an
  `MLPPolicyValueNet`, a `ResNetPolicyValueNet` or an `EntityPolicyValueNet`
  (`mcgs_jax.games.networks`).

  The architecture is read from the file (the kernels' shapes), so no `Config` is
  needed; `env` gives the observation shape, the number of actions and the value's
  bounds. Checkpoints of the same architecture share one `apply_fn` (so arena agents
  built from them share compiled steps).
  """
  payload = read_state(path)
  layers = payload["params"].get("params", {}) if isinstance(payload["params"], dict) else {}
  network, hidden = _architecture(path, layers)
  cache_key = (id(env), network, hidden)
  if cache_key not in _NETWORKS:
    _NETWORKS[cache_key] = (env,) + networks.init_network(
      env, jax.random.PRNGKey(0), hidden=hidden, network=network
    )
  _, apply_fn, template = _NETWORKS[cache_key]
  params = flax.serialization.from_state_dict(template, payload["params"])
  expected = jax.tree_util.tree_map(np.shape, template)
  found = jax.tree_util.tree_map(np.shape, params)
  if expected != found:
    first = {"mlp": "Dense_0", "resnet": "stem"}.get(network.partition(":")[0], "embed")
    size = lambda shapes: (
      shapes["params"][first]["kernel"][-2],
      shapes["params"]["policy_head"]["kernel"][-1],
    )
    raise files.CheckpointError(
      f"checkpoint {path!r}: the network does not fit this game (observation size and "
      f"actions {size(found)}, the game has {size(expected)})"
    )
  return apply_fn, params, int(payload.get("iteration", 0))


def checkpoint_path(directory: str, iteration: int) -> str:
  """`directory/iteration_XXXX.msgpack`, where `train` writes iteration's checkpoint."""
  return os.path.join(directory, f"iteration_{iteration:04d}.msgpack")


def existing_checkpoints(directory: str | None) -> list[str]:
  """The `iteration_XXXX.msgpack` files already in `directory` (sorted; none when it
  does not exist)."""
  if not directory or not os.path.isdir(directory):
    return []
  return sorted(
    name
    for name in os.listdir(directory)
    if name.startswith("iteration_") and name.endswith(".msgpack")
  )


def claim_checkpoint_dir(directory: str | None, overwrite: bool) -> None:
  """Refuses (ValueError) a `checkpoint_dir` that holds another run's checkpoints,
  unless `overwrite`, which deletes them first (so no file of the old run is left to
  be mistaken for this one's)."""
  found = existing_checkpoints(directory)
  if not found or directory is None:
    return
  if not overwrite:
    shown = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
    raise ValueError(
      f"checkpoint_dir {directory!r} already holds {len(found)} checkpoint(s) of another "
      f"run ({shown}); pass overwrite=True (--overwrite) to replace them, or choose "
      "another directory"
    )
  for name in found:
    os.unlink(os.path.join(directory, name))


# The lock file of a checkpoint directory (`run_lock`); it holds the text naming the
# process that holds the lock.
LOCK_NAME = ".mcgs-jax-train.lock"
_HELD_LOCKS: set[str] = set()  # the directories this process holds (real paths)


class CheckpointDirInUse(ValueError):
  """Another training run holds the checkpoint directory; the message names it."""


@contextlib.contextmanager
def run_lock(directory: str | None) -> Iterator[None]:
  """Holds `directory`'s lock for the block, so that two training runs never write
  one checkpoint directory: an exclusive `flock` on `directory/LOCK_NAME` (created
  with the directory), which the kernel releases when the block ends or the process
  does, by any exit (a `kill -9` too). Re-entrant within a process (`mcgs-jax train`
  takes it before its checks and `train` again). Nothing is locked without a
  directory, on a process that writes no files (`jax.distributed`'s others), or
  where `fcntl` is missing (Windows).

  Raises:
    CheckpointDirInUse (a ValueError) naming the process, host, start and command of
      the run that holds the lock; ValueError naming `checkpoint_dir` when no file
      can be created there.
  """
  key = os.path.realpath(directory) if directory else ""
  if not directory or fcntl is None or key in _HELD_LOCKS or not data_parallel.writes_files():
    yield
    return
  descriptor = _acquire_lock(directory)
  _HELD_LOCKS.add(key)
  try:
    yield
  finally:
    _HELD_LOCKS.discard(key)
    os.close(descriptor)  # releases the flock


def _acquire_lock(directory: str) -> int:
  """The open descriptor of `directory`'s lock file, locked, with this process named
  in it (see `run_lock` for the errors)."""
  try:
    os.makedirs(directory, exist_ok=True)
    descriptor = os.open(os.path.join(directory, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o666)
  except OSError as error:
    reason = error.strerror or type(error).__name__
    raise ValueError(f"checkpoint_dir {directory!r}: cannot write files there ({reason})") from None
  try:
    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except OSError:  # BlockingIOError: held
    holder = os.pread(descriptor, 4096, 0).decode("utf-8", "replace").strip()
    os.close(descriptor)
    raise CheckpointDirInUse(
      f"checkpoint_dir {directory!r} is in use by another training run "
      f"({holder or 'a process that has not named itself yet'}); wait for it to end, "
      "or choose another directory"
    ) from None
  started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
  holder = f"process {os.getpid()} on {socket.gethostname()}, since {started}: "
  holder += " ".join(sys.argv)
  os.ftruncate(descriptor, 0)
  os.pwrite(descriptor, holder.encode("utf-8"), 0)
  return descriptor


# ----------------------------------------------------------------------------------
# A run's state


@dataclasses.dataclass
class RunState:
  """What a training run carries from one iteration to the next (all of it goes into
  every checkpoint `train` writes, so that `resume` continues exactly)."""

  params: Any
  opt_state: Any
  previous_params: Any
  key: Any  # the jax key the next iteration splits
  rng: np.random.Generator  # draws the training minibatches
  buffer: ReplayBuffer
  history: History


def save_run(path: str, run: RunState, iteration: int) -> None:
  """The checkpoint of `iteration`: params, optimiser state and the rest of `run`
  (written by process 0 alone under `jax.distributed`)."""
  if not data_parallel.writes_files():
    return
  config = run.history.config
  run_state = dict(
    config=json.dumps(dataclasses.asdict(config) if config is not None else {}),
    key=np.asarray(run.key),
    rng=json.dumps(run.rng.bit_generator.state),
    buffer=dict(size=run.buffer.size, cursor=run.buffer.cursor, data=dict(run.buffer.data)),
    previous_params=run.previous_params,
    history=json.dumps(list(run.history)),
    initial_checkpoint=run.history.initial_checkpoint or "",
  )
  params, opt_state = data_parallel.fetch((run.params, run.opt_state))
  save_checkpoint(path, params, opt_state, iteration, run_state=run_state)


# Config fields a resumed run may change: they do not change what it computes.
# `devices` changes only the rounding of the training steps' sums; `checkpoint_dir`
# is the run's by identity (its checkpoints were read from there), whatever its
# spelling (a trailing slash, an absolute path, another working directory, a move).
_RESUMABLE_CHANGES = (
  "checkpoint_dir",
  "iterations",
  "max_seconds",
  "progress",
  "eval_games",
  "eval_every",
  "devices",
)


def resume_run(config: Config, run: RunState, overwrite: bool) -> int:
  """Restores `run` from the last complete checkpoint in `config.checkpoint_dir`
  that holds a run's state; returns its iteration (0 when there is none: the run
  starts afresh, in a directory `claim_checkpoint_dir` accepts with `overwrite`). A
  damaged last checkpoint (a kill during its write leaves none, but a disk can) is
  skipped for the one before. ValueError when the run's config differs from `config`
  in a field other than `_RESUMABLE_CHANGES`, or its checkpoint is of an iteration
  past `config.iterations`."""
  found = last_run_checkpoint(config.checkpoint_dir)
  if found is None:
    if data_parallel.writes_files():  # params-only or damaged files: not this run's
      claim_checkpoint_dir(config.checkpoint_dir, overwrite)
    return 0
  path, state = found
  run_state = state["run_state"]
  _check_same_run(path, json.loads(run_state["config"]), config)
  check_resumable_iterations(path, int(state["iteration"]), config.iterations)
  restore = flax.serialization.from_state_dict
  run.params = restore(run.params, state["params"])
  run.opt_state = restore(run.opt_state, state["opt_state"])
  run.previous_params = restore(run.previous_params, run_state["previous_params"])
  run.key = jnp.asarray(run_state["key"], jnp.uint32)
  run.rng.bit_generator.state = json.loads(run_state["rng"])
  buffer = run_state["buffer"]
  run.buffer.size, run.buffer.cursor = int(buffer["size"]), int(buffer["cursor"])
  run.buffer.data = {name: np.array(array) for name, array in buffer["data"].items()}
  run.history.extend(json.loads(run_state["history"]))
  run.history.initial_checkpoint = run_state["initial_checkpoint"] or None
  return int(state["iteration"])


def last_run_checkpoint(directory: str | None) -> tuple[str, dict] | None:
  """`(path, state)` of the last readable checkpoint in `directory` that holds a
  run's state (`train` writes it into every checkpoint), or None."""
  for name in reversed(existing_checkpoints(directory)):
    path = os.path.join(str(directory), name)
    try:
      state = read_state(path)
    except files.CheckpointError:
      continue
    if isinstance(state.get("run_state"), dict):
      return path, state
  return None


# The run's config, written into its checkpoint directory when it starts, so that a
# run killed before its first checkpoint can be resumed (afresh) by its directory alone.
RUN_CONFIG_NAME = "run_config.json"


def save_run_config(config: Config) -> None:
  """Writes `config` as JSON to `config.checkpoint_dir/RUN_CONFIG_NAME`, atomically
  (process 0 alone under `jax.distributed`; nothing without a directory)."""
  if config.checkpoint_dir and data_parallel.writes_files():
    path = os.path.join(config.checkpoint_dir, RUN_CONFIG_NAME)
    files.write_atomically(path, json.dumps(dataclasses.asdict(config)))


def read_run_config(directory: str) -> dict | None:
  """The config `save_run_config` wrote into `directory` (a dict of `Config`'s
  fields, as JSON holds them), or None where there is none or it cannot be read."""
  try:
    with open(os.path.join(directory, RUN_CONFIG_NAME)) as file:
      stored = json.load(file)
  except (OSError, ValueError):
    return None
  return stored if isinstance(stored, dict) else None


def check_resumable_iterations(path: str, iteration: int, iterations: int) -> None:
  """ValueError when a run whose last checkpoint `path` is of `iteration` is resumed
  with fewer `iterations`: it would return that later network labelled as an earlier
  one."""
  if iteration > iterations:
    raise ValueError(
      f"resume: the run's last checkpoint {path!r} is of iteration {iteration}, past "
      f"iterations={iterations}; give iterations >= {iteration} (load_checkpoint reads "
      "an earlier checkpoint's network)"
    )


def _check_same_run(path: str, stored: dict, config: Config) -> None:
  """ValueError naming the first config field in which `config` differs from the
  run that wrote `path`."""
  given = json.loads(json.dumps(dataclasses.asdict(config)))
  for field, value in stored.items():
    if field not in _RESUMABLE_CHANGES and given.get(field) != value:
      raise ValueError(
        f"resume: checkpoint {path!r} is of a run with {field}={value!r}, not "
        f"{given.get(field)!r}; resume with that run's config"
      )
