"""Operations on `[..., A]` logits that the policies and the games' evaluators share.

A leaf of the package: it imports nothing from `mcgs_jax`, so a game can use it
without importing the search.
"""

import jax
import jax.numpy as jnp


def mask_invalid_actions(logits: jax.Array, invalid_actions: jax.Array) -> jax.Array:
  """Sets invalid actions to the lowest finite logit (finite: no NaN in a softmax
  even when every action is invalid)."""
  logits = logits - jnp.max(logits, axis=-1, keepdims=True)
  return jnp.where(invalid_actions, jnp.finfo(logits.dtype).min, logits)


def probs_to_logits(probs: jax.Array) -> jax.Array:
  """`log(probs)`, with zeros mapped to `log(tiny)` instead of -inf."""
  return jnp.log(jnp.maximum(probs, jnp.finfo(probs.dtype).tiny))


def apply_temperature(logits: jax.Array, temperature: float | jax.Array) -> jax.Array:
  """`logits / temperature`; temperature 0 becomes a greedy choice, not 0/0."""
  logits = logits - jnp.max(logits, axis=-1, keepdims=True)
  return logits / jnp.maximum(temperature, jnp.finfo(logits.dtype).tiny)
