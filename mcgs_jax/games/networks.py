"""A small flax policy-value network for the pgx board games (needs the `train`
extra: flax, optax)."""

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp


class MLPPolicyValueNet(nn.Module):
  """A small policy-value MLP for board games with flat-able observations.

  Maps an observation batch `[B, ...]` (any dtype; flattened and cast to float32)
  through `len(hidden)` ReLU layers to `(logits [B, num_actions], value [B])` with
  the value squashed into `[-1, 1]` by `tanh`.
  """

  num_actions: int
  hidden: Sequence[int] = (64, 64)

  @nn.compact
  def __call__(self, observation):
    features = jnp.reshape(observation, (observation.shape[0], -1)).astype(jnp.float32)
    for width in self.hidden:
      features = nn.relu(nn.Dense(width)(features))
    logits = nn.Dense(self.num_actions, name="policy_head")(features)
    value = jnp.tanh(nn.Dense(1, name="value_head")(features))[:, 0]
    return logits, value


def init_network(env, rng_key, hidden: Sequence[int] = (64, 64)):
  """Builds and initialises an `MLPPolicyValueNet` for `env`.

  The input shape is taken from the observation of `env.init(rng_key)`.

  Returns:
    `(apply_fn, params)`, ready for `network_evaluator(apply_fn)` with `params`.
  """
  network = MLPPolicyValueNet(num_actions=env.num_actions, hidden=tuple(hidden))
  init_key, state_key = jax.random.split(rng_key)
  example_observation = env.init(state_key).observation[None]
  params = network.init(init_key, example_observation)
  return network.apply, params
