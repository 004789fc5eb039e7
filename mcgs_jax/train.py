"""Deprecated: `python -m mcgs_jax.train` is now `mcgs-jax train` (or
`python -m mcgs_jax.apps.train`); this alias goes in version 0.3."""

import sys
import warnings

if __name__ == "__main__":
  from mcgs_jax.apps.cli.train_command import main

  warnings.warn(
    "python -m mcgs_jax.train is deprecated; use mcgs-jax train", DeprecationWarning, stacklevel=1
  )
  sys.exit(main())
