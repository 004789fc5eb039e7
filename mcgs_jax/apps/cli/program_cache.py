"""Traced programs kept between runs of a command, beside JAX's compilation cache.

JAX's persistent compilation cache (`command_line.enable_compilation_cache`) skips
compiling a program a run has compiled before, but every run still traces the Python
code to find the program: for `mcgs-jax search` a second of the few a warm run takes.
`cached_program` keeps the traced program itself (`jax.export`, serialized StableHLO)
under `<cache dir>/programs/`, named by a digest of everything the trace read: this
package's source files, the jax, jaxlib and pgx versions, the caller's description of
the configuration, and the arguments' shapes and dtypes. A later run with the same
digest calls the stored program (compiled through the compilation cache) without
tracing; any change of code, version, configuration or shapes is another digest, so a
stale program is never run. Files are written atomically; one that cannot be read is
traced afresh. Needs `flatbuffers` (jax's serialization; in the `games` extra): without
it, or when the cache is off, the function is returned as it is.
"""

import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import pathlib
from collections.abc import Callable
from typing import Any

import jax

from mcgs_jax.apps import files

PROGRAMS = "programs"  # the folder under the compilation cache's directory


@functools.cache
def source_digest() -> str:
  """SHA-256 of this package's Python sources and of the versions of jax, jaxlib and
  pgx: a program traced from other code or libraries never matches."""
  hasher = hashlib.sha256()
  root = pathlib.Path(__file__).resolve().parents[2]  # the mcgs_jax package
  for path in sorted(root.rglob("*.py")):
    hasher.update(str(path.relative_to(root)).encode())
    hasher.update(path.read_bytes())
  for package in ("jax", "jaxlib", "pgx", "jumanji"):
    try:
      hasher.update(f"{package} {importlib.metadata.version(package)}".encode())
    except importlib.metadata.PackageNotFoundError:
      hasher.update(f"{package} absent".encode())
  return hasher.hexdigest()


def _directory() -> str | None:
  """Where programs are kept: under the compilation cache's directory, or None when
  the cache is off (`--no-cache`) or jax's serialization is missing."""
  cache = getattr(jax.config, "jax_compilation_cache_dir", None)
  if not cache or importlib.util.find_spec("flatbuffers") is None:
    return None
  return os.path.join(cache, PROGRAMS)


def cached_program(function: Callable, description: str, *args: Any) -> Callable:
  """`function` (jitted, called as `function(*args)`) as a callable on arguments of
  `args`' shapes and dtypes, traced at most once per digest of the code, the
  `description` of the configuration (everything `function` closes over that changes
  the program: the game, the policy, the options) and the arguments' shapes."""
  directory = _directory()
  if directory is None:
    return function
  leaves, treedef = jax.tree_util.tree_flatten(args)
  shapes = [jax.ShapeDtypeStruct(leaf.shape, leaf.dtype) for leaf in leaves]
  digest = hashlib.sha256(
    "|".join([source_digest(), description, str(treedef), str(shapes)]).encode()
  ).hexdigest()[:32]
  path = os.path.join(directory, f"{digest}.bin")
  exported = _read(path)
  if exported is None:
    unflattened = lambda *flat: function(*jax.tree_util.tree_unflatten(treedef, flat))
    exported = jax.export.export(jax.jit(unflattened))(*shapes)
    os.makedirs(directory, exist_ok=True)
    files.write_atomically(path, bytes(exported.serialize()))
  return lambda *call_args: exported.call(*jax.tree_util.tree_leaves(call_args))


def _read(path: str):
  """The program stored at `path`, or None when there is none or it cannot be read."""
  try:
    with open(path, "rb") as handle:
      data = bytearray(handle.read())
  except OSError:
    return None
  try:
    return jax.export.deserialize(data)
  except Exception:  # a damaged file: the flatbuffer parser raises anything (struct.error, ...)
    return None
