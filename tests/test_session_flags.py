"""The XLA flags a test session chooses (tests/conftest.py): `.ci/run` relies on
`MCGS_TEST_XLA_DEFAULTS=1` to run the suite under XLA's defaults, and on flags a user
names being left alone."""

import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent


def session_xla_flags(tmp_path, **env) -> str:
  """The `XLA_FLAGS` line of the header of a new pytest session under `env`."""
  base = {
    name: value
    for name, value in os.environ.items()
    if name not in ("XLA_FLAGS", "MCGS_TEST_XLA_FLAGS", "MCGS_TEST_XLA_DEFAULTS")
  }
  command = [
    sys.executable,
    "-m",
    "pytest",
    "-c",
    str(REPO / "pyproject.toml"),
    "--rootdir",
    str(REPO),
    "-n",
    "0",
    "-p",
    "no:cacheprovider",
    "--collect-only",
    str(REPO / "tests" / "test_schema.py"),
  ]
  result = subprocess.run(
    command, cwd=tmp_path, env={**base, **env}, capture_output=True, text=True, timeout=300
  )
  assert result.returncode == 0, result.stdout + result.stderr
  (line,) = [line for line in result.stdout.splitlines() if line.startswith("XLA_FLAGS: ")]
  return line.removeprefix("XLA_FLAGS: ")


def test_this_process_runs_under_the_flags_its_session_chose():
  assert os.environ["MCGS_TEST_XLA_FLAGS"] in os.environ.get("XLA_FLAGS", "")


@pytest.mark.parametrize(
  "env, expected",
  [
    (dict(MCGS_TEST_XLA_DEFAULTS="1"), "(XLA defaults)"),
    (dict(XLA_FLAGS="--xla_backend_optimization_level=2"), "--xla_backend_optimization_level=2"),
  ],
  ids=["defaults", "named by the user"],
)
def test_xla_defaults_and_named_flags_are_left_alone(tmp_path, env, expected):
  assert session_xla_flags(tmp_path, **env) == expected
