"""One process of the data-parallel training tests (tests/test_data_parallel.py).

Usage: python train_worker.py COORDINATOR_ADDRESS PROCESS_ID NUM_PROCESSES OUT.npz
       [DEVICES]
Trains a small tic-tac-toe network (`TINY`) with `jax.distributed` over
NUM_PROCESSES processes (none when 1) on `DEVICES` devices (default: all), and
writes from process 0 the final params' leaves, the positions of every iteration and
the first iteration's self-play records.
"""

import sys

import jax
import numpy as np

jax.config.update("jax_cpu_collectives_implementation", "gloo")

# Small enough for seconds per run; two iterations, so the second self-play runs
# under trained params.
TINY = dict(
  num_games=4,
  num_simulations=4,
  hidden=(16,),
  train_batch_size=8,
  train_steps=3,
  iterations=2,
  eval_games=0,
  progress=False,
)


def main(coordinator: str, process_id: int, num_processes: int, out_path: str, devices=None):
  if num_processes > 1:
    jax.distributed.initialize(
      coordinator_address=coordinator,
      num_processes=num_processes,
      process_id=process_id,
      local_device_ids=[0],
    )
  from mcgs_jax.apps import train

  config = train.Config.quick(**TINY, devices=devices)
  history = train.train(config)
  if process_id == 0:
    leaves = jax.tree_util.tree_leaves(history.params)
    np.savez(
      out_path,
      positions=np.asarray([entry["positions"] for entry in history]),
      devices=jax.device_count(),
      processes=jax.process_count(),
      **{f"leaf_{index}": np.asarray(leaf) for index, leaf in enumerate(leaves)},
    )


if __name__ == "__main__":
  devices = int(sys.argv[5]) if len(sys.argv) > 5 else None
  main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], devices)
