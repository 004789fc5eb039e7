"""Flax policy-value networks (need the `train` extra: flax, optax): an MLP for any
flat-able observation, and a set network for observations with one row of features
per action (jumanji's Knapsack and TSP). A network is named by a spec string
(`parse_network`): `"mlp"` (widths from `hidden`) or `"entity:BLOCKS,WIDTH"`."""

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


class EntityPolicyValueNet(nn.Module):
  """A set network for observations `[B, A, F]` with one row of features per action
  (an item to pack, a city to visit): each row is embedded (`width`), `blocks`
  pre-norm Transformer blocks (self-attention over the rows, then a two-layer MLP,
  each with a residual; 0 blocks: each row on its own, a Deep Sets network), a logit
  per row from its own embedding (`[B, A]`), and the
  value from the rows' mean and maximum, squashed into `value_bounds` as
  `MLPPolicyValueNet`'s. The rows' order does not matter: permuting them permutes
  the logits and leaves the value unchanged.
  """

  num_actions: int
  blocks: int = 2
  width: int = 64
  heads: int = 4
  value_bounds: tuple[float, float] | None = (-1.0, 1.0)

  @nn.compact
  def __call__(self, observation):
    features = nn.Dense(self.width, name="embed")(observation.astype(jnp.float32))
    for _ in range(self.blocks):
      normed = nn.LayerNorm()(features)
      features = features + nn.MultiHeadDotProductAttention(num_heads=self.heads)(normed, normed)
      normed = nn.LayerNorm()(features)
      features = features + nn.Dense(self.width)(nn.relu(nn.Dense(2 * self.width)(normed)))
    features = nn.LayerNorm()(features)
    logits = nn.Dense(1, name="policy_head")(features)[..., 0]
    pooled = jnp.concatenate([jnp.mean(features, axis=1), jnp.max(features, axis=1)], axis=-1)
    value = nn.Dense(1, name="value_head")(nn.relu(nn.Dense(self.width)(pooled)))[:, 0]
    return logits, squash_value(value, self.value_bounds)


NETWORK_KINDS = ("mlp", "entity")


def parse_network(spec: str) -> tuple[str, tuple[int, ...]]:
  """`"mlp"` -> `("mlp", ())`; `"entity:2,64"` -> `("entity", (2, 64))` (blocks >= 0,
  width >= 1; `"entity"` alone: 2 blocks of 64). ValueError naming the spec otherwise."""
  kind, _, arguments = str(spec).partition(":")
  expected = "'mlp' or 'entity:BLOCKS,WIDTH' (e.g. entity:2,64)"
  try:
    numbers = tuple(int(part) for part in arguments.split(",")) if arguments else ()
  except ValueError:
    raise ValueError(f"network {spec!r}: expected {expected}") from None
  if kind == "mlp" and not numbers:
    return kind, ()
  if kind == "entity" and (not numbers or (len(numbers) == 2 and numbers[0] >= 0 < numbers[1])):
    return kind, numbers or (2, 64)
  raise ValueError(f"network {spec!r}: expected {expected}")


def init_network(env, rng_key, hidden: Sequence[int] = (64, 64), network: str = "mlp"):
  """Builds and initialises the network `network` (`parse_network`) for `env`: an
  `MLPPolicyValueNet` of widths `hidden`, or an `EntityPolicyValueNet` (for an env
  whose observation has one row per action, `env.entity_observation`).

  The input shape is taken from the observation of `env.init(rng_key)`; the value's
  bounds are the env's `value_bounds` where it has them (a one-player jumanji env:
  `(0, 1)` or None), else `(-1, 1)` (a two-player game's outcomes).

  Returns:
    `(apply_fn, params)`, ready for `network_evaluator(apply_fn)` with `params`.
  """
  kind, numbers = parse_network(network)
  bounds = getattr(env, "value_bounds", (-1.0, 1.0))
  model: nn.Module
  if kind == "entity":
    if not getattr(env, "entity_observation", False):
      raise ValueError(
        f"network {network!r} needs an observation with one row per action "
        f"(jumanji's Knapsack-v1 and TSP-v1); {getattr(env, 'id', env)!r} has none"
      )
    model = EntityPolicyValueNet(
      num_actions=env.num_actions, blocks=numbers[0], width=numbers[1], value_bounds=bounds
    )
  else:
    model = MLPPolicyValueNet(
      num_actions=env.num_actions, hidden=tuple(hidden), value_bounds=bounds
    )
  init_key, state_key = jax.random.split(rng_key)
  example_observation = env.init(state_key).observation[None]
  params = model.init(init_key, example_observation)
  return model.apply, params
