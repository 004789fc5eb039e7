"""The arena under `jax.distributed`: two CPU processes on this machine (coordinator
on localhost, gloo collectives), the games sharded over both processes' devices,
give the same match as one process."""

import json
import os
import socket
import subprocess
import sys

import pytest

WORKER = os.path.join(os.path.dirname(__file__), "distributed_worker.py")


def _free_port() -> int:
  with socket.socket() as sock:
    sock.bind(("localhost", 0))
    return sock.getsockname()[1]


def _run(num_processes: int, out_path: str) -> dict:
  address = f"localhost:{_free_port()}"
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=1", JAX_PLATFORMS="cpu")
  workers = [
    subprocess.Popen(
      [sys.executable, WORKER, address, str(index), str(num_processes), out_path],
      env=env,
      stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT,
      text=True,
    )
    for index in range(num_processes)
  ]
  logs = []
  for worker in workers:
    try:
      logs.append(worker.communicate(timeout=240)[0])
    except subprocess.TimeoutExpired:
      for other in workers:
        other.kill()
      pytest.fail("a distributed worker did not finish in 240 s")
  for worker, log in zip(workers, logs):
    assert worker.returncode == 0, log[-3000:]
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
