"""Test-session settings and checks shared by every test file.

The tests are bound by compile time (small batches, few simulations, many distinct
programs), so the session asks XLA's CPU backend for its fastest-compiling code
generation: `--xla_backend_optimization_level=0`, the older loop emitters
(`--xla_cpu_use_fusion_emitters=false`) and instructions up to AVX
(`--xla_cpu_max_isa=AVX`); what they save is measured in benchmarks/RESULTS.md, "The
README's test command, third pass: XLA flags that compile fast and keep every bit".
With AVX2, the older emitters round differently from one program to another (most
likely they fuse a multiply and an add into one FMA instruction in some programs and
not in others): a recycled and a fresh search then differed in the last bits. AVX has
no FMA instruction; with the cap every search gives the same bits as at level 0 alone
(benchmarks/xla_flags.py), and every bit-for-bit check of the suite holds.

These settings change how fast the compiled code runs and how it rounds, not what the
engine does, and `.ci/run` runs the same tests a second time under XLA's defaults, the
code generation users get (`MCGS_TEST_XLA_DEFAULTS=1` leaves `XLA_FLAGS` as it is).
The flags are tried once, in a subprocess of the session's first process, and the
workers inherit the choice: where this jaxlib refuses them (an unknown flag aborts the
process) the session keeps only the optimization level, and off x86 it asks for
nothing more. An `XLA_FLAGS` that already names any of them is left alone.
Subprocesses the tests start inherit the choice. Speed is measured in benchmarks/,
never under pytest.

The session also gives each pytest-xdist worker a JAX compilation cache that the
processes it starts share (a new temporary directory per session, removed at the
end): many tests jit the same program from separate closures.

With `MCGS_TEST_INSTALLED=1` (set by .ci/run, which tests the built wheel) the
session stops at once unless `mcgs_jax` is imported from outside this checkout, so a
test run meant for the installed package cannot quietly test the source tree.
"""

import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent

FAST_COMPILING_XLA_FLAGS = (
  "--xla_backend_optimization_level=0",
  "--xla_cpu_use_fusion_emitters=false",
  "--xla_cpu_max_isa=AVX",
)
_PROBE = "import jax; jax.block_until_ready(jax.jit(lambda x: x * 2.0 + 1.0)(1.0))"


def _flags_run(flags: str) -> bool:
  """Whether a fresh process compiles and runs a program under `flags`."""
  env = {**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"}
  try:
    probe = subprocess.run(
      [sys.executable, "-c", _PROBE], env=env, capture_output=True, timeout=120, check=False
    )
  except subprocess.TimeoutExpired:
    return False
  return probe.returncode == 0


def _choose_xla_flags() -> None:
  """Adds the fast-compiling flags to `XLA_FLAGS` (or as many of them as this jaxlib
  and machine take), once per session: the workers inherit the environment. Adds
  none under `MCGS_TEST_XLA_DEFAULTS=1` or when `XLA_FLAGS` names one of them; records
  what it added in `MCGS_TEST_XLA_FLAGS`."""
  if "MCGS_TEST_XLA_FLAGS" in os.environ:  # chosen by the session's first process
    return
  given = os.environ.get("XLA_FLAGS", "")
  chosen = ""
  defaults = os.environ.get("MCGS_TEST_XLA_DEFAULTS", "") not in ("", "0")
  named = any(flag.split("=")[0] in given for flag in FAST_COMPILING_XLA_FLAGS)
  if not defaults and not named:
    # The ISA cap names x86's instruction sets; elsewhere only the level is asked for.
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    tries = [FAST_COMPILING_XLA_FLAGS] if x86 else []
    tries.append(FAST_COMPILING_XLA_FLAGS[:1])
    for flags in tries:
      if _flags_run(f"{given} {' '.join(flags)}".strip()):
        chosen = " ".join(flags)
        break
  os.environ["XLA_FLAGS"] = f"{given} {chosen}".strip()
  os.environ["MCGS_TEST_XLA_FLAGS"] = chosen


_choose_xla_flags()

# Set by the first process of the session (the xdist controller); workers inherit it
# and each takes a directory of its own under it, which the processes it starts
# inherit: two workers never write one cache entry at the same time (a CI run once
# died of a segmentation fault inside jax's cache write, with both workers sharing
# one directory).
_OWN_CACHE = "JAX_COMPILATION_CACHE_DIR" not in os.environ
if _OWN_CACHE:
  os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="mcgs-jax-test-cache-")
  os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
  os.environ["MCGS_TEST_CACHE_ROOT"] = os.environ["JAX_COMPILATION_CACHE_DIR"]
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER and "MCGS_TEST_CACHE_ROOT" in os.environ:
  os.environ["JAX_COMPILATION_CACHE_DIR"] = os.path.join(
    os.environ["MCGS_TEST_CACHE_ROOT"], _WORKER
  )


def _mcgs_jax_location() -> pathlib.Path:
  import mcgs_jax

  return pathlib.Path(mcgs_jax.__file__).resolve()


def pytest_configure(config):
  del config
  if os.environ.get("MCGS_TEST_INSTALLED", "") in ("", "0"):
    return
  location = _mcgs_jax_location()
  if REPO in location.parents:
    raise pytest.UsageError(
      f"MCGS_TEST_INSTALLED is set but mcgs_jax was imported from the checkout "
      f"({location}), not from the installed package: run pytest from a directory "
      f"outside {REPO} (e.g. `cd $(mktemp -d) && python -m pytest -c {REPO}/pyproject.toml "
      f"--rootdir {REPO} {REPO}/tests`) in an environment without an editable install"
    )


def pytest_unconfigure(config):
  if _OWN_CACHE and not hasattr(config, "workerinput"):  # the controller cleans up
    shutil.rmtree(os.environ["MCGS_TEST_CACHE_ROOT"], ignore_errors=True)


def pytest_report_header(config):
  del config
  return [
    f"mcgs_jax: {_mcgs_jax_location()}",
    f"XLA_FLAGS: {os.environ.get('XLA_FLAGS', '') or '(XLA defaults)'}",
  ]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
  """Marks slow every variant of a test marked `quick_variants(*ids)` whose
  parametrize id is not among `ids`: the README's suite runs those variants, the
  slow set (`-m slow`, a step of `.ci/run`) the rest, which repeat the same check on
  other inputs. An id that names no variant of its test is an error (unless the
  command line picks variants by id, so that not all are collected)."""
  listed = {}
  for item in items:
    marker = item.get_closest_marker("quick_variants")
    if marker is None:
      continue
    function = item.nodeid.split("[")[0]
    ids = listed.setdefault(function, (set(marker.args), set()))
    variant = item.callspec.id
    ids[1].add(variant)
    if variant not in ids[0]:
      item.add_marker(pytest.mark.slow)
  if any("[" in arg for arg in config.args):
    return
  for function, (wanted, found) in listed.items():
    if wanted - found:
      raise pytest.UsageError(
        f"{function}: quick_variants names {sorted(wanted - found)}, which are not among "
        f"its variants {sorted(found)}"
      )
