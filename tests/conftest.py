"""Test-session checks shared by every test file.

With `MCGS_TEST_INSTALLED=1` (set by .ci/run, which tests the built wheel) the
session stops at once unless `mcgs_jax` is imported from outside this checkout, so a
test run meant for the installed package cannot quietly test the source tree.
"""

import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent


def _mcgs_jax_location() -> pathlib.Path:
  import mcgs_jax  # pylint: disable=import-outside-toplevel

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


def pytest_report_header(config):
  del config
  return f"mcgs_jax: {_mcgs_jax_location()}"
