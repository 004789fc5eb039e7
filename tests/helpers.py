"""What several test files share: the command line that runs a benchmark script."""

import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent


def benchmark_command(script, *args):
  """The command line that runs `benchmarks/<script>.py` as the module
  `benchmarks.<script>`, with `args`. The repository is put at the end of the new
  process's `sys.path`, after the installed packages, so that the installed mcgs_jax
  (the wheel `.ci/run` tests) is the one imported where there is one."""
  code = (
    f"import runpy, sys; sys.path.append({str(REPO)!r}); "
    f"runpy.run_module('benchmarks.{script}', run_name='__main__', alter_sys=True)"
  )
  return [sys.executable, "-c", code, *args]
