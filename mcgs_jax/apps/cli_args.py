"""What the `mcgs-jax` subcommands share: one-line argument errors, integer checks,
the extras that install optional packages, progress bars."""

import argparse
import importlib.util

# Optional dependencies, by the extra of pyproject.toml that installs them.
EXTRA_OF_MODULE = {
  "pgx": "games",
  "flax": "train",
  "optax": "train",
  "matplotlib": "viz",
  "mctx": "bench",
  "tqdm": "bench",
}

# The packages each extra of pyproject.toml installs (a test keeps the two the same).
PACKAGES_OF_EXTRA = {
  "games": ("pgx",),
  "train": ("pgx", "flax", "optax"),
  "viz": ("matplotlib",),
  "bench": ("mctx", "pgx", "flax", "tqdm"),
}


class OneLineErrorParser(argparse.ArgumentParser):
  """An ArgumentParser whose errors are one line, `PROG: error: ...`, exit status 2."""

  def error(self, message):
    self.exit(2, f"{self.prog}: error: {message}\n")


def int_at_least(minimum: int, maximum: int | None = None):
  """An argparse `type` accepting integers in `[minimum, maximum]` (no upper bound
  when `maximum` is None), with a one-line error naming the range."""
  expected = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
  if maximum is not None:
    expected = f"{expected} and <= {maximum}"

  def parse(text: str) -> int:
    try:
      value = int(text)
    except ValueError:
      raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if value < minimum or (maximum is not None and value > maximum):
      raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value

  return parse


def progress_bar(**tqdm_arguments):
  """A `tqdm.auto` bar, or None where tqdm is not installed: it comes with the train
  and bench extras, and a progress bar is not worth failing a command for."""
  try:
    from tqdm.auto import tqdm
  except ModuleNotFoundError:
    return None
  return tqdm(**tqdm_arguments)


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
