"""Helpers on prior logits `[..., A]` that the policies and the games share: invalid
actions masked, visit probabilities as logits, a temperature, and the root's
Dirichlet noise."""

import chex
import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax._src import checks


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


def dirichlet_prior(
  rng_key: chex.PRNGKey, prior_logits: chex.Array, *, fraction: float, alpha: float
) -> chex.Array:
  """The logits of `(1 - fraction) * softmax(prior_logits) + fraction *
  Dirichlet(alpha)`, per row of `[B, A]`: AlphaZero's exploration noise at the root.

  A `fraction` known at trace time to be 0 draws no noise: the result is the same to
  the bit (the noise's weight is an exact 0, and `p + 0.0 == p`), and the program
  compiles without the Gamma sampler, which takes long to compile. `rng_key` is not
  used then.
  """
  # Checked when known at trace time; a traced value (jit argument) is taken as given.
  checks.check_real("dirichlet_fraction", fraction, low=0, high=1)
  checks.check_real("dirichlet_alpha", alpha, low=0, low_open=True)
  known_fraction = checks.concrete(fraction)
  if known_fraction is not None and np.all(known_fraction == 0):
    return probs_to_logits(jax.nn.softmax(prior_logits, axis=-1))
  batch_size, num_actions = prior_logits.shape
  noise = jax.random.dirichlet(rng_key, jnp.full((num_actions,), alpha), shape=(batch_size,))
  probs = jax.nn.softmax(prior_logits, axis=-1)
  return probs_to_logits((1 - fraction) * probs + fraction * noise)
