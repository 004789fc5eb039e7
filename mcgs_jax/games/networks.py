"""Flax policy-value networks (need the `train` extra: flax, optax): an MLP for any
flat-able observation, a residual convolutional network for board observations
`[H, W, C]` (pgx's games), and a set network for observations with one row of
features per action (jumanji's Knapsack and TSP). A network is named by a spec string
(`parse_network`): `"mlp"` (widths from `hidden`), `"resnet:BLOCKS,CHANNELS"` or
`"entity:BLOCKS,WIDTH"`."""

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


class ResidualBlock(nn.Module):
  """A pre-activation residual block: `x + conv(relu(norm(conv(relu(norm(x))))))`,
  two 3x3 convolutions of `channels`, shape `[B, H, W, channels]` kept."""

  channels: int

  @nn.compact
  def __call__(self, features):
    hidden = nn.Conv(self.channels, (3, 3))(nn.relu(nn.LayerNorm()(features)))
    return features + nn.Conv(self.channels, (3, 3))(nn.relu(nn.LayerNorm()(hidden)))


class ResNetPolicyValueNet(nn.Module):
  """A residual convolutional policy-value network for board observations
  `[B, H, W, C]` (pgx's feature planes; any dtype, cast to float32), shaped like the
  network of pgx's AlphaZero example: a 3x3 convolution to `channels`, `blocks`
  pre-activation residual blocks (`ResidualBlock`), then two heads over the final
  features: a 1x1 convolution to 2 planes and a dense layer to the logits
  `[B, num_actions]`, and a 1x1 convolution to 1 plane, a dense layer of `channels`
  units and a dense layer to the value `[B]`, squashed into `value_bounds` as
  `MLPPolicyValueNet`'s.

  Layer norm stands where pgx's network has batch norm: it keeps no running
  statistics, so the network stays a pure `apply(params, observation)` that a search
  can call inside `jit` without mutable state, in self-play and in the arena alike.
  """

  num_actions: int
  blocks: int = 6
  channels: int = 64
  value_bounds: tuple[float, float] | None = (-1.0, 1.0)

  @nn.compact
  def __call__(self, observation):
    features = nn.Conv(self.channels, (3, 3), name="stem")(observation.astype(jnp.float32))
    for _ in range(self.blocks):
      features = ResidualBlock(self.channels)(features)
    features = nn.relu(nn.LayerNorm()(features))
    batch = observation.shape[0]
    policy = nn.relu(nn.Conv(2, (1, 1), name="policy_conv")(features))
    logits = nn.Dense(self.num_actions, name="policy_head")(jnp.reshape(policy, (batch, -1)))
    value = nn.relu(nn.Conv(1, (1, 1), name="value_conv")(features))
    value = nn.relu(nn.Dense(self.channels, name="value_hidden")(jnp.reshape(value, (batch, -1))))
    value = nn.Dense(1, name="value_head")(value)[:, 0]
    return logits, squash_value(value, self.value_bounds)


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


NETWORK_KINDS = ("mlp", "resnet", "entity")
# Blocks and width of a spec given without them ("resnet", "entity").
DEFAULT_SIZES = {"resnet": (6, 64), "entity": (2, 64)}


def parse_network(spec: str) -> tuple[str, tuple[int, ...]]:
  """`"mlp"` -> `("mlp", ())`; `"resnet:6,64"` -> `("resnet", (6, 64))` (blocks >= 0,
  channels >= 1); `"entity:2,64"` -> `("entity", (2, 64))` (blocks >= 0, width >= 1).
  `"resnet"` and `"entity"` alone take `DEFAULT_SIZES`. ValueError naming the spec
  otherwise."""
  kind, _, arguments = str(spec).partition(":")
  expected = "'mlp', 'resnet:BLOCKS,CHANNELS' (e.g. resnet:6,64) or 'entity:BLOCKS,WIDTH'"
  try:
    numbers = tuple(int(part) for part in arguments.split(",")) if arguments else ()
  except ValueError:
    raise ValueError(f"network {spec!r}: expected {expected}") from None
  if kind == "mlp" and not numbers:
    return kind, ()
  sized = len(numbers) == 2 and numbers[0] >= 0 and numbers[1] >= 1
  if kind in DEFAULT_SIZES and (not numbers or sized):
    return kind, numbers or DEFAULT_SIZES[kind]
  raise ValueError(f"network {spec!r}: expected {expected}")


def init_network(env, rng_key, hidden: Sequence[int] = (64, 64), network: str = "mlp"):
  """Builds and initialises the network `network` (`parse_network`) for `env`: an
  `MLPPolicyValueNet` of widths `hidden`, a `ResNetPolicyValueNet` (for an env whose
  observation is a board `[H, W, C]`), or an `EntityPolicyValueNet` (for an env whose
  observation has one row per action, `env.entity_observation`).

  The input shape is taken from the observation of `env.init(rng_key)`; the value's
  bounds are the env's `value_bounds` where it has them (a one-player jumanji env:
  `(0, 1)` or None), else `(-1, 1)` (a two-player game's outcomes).

  Returns:
    `(apply_fn, params)`, ready for `network_evaluator(apply_fn)` with `params`.
  """
  kind, numbers = parse_network(network)
  bounds = getattr(env, "value_bounds", (-1.0, 1.0))
  model: nn.Module
  init_key, state_key = jax.random.split(rng_key)
  example_observation = env.init(state_key).observation[None]
  if kind == "resnet":
    if example_observation.ndim != 4:
      raise ValueError(
        f"network {network!r} needs a board observation [H, W, C]; "
        f"{getattr(env, 'id', env)!r} has shape {tuple(example_observation.shape[1:])}"
      )
    model = ResNetPolicyValueNet(
      num_actions=env.num_actions, blocks=numbers[0], channels=numbers[1], value_bounds=bounds
    )
  elif kind == "entity":
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
  params = model.init(init_key, example_observation)
  return model.apply, params
