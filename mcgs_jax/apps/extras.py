"""The optional dependencies of the applications, by the extra of pyproject.toml that
installs them, and the one-line message naming what a missing one needs."""

import importlib.util

# Optional dependencies, by the extra of pyproject.toml that installs them.
EXTRA_OF_MODULE = {
  "pgx": "games",
  "flax": "train",
  "optax": "train",
  "matplotlib": "viz",
  "mctx": "bench",
  "tqdm": "bench",
  "ortools": "bench",
  "jumanji": "jumanji",
}

# The packages each extra of pyproject.toml installs (a test keeps the two the same).
PACKAGES_OF_EXTRA = {
  "games": ("pgx", "flatbuffers"),
  "train": ("pgx", "flax", "optax"),
  "viz": ("matplotlib",),
  "bench": ("mctx", "pgx", "flax", "tqdm", "ortools"),
  "jumanji": ("jumanji",),
}


def needs_extra(module: str) -> str:
  """`needs the EXTRA extra (PACKAGES; pip install 'mcgs-jax[EXTRA]')`, what installs
  `module`: every package of that extra is named, so the message reads the same whichever
  of them was imported first."""
  extra = EXTRA_OF_MODULE[module]
  packages = ", ".join(PACKAGES_OF_EXTRA[extra])
  return f"needs the {extra} extra ({packages}; pip install 'mcgs-jax[{extra}]')"


def missing_extra(module: str) -> str | None:
  """`needs_extra(module)` when `module` is not installed, else None (nothing is
  imported: a command checks what a flag needs before any work)."""
  try:
    found = importlib.util.find_spec(module) is not None
  except (ImportError, ValueError):
    found = False
  return None if found else needs_extra(module)
