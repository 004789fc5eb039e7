"""What the `mcgs-jax` subcommands share: one-line argument errors, integer checks,
parsing to an exit status, the seed and key-history flags."""

import argparse
import sys
from collections.abc import Sequence

from mcgs_jax.apps.seeds import MAX_SEED
from mcgs_jax.games.keys import MAX_REPETITION_BOUND


class OneLineErrorParser(argparse.ArgumentParser):
  """An ArgumentParser whose errors are one line, `PROG: error: ...`, exit status 2."""

  def error(self, message):
    self.exit(2, f"{self.prog}: error: {message}\n")


def parse_or_status(
  parser: argparse.ArgumentParser, argv: Sequence[str] | None
) -> argparse.Namespace | int:
  """`argv` (default: `sys.argv[1:]`) parsed, or the exit status argparse ended with
  instead (0 after `--help`, 2 after a bad flag, its one-line error printed)."""
  try:
    return parser.parse_args(list(sys.argv[1:] if argv is None else argv))
  except SystemExit as exit_:
    return exit_.code if isinstance(exit_.code, int) else 2


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


def integer(text: str) -> int:
  """An argparse `type`: an integer, any (a range is checked after parsing), with a
  one-line error."""
  try:
    return int(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def number(text: str) -> float:
  """An argparse `type`: a float, with a one-line error."""
  try:
    return float(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def int_tuple(text: str) -> tuple[int, ...]:
  """An argparse `type`: comma-separated integers (`"128,128"` -> `(128, 128)`; empty
  items skipped), with a one-line error."""
  try:
    return tuple(int(value) for value in text.split(",") if value.strip())
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def add_seed_argument(parser: argparse.ArgumentParser) -> None:
  """`--seed`, an integer in `[0, MAX_SEED]`, 0 when not given."""
  parser.add_argument(
    "--seed",
    type=int_at_least(0, MAX_SEED),
    default=0,
    help=f"random seed, 0 to {MAX_SEED} (default: 0)",
  )


# The history modes of the pgx games' transposition keys (`mcgs_jax.games.keys.
# HISTORY_MODES`; named here so that parsing the command line imports no jax).
KEY_HISTORY_MODES = ("exact", "bounded", "position")


def add_key_history_arguments(parser: argparse.ArgumentParser) -> None:
  """`--key-history` and `--repetition-bound`: how much history the transposition
  key of a pgx game keeps (`make_game(history=..., repetition_bound=...)`); None
  when not given (the library's defaults)."""
  parser.add_argument(
    "--key-history",
    choices=KEY_HISTORY_MODES,
    default=None,
    help="history in the transposition key of pgx games: bounded (default; KataGo's "
    "rule: history only while a short cycle through the last move is possible), "
    "exact, or position (CrazyAra's rule: the position alone until one repeats)",
  )
  parser.add_argument(
    "--repetition-bound",
    type=int_at_least(1, MAX_REPETITION_BOUND),
    default=None,
    help="R: plies within which the bounded and position keys keep every difference "
    f"of history, clocks and step limits (default: 11; at most {MAX_REPETITION_BOUND})",
  )


def key_history_options(args) -> dict:
  """The `make_game` keywords of `add_key_history_arguments`' flags that were given."""
  options = {}
  if getattr(args, "key_history", None) is not None:
    options["history"] = args.key_history
  if getattr(args, "repetition_bound", None) is not None:
    options["repetition_bound"] = args.repetition_bound
  return options
