"""`python -m mcgs_jax.apps.train`: the same as `mcgs-jax train`."""

import sys

from mcgs_jax.apps.cli.train_command import main

if __name__ == "__main__":
  sys.exit(main())
