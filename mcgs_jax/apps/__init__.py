"""Applications built on the search: the arena, the AlphaZero training loop, graph
pictures, benchmarks and the `mcgs-jax` command line.

`Agent`, `play_match` and `MatchResult` load lazily from `mcgs_jax.apps.arena`; the
modules themselves (`arena`, `train`, `viz`, `benchmark`, `cli`) import as usual.
"""

import importlib

_EXPORTS = {
  "Agent": "mcgs_jax.apps.arena",
  "MatchResult": "mcgs_jax.apps.arena",
  "play_match": "mcgs_jax.apps.arena",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
  if name in _EXPORTS:
    return getattr(importlib.import_module(_EXPORTS[name]), name)
  raise AttributeError(f"module 'mcgs_jax.apps' has no attribute {name!r}")


def __dir__():
  return sorted(set(globals()) | set(_EXPORTS))
