"""`python -m mcgs_jax.apps.benchmark`: the same as `mcgs-jax bench`."""

import sys

from mcgs_jax.apps.cli.bench_command import main

if __name__ == "__main__":
  sys.exit(main())
