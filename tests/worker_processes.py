"""Starting one worker script as several local processes under `jax.distributed`
(coordinator on localhost), for the tests that compare them with one process
(`tests/test_distributed.py`, `tests/test_data_parallel.py`)."""

import socket
import subprocess
import sys

import pytest


def free_port() -> int:
  """A TCP port on localhost that nothing listens on now."""
  with socket.socket() as sock:
    sock.bind(("localhost", 0))
    return sock.getsockname()[1]


def run_workers(script: str, num_processes: int, out_path: str, env: dict, timeout: float) -> None:
  """Runs `script COORDINATOR PROCESS_ID NUM_PROCESSES OUT_PATH` in `num_processes`
  processes at once; fails the test when one does not finish in `timeout` seconds or
  exits with an error (its log's end in the message)."""
  address = f"localhost:{free_port()}"
  workers = [
    subprocess.Popen(
      [sys.executable, script, address, str(index), str(num_processes), out_path],
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
      logs.append(worker.communicate(timeout=timeout)[0])
    except subprocess.TimeoutExpired:
      for other in workers:
        other.kill()
      pytest.fail(f"a worker of {script} did not finish in {timeout:.0f} s")
  for worker, log in zip(workers, logs, strict=True):
    assert worker.returncode == 0, log[-3000:]
