"""Names a package exports without importing the modules that define them."""

import importlib
from collections.abc import Callable, Mapping


def lazy_exports(
  package: str, exports: Mapping[str, str], module_globals: Mapping[str, object]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
  """`(__getattr__, __dir__)` for `package`: each name in `exports` (name -> module
  that defines it) is imported from its module on first access, so importing the
  package does not import optional dependencies (pgx, flax, ...)."""

  def __getattr__(name: str) -> object:
    if name in exports:
      return getattr(importlib.import_module(exports[name]), name)
    raise AttributeError(f"module {package!r} has no attribute {name!r}")

  def __dir__() -> list[str]:
    return sorted(set(module_globals) | set(exports))

  return __getattr__, __dir__
