"""Applications built on the search: the arena, the AlphaZero training loop, graph
pictures, benchmarks and the `mcgs-jax` command line.

`Agent`, `play_match` and `MatchResult` load lazily from `mcgs_jax.apps.arena`; the
packages and modules themselves (`arena`, `train`, `benchmark`, `cli`, `viz`, ...)
import as usual.
"""

from mcgs_jax._src.lazy import lazy_exports

_EXPORTS = {
  "Agent": "mcgs_jax.apps.arena",
  "MatchResult": "mcgs_jax.apps.arena",
  "play_match": "mcgs_jax.apps.arena",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
