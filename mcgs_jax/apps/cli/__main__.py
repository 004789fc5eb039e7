"""`python -m mcgs_jax.apps.cli`: the same as `mcgs-jax`."""

import sys

from mcgs_jax.apps.cli.command_line import main

if __name__ == "__main__":
  sys.exit(main())
