"""The old home of `mask_invalid_actions` (now in `logits`), kept importable from
here for code that imports it from this module."""

from mcgs_jax._src.logits import mask_invalid_actions

__all__ = ["mask_invalid_actions"]
