"""Data-parallel training over every device of every process.

`mcgs_jax.apps.train` plays its self-play games sharded over a one-axis
`jax.sharding.Mesh` of devices (the games axis, as the arena's matches) and trains on
minibatches sharded the same way, the network and Adam's state replicated on every
device: under `jit` the loss's mean over a sharded batch is reduced across the mesh,
so each step averages the gradients of all devices. Under `jax.distributed` the same
code spans several processes: each process holds the whole replay buffer (every
process adds the same gathered games and draws the same minibatches from the same
generator) and feeds its devices' part of each minibatch.

Games are independent, so sharded self-play plays the same games, bit for bit, as
one device. A training step sums its batch in another order across devices (float
addition is not associative), so its params agree with one device's to rounding,
not bit for bit (tests/test_data_parallel.py states the tolerance).
"""

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

MESH_AXIS = "games"


def training_mesh(devices: int | None, *, num_games: int, train_batch_size: int) -> Mesh | None:
  """The mesh training runs on: `devices` devices (None: every device of every
  process), or None for one device (the single-device program, unchanged).

  Raises:
    ValueError naming `devices` when more devices are asked for than there are, or
    (across processes) fewer than all; naming `num_games` or `train_batch_size` when
    it is not a multiple of the device count (each device takes an equal part).
  """
  available = jax.devices()
  count = len(available) if devices is None else int(devices)
  if count > len(available):
    raise ValueError(
      f"devices must be at most the {len(available)} device(s) JAX sees, got {devices}"
    )
  if jax.process_count() > 1 and count != len(available):
    raise ValueError(
      f"devices must be None or all {len(available)} devices of the {jax.process_count()} "
      f"processes (each process takes its own devices' part), got {devices}"
    )
  if count == 1:
    return None
  for name, value in (("num_games", num_games), ("train_batch_size", train_batch_size)):
    if value % count:
      raise ValueError(
        f"{name} must be a multiple of the {count} devices training uses (each takes an "
        f"equal part), got {value}; change it, or set devices (--devices) to a divisor"
      )
  return Mesh(np.asarray(available[:count]), (MESH_AXIS,))


def replicated(mesh: Mesh) -> NamedSharding:
  """The same value on every device (the network, Adam's state, keys, metrics)."""
  return NamedSharding(mesh, PartitionSpec())


def batch_sharded(mesh: Mesh, axis: int = 0) -> NamedSharding:
  """Arrays split over the mesh along `axis` (the games or positions axis)."""
  return NamedSharding(mesh, PartitionSpec(*([None] * axis), MESH_AXIS))


def shard_games(tree: Any, mesh: Mesh | None) -> Any:
  """Inside `jit`: asks for `tree`'s `[B, ...]` leaves split over the mesh on `B`
  (no-op without a mesh; scalars stay replicated)."""
  if mesh is None:
    return tree

  def constrain(leaf):
    sharding = batch_sharded(mesh) if np.ndim(leaf) > 0 else replicated(mesh)
    return jax.lax.with_sharding_constraint(leaf, sharding)

  return jax.tree_util.tree_map(constrain, tree)


def put(tree: Any, sharding: NamedSharding) -> Any:
  """A tree of host values (the same on every process) as global arrays of
  `sharding`: each process fills only its own devices' shards, so this works under
  `jax.distributed`, where a process cannot write to another's devices."""

  def global_array(leaf):
    value = np.asarray(leaf)
    return jax.make_array_from_callback(value.shape, sharding, lambda index: value[index])

  return jax.tree_util.tree_map(global_array, tree)


def fetch(tree: Any) -> Any:
  """Global arrays as whole numpy arrays on every process (gathered from the other
  processes under `jax.distributed`, copied from the local devices otherwise)."""
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils

    return jax.tree_util.tree_map(np.asarray, multihost_utils.process_allgather(tree, tiled=True))
  return jax.device_get(tree)


def writes_files() -> bool:
  """True on the process that writes the run's files (checkpoints, history): process
  0; the others compute the same values and write nothing."""
  return jax.process_index() == 0
