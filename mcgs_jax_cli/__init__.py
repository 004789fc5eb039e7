"""The `mcgs-jax` command's entry point, outside the `mcgs_jax` package so that it
runs before anything heavy is imported.

Importing `mcgs_jax` imports jax, about a second; Ctrl-C in that second, before the
command's handler (`mcgs_jax.apps.cli`) was installed, ended in a traceback, an
`ImportError` from a half-initialised extension, or a `KeyboardInterrupt` an import
swallowed, after which the command ran on. `main` installs a handler first that ends
the command at once with the same line and status as later (`mcgs-jax COMMAND:
interrupted`, 130). The command's own handler replaces it while the command runs and
restores it after, so that Ctrl-C while the interpreter exits ends the same way, not
with "Exception ignored in atexit callback".
"""

import os
import signal
import sys


def main() -> int:
  """Installs the early Ctrl-C handler, then runs `mcgs_jax.apps.cli.main`; returns
  its exit status."""
  command = next((arg for arg in sys.argv[1:] if not arg.startswith("-")), None)
  line = f"mcgs-jax {command}: interrupted\n" if command else "mcgs-jax: interrupted\n"

  def interrupted(signum, frame):
    del signum, frame
    try:
      os.write(sys.stderr.fileno(), line.encode("utf-8"))
    finally:
      os._exit(130)

  signal.signal(signal.SIGINT, interrupted)
  from mcgs_jax.apps import cli

  return cli.main()
