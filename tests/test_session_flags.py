"""The XLA flags a test session chooses (tests/conftest.py): they reach XLA in the
session's processes, `.ci/run` relies on `MCGS_TEST_XLA_DEFAULTS=1` to run the suite
under XLA's defaults, and flags a user names are left alone."""

import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
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


def test_programs_compiled_here_round_as_the_chosen_flags_make_them():
  """XLA got the flags the session chose: under `--xla_cpu_max_isa=AVX` the CPU has
  no fused multiply-add, so `x * x + z` rounds twice. Here `x * x` is
  `1 + 2**-11 + 2**-24`, a tie that rounds to `1 + 2**-11` and so cancels `z`
  exactly; a fused multiply-add keeps the last term and gives `2**-24`."""
  if "--xla_cpu_max_isa=AVX" not in os.environ["MCGS_TEST_XLA_FLAGS"].split():
    pytest.skip("the session did not cap the instruction set")
  x = jnp.full((64,), 1 + 2**-12, jnp.float32)
  z = jnp.full((64,), -(1 + 2**-11), jnp.float32)
  np.testing.assert_array_equal(jax.jit(lambda x, z: x * x + z)(x, z), 0.0)


# Slow: each starts a pytest session; the flags it checks are the test harness's
# (.ci/run's step under XLA's defaults depends on them), not the library's.
@pytest.mark.slow
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
