"""The arena under `jax.distributed`: two CPU processes on this machine (coordinator
on localhost, gloo collectives), the games sharded over both processes' devices,
give the same match as one process."""

import json
import os

import pytest
from worker_processes import run_workers

WORKER = os.path.join(os.path.dirname(__file__), "distributed_worker.py")


def _run(num_processes: int, out_path: str) -> dict:
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=1", JAX_PLATFORMS="cpu")
  run_workers(WORKER, num_processes, out_path, env, timeout=240)
  with open(out_path) as handle:
    return json.load(handle)


@pytest.mark.slow
def test_two_processes_play_the_same_match_as_one(tmp_path):
  single = _run(1, str(tmp_path / "one.json"))
  double = _run(2, str(tmp_path / "two.json"))
  assert single["processes"] == 1 and double["processes"] == 2
  assert double["devices"] == 2, "the games were not spread over both processes"
  assert double["outcomes"] == single["outcomes"]
  assert double["openings"] == single["openings"]
  assert double["nodes_a"] == pytest.approx(single["nodes_a"])
  assert double["nodes_b"] == pytest.approx(single["nodes_b"])
