"""A small flax policy-value network for the pgx board games (needs the `train`
extra: flax, optax)."""

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp


class MLPPolicyValueNet(nn.Module):
  """A small policy-value MLP for games with flat-able observations.

  Maps an observation batch `[B, ...]` (any dtype; flattened and cast to float32)
  through `len(hidden)` ReLU layers to `(logits [B, num_actions], value [B])`, the
  value squashed into `value_bounds`: `tanh` for `(-1, 1)` (two-player outcomes),
  `low + (high - low) * (tanh + 1) / 2` for other bounds (a one-player game that
  pays 1 for solving: `(0, 1)`), and not at all for None (returns without a known
  bound: Knapsack's packed value, TSP's minus tour length).
  """

  num_actions: int
  hidden: Sequence[int] = (64, 64)
  value_bounds: tuple[float, float] | None = (-1.0, 1.0)

  @nn.compact
  def __call__(self, observation):
    features = jnp.reshape(observation, (observation.shape[0], -1)).astype(jnp.float32)
    for width in self.hidden:
      features = nn.relu(nn.Dense(width)(features))
    logits = nn.Dense(self.num_actions, name="policy_head")(features)
    value = nn.Dense(1, name="value_head")(features)[:, 0]
    return logits, squash_value(value, self.value_bounds)


def squash_value(value, value_bounds: tuple[float, float] | None):
  """`value` (`[B]`, unbounded) mapped into `value_bounds` (see `MLPPolicyValueNet`)."""
  if value_bounds is None:
    return value
  low, high = value_bounds
  if (low, high) == (-1.0, 1.0):
    return jnp.tanh(value)
  return low + (high - low) * (jnp.tanh(value) + 1.0) / 2.0


def init_network(env, rng_key, hidden: Sequence[int] = (64, 64)):
  """Builds and initialises an `MLPPolicyValueNet` for `env`.

  The input shape is taken from the observation of `env.init(rng_key)`; the value's
  bounds are the env's `value_bounds` where it has them (a one-player jumanji env:
  `(0, 1)` or None), else `(-1, 1)` (a two-player game's outcomes).

  Returns:
    `(apply_fn, params)`, ready for `network_evaluator(apply_fn)` with `params`.
  """
  network = MLPPolicyValueNet(
    num_actions=env.num_actions,
    hidden=tuple(hidden),
    value_bounds=getattr(env, "value_bounds", (-1.0, 1.0)),
  )
  init_key, state_key = jax.random.split(rng_key)
  example_observation = env.init(state_key).observation[None]
  params = network.init(init_key, example_observation)
  return network.apply, params
