"""What Ctrl-C still writes before an `mcgs-jax` command ends: the result so far of a
long command run with `--json` (`partial_result`), written by the command line's
SIGINT handler (`mcgs_jax.apps.cli`) with `"partial": true`.

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


@contextlib.contextmanager
def partial_result(build: Callable[[], dict[str, Any]], path: str | None = None) -> Iterator[None]:
  """While the `with` block runs, Ctrl-C (`mcgs_jax.apps.cli`'s handler) writes `build()`, a
  JSON-ready dict of the result so far, with `"partial": true` added, before the
  command ends: to stdout as one line, or with `path` to that file (atomically,
  `files.write_atomically`). A long command with `--json` wraps its work in it and
  leaves the block before writing its full result. Nothing is written outside the
  `mcgs-jax` command (no handler is installed there)."""
  global _partial_result
  previous, _partial_result = _partial_result, (build, path)
  try:
    yield
  finally:
    _partial_result = previous


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
    text = json.dumps({**build(), "partial": True})
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
