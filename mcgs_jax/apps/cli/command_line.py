"""The `mcgs-jax` command: `main` runs one of `COMMANDS`, each a module of this
package (`arena_command`, `bench_command`, ...)."""

import contextlib
import importlib
import os
import signal
import sys
import threading
from collections.abc import Sequence

from mcgs_jax.apps import partial

# The subcommands; each is the module `mcgs_jax.apps.cli.COMMAND_command`, whose
# `main(argv)` returns its exit status.
COMMANDS = ("arena", "bench", "evaluate", "play", "search", "train")

USAGE = """usage: mcgs-jax [--version] [--no-cache] COMMAND [options]

commands:
  arena    a match between two search agents: score and Elo (default: graph against
           tree on connect four; see `mcgs-jax arena -h`)
  bench    speed of mcgs_jax against mctx on a pgx game (see `mcgs-jax bench -h`)
  evaluate search agents on instances of a planning problem (jumanji), against its
           exact optimum: graph, tree and mctx (see `mcgs-jax evaluate -h`)
  play     single-player games with chance (2048) by Stochastic MuZero search, graph
           and tree side by side (see `mcgs-jax play -h`)
  search   search positions and print root tables (see `mcgs-jax search -h`)
  train    the AlphaZero training loop (see `mcgs-jax train -h`)

Compiled searches are cached on disk (JAX's persistent compilation cache, in
$MCGS_JAX_CACHE_DIR or ~/.cache/mcgs_jax/jax), so a second identical command starts
at once; --no-cache (before the command) turns the cache off for one run.
"""


def cache_dir() -> str:
  """Where the command line keeps compiled programs."""
  default = os.path.join(
    os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "mcgs_jax", "jax"
  )
  return os.environ.get("MCGS_JAX_CACHE_DIR", default)


def enable_compilation_cache(path: str | None = None) -> str:
  """Turns on JAX's persistent compilation cache in `path` (default `cache_dir()`),
  for every program that took at least a second to compile. Library users can call
  it too (or set `jax.config.update("jax_compilation_cache_dir", path)`).

  Returns the directory used.
  """
  import jax

  path = path or cache_dir()
  os.makedirs(path, exist_ok=True)
  jax.config.update("jax_compilation_cache_dir", path)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  return path


def _version() -> str:
  from mcgs_jax import __version__

  return __version__


def main(argv: Sequence[str] | None = None) -> int:
  args: list[str] = list(sys.argv[1:] if argv is None else argv)
  use_cache = True
  while args and args[0] in ("--version", "--no-cache"):
    option = args.pop(0)
    if option == "--version":
      print(f"mcgs-jax {_version()}")
      return 0
    use_cache = False
  if not args or args[0] in ("-h", "--help"):
    print(USAGE, end="")
    return 0 if args else 2
  command, rest = args[0], args[1:]
  if command not in COMMANDS:
    print(f"mcgs-jax: unknown command {command!r}\n{USAGE}", end="", file=sys.stderr)
    return 2
  if use_cache and os.environ.get("MCGS_JAX_NO_CACHE", "") in ("", "0"):
    enable_compilation_cache()
  previous = _end_on_sigint(command)
  try:
    return _run(command, rest)
  except ModuleNotFoundError as error:
    from mcgs_jax.apps import extras

    module = (error.name or "").partition(".")[0]
    if module not in extras.EXTRA_OF_MODULE:
      raise
    print(f"mcgs-jax {command}: {extras.needs_extra(module)}: {error}", file=sys.stderr)
    return 2
  finally:
    if previous is not None:
      signal.signal(signal.SIGINT, previous)


def _end_on_sigint(command: str):
  """Makes Ctrl-C end the command with one line and the shell's status for SIGINT
  (128 + 2), no traceback; returns the handler it replaced (None off the main
  thread, where Python takes no signal handler). The handler ends the process at
  once rather than raising KeyboardInterrupt: raised inside JAX's garbage-collection
  callback it was swallowed, and after an interrupted XLA compilation the normal
  interpreter shutdown crashed (SIGSEGV). Before it ends, the handler writes the
  command's partial result where one is registered (`partial.partial_result`: `--json` of
  `arena` and `bench`); an error while building it is said on the same line, never
  as a traceback. Files already written are whole (they are written atomically).
  Within a `partial.graceful_stop` block (`train` with a checkpoint directory) the
  first Ctrl-C only asks the command to stop at its next safe point."""

  def interrupted(signum, frame):
    del signum, frame
    finishing = partial.request_stop()
    if finishing is not None:  # the command stops at its next safe point
      with contextlib.suppress(OSError):
        partial.write_whole(
          sys.stderr.fileno(),
          f"mcgs-jax {command}: interrupted: {finishing} (Ctrl-C again to stop at once)\n",
        )
      return
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C changes nothing now
    problem = partial.write_partial_result()
    line = f"mcgs-jax {command}: interrupted"
    if problem is not None:
      line += f" (no partial result: {problem})"
    for stream in (sys.stdout, sys.stderr):
      with contextlib.suppress(Exception):  # a flush the handler interrupted
        stream.flush()
    with contextlib.suppress(OSError):
      partial.write_whole(sys.stderr.fileno(), line + "\n")
    os._exit(130)

  if threading.current_thread() is not threading.main_thread():
    return None
  return signal.signal(signal.SIGINT, interrupted)


def _run(command: str, rest: list[str]) -> int:
  """Runs `command`'s `main` (its module: `mcgs_jax.apps.cli.COMMAND_command`) on the
  arguments `rest`; returns its exit status."""
  module = importlib.import_module(f"mcgs_jax.apps.cli.{command}_command")
  return int(module.main(rest) or 0)
