"""What Ctrl-C still does before an `mcgs-jax` command ends: write the result so far
of a long command run with `--json` (`partial_result`), written by the command line's
SIGINT handler (`mcgs_jax.apps.cli`) with `"partial": true`, or let a training run
finish its iteration and checkpoint it (`graceful_stop`).

A leaf module: the commands register here, the handler reads here, and neither
imports the other.
"""

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

# What Ctrl-C still writes before the command ends: `(build, path)`, see
# `partial_result`.
_partial_result: tuple[Callable[[], dict[str, Any]], str | None] | None = None
# What the first Ctrl-C lets the command finish (`graceful_stop`), and whether it came.
_graceful: str | None = None
_stop_requested = False


@contextlib.contextmanager
def partial_result(build: Callable[[], dict[str, Any]], path: str | None = None) -> Iterator[None]:
  """While the `with` block runs, Ctrl-C (`mcgs_jax.apps.cli`'s handler) writes `build()`, a
  JSON-ready dict of the result so far, with `"partial": true` unless it says
  `"partial"` itself (a result built once the work is over is whole), before the
  command ends: to stdout as one line, or with `path` to that file (atomically,
  `files.write_atomically`). A long command with `--json` wraps its work in it, and
  the writing of its files too, so that Ctrl-C at any moment leaves a result. Nothing
  is written outside the `mcgs-jax` command (no handler is installed there)."""
  global _partial_result
  previous, _partial_result = _partial_result, (build, path)
  try:
    yield
  finally:
    _partial_result = previous


@contextlib.contextmanager
def graceful_stop(finishing: str) -> Iterator[None]:
  """While the `with` block runs, the first Ctrl-C does not end the command: the
  handler says `mcgs-jax COMMAND: interrupted: {finishing} (Ctrl-C again to stop at
  once)` and returns, and the block's code, which polls `stop_requested()` at its
  safe points, stops there. A second Ctrl-C ends the command at once."""
  global _graceful
  previous, _graceful = _graceful, finishing
  try:
    yield
  finally:
    _graceful = previous


def request_stop() -> str | None:
  """The handler's first call in a `graceful_stop` block: records the request and
  returns what the command finishes; None outside one or at a second Ctrl-C (the
  command then ends at once)."""
  global _stop_requested
  if _graceful is None or _stop_requested:
    return None
  _stop_requested = True
  return _graceful


def stop_requested() -> bool:
  """Whether Ctrl-C asked the command to stop at its next safe point (`graceful_stop`)."""
  return _stop_requested


def write_whole(descriptor: int, text: str) -> None:
  """`text` to a file descriptor, whole, past Python's buffered streams (a signal
  handler may run while the interrupted code is inside one of them)."""
  data = text.encode("utf-8")
  while data:
    data = data[os.write(descriptor, data) :]


def write_partial_result() -> str | None:
  """Writes the registered partial result (`partial_result`); returns None, or one
  line saying why it could not be written."""
  if _partial_result is None:
    return None
  build, path = _partial_result
  try:
    text = json.dumps({"partial": True, **build()})
    if path is None:
      with contextlib.suppress(Exception):  # a flush the handler interrupted
        sys.stdout.flush()
      write_whole(sys.stdout.fileno(), text + "\n")
    else:
      from mcgs_jax.apps import files

      files.write_atomically(path, text)
  except Exception as error:  # the handler must end the command all the same
    return " ".join(f"{type(error).__name__}: {error}".split())
  return None
