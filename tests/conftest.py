"""Test-session settings and checks shared by every test file.

The tests are bound by compile time (small batches, few simulations, many distinct
programs), so they ask XLA's CPU backend for its cheapest code generation
(`--xla_backend_optimization_level=0`, unless `XLA_FLAGS` already sets a level): the
suite ran in 61 s instead of 90 s per file measured (tests/test_search.py, 2 cores).
It changes how fast the compiled code runs, never what it computes; speed is measured
in benchmarks/, never under pytest. Subprocesses the tests start inherit it.

The session also shares one JAX compilation cache between its pytest-xdist workers and
the processes they start (a new temporary directory per session, removed at the end):
many tests jit the same program from separate closures.

With `MCGS_TEST_INSTALLED=1` (set by .ci/run, which tests the built wheel) the
session stops at once unless `mcgs_jax` is imported from outside this checkout, so a
test run meant for the installed package cannot quietly test the source tree.
"""

import os
import pathlib
import shutil
import tempfile

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent

if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
  ).strip()

# Set by the first process of the session (the xdist controller); workers inherit it.
_OWN_CACHE = "JAX_COMPILATION_CACHE_DIR" not in os.environ
if _OWN_CACHE:
  os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="mcgs-jax-test-cache-")
  os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"


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
    shutil.rmtree(os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)


def pytest_report_header(config):
  del config
  return f"mcgs_jax: {_mcgs_jax_location()}"


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
