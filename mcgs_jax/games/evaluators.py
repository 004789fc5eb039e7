"""Leaf evaluators: functions that score a batch of game states for the search.

An evaluator is a pure, jittable function

    evaluate(params, rng_key, state) -> (logits, value)

where `state` is a batch of states of one environment (a pytree of `[B, ...]`
arrays, e.g. a batched pgx `State`), `logits` is `[B, A]` float32 policy logits
(unmasked: the caller masks illegal actions) and `value` is `[B]` float32, the
expected final return of the player to move at `state`, in the units of the game's
rewards (`[-1, 1]` for the pgx board games). `params` is whatever the evaluator
needs (network weights) and is ignored by the ones that need nothing.

The environments are pgx environments or objects that follow the same protocol:
`env.init(key)`, `env.step(state, action)`, `env.num_actions`, and states with
`current_player`, `rewards [num_players]`, `terminated`, `legal_action_mask [A]`
and optionally `truncated` and `observation`.
"""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

Evaluator = Callable[[Any, jax.Array, Any], tuple[jax.Array, jax.Array]]

DEFAULT_MAX_ROLLOUT_STEPS = 1000


def batch_size_of(state) -> int:
  """The leading dimension `B` of a batched state."""
  return jnp.shape(state.current_player)[0]


def is_finished(state) -> jax.Array:
  """`[B]` bool: the game is over (terminated, or truncated when the env has it)."""
  finished = state.terminated
  truncated = getattr(state, "truncated", None)
  if truncated is not None:
    finished = finished | truncated
  return finished


def rewards_of(state, players) -> jax.Array:
  """`[B]` float32: `state.rewards[b, players[b]]` for each game `b`."""
  rewards = jnp.asarray(state.rewards, jnp.float32)
  players = jnp.asarray(players, jnp.int32)
  return jnp.take_along_axis(rewards, players[:, None], axis=1)[:, 0]


def uniform_evaluator() -> Evaluator:
  """An evaluator that knows nothing: zero logits (uniform prior), zero value.

  The number of actions is read from `state.legal_action_mask`.
  """

  def evaluate(params, rng_key, state):
    del params, rng_key
    logits = jnp.zeros(jnp.shape(state.legal_action_mask), jnp.float32)
    value = jnp.zeros(jnp.shape(state.current_player), jnp.float32)
    return logits, value

  return evaluate


def random_legal_actions(rng_keys, legal_action_mask) -> jax.Array:
  """`[N]` int32, one action per game drawn uniformly among its legal actions.

  Args:
    rng_keys: `[N]` keys, one per game.
    legal_action_mask: `[N, A]` bool.

  A game with no legal action (a finished game of a non-pgx env) gets action 0; it
  is never stepped meaningfully because it is already over. This is the one "random
  legal move" of the package: rollouts, arena openings and benchmark positions use it.
  """
  log_weights = jnp.where(legal_action_mask, 0.0, -jnp.inf)
  sample = lambda key, logits: jax.random.categorical(key, logits)
  actions = jax.vmap(sample)(rng_keys, log_weights)
  return jnp.where(jnp.any(legal_action_mask, axis=-1), actions, 0).astype(jnp.int32)


def rollout_evaluator(env, *, num_rollouts: int = 1, max_steps: int | None = None) -> Evaluator:
  """Scores states by the average return of uniformly random playouts.

  From each state, `num_rollouts` independent games are played to the end by
  picking uniformly among the legal actions at every step. The value is the mean,
  over the rollouts, of the rewards the player to move at the evaluated state
  collects from there on (for the pgx board games: +1 win, -1 loss, 0 draw). A
  state that is already over has value 0: its rewards were paid by the move that
  ended it. Logits are zero.

  The rollouts of the whole batch advance together in one `lax.while_loop` that
  stops when every rollout has finished or after `max_steps` moves, whichever comes
  first; a rollout cut off by the cap keeps the rewards it collected so far.

  Args:
    env: the environment the states belong to.
    num_rollouts: playouts averaged per state (an extra batch axis, so the cost
      grows linearly with it).
    max_steps: cap on the length of a playout. Defaults to `env.max_game_length`
      when the env exposes it, else `DEFAULT_MAX_ROLLOUT_STEPS` (1000), far more
      than tic_tac_toe (9) or connect_four (42) need; the loop stops as soon as all
      playouts end, so a generous cap costs nothing.

  Returns:
    `evaluate(params, rng_key, state)`; `params` is ignored. The same `rng_key` and
    states give the same values; each game of the batch and each rollout use their
    own key split from `rng_key`.
  """
  if num_rollouts < 1:
    raise ValueError(f"num_rollouts must be at least 1, got {num_rollouts}")
  if max_steps is None:
    max_steps = getattr(env, "max_game_length", None) or DEFAULT_MAX_ROLLOUT_STEPS
  if max_steps < 1:
    raise ValueError(f"max_steps must be at least 1, got {max_steps}")
  step_batch = jax.vmap(env.step)

  def play_out(state, rng_keys):
    """Plays one random game from each of the `[N]` states; returns `[N]` returns."""
    player = state.current_player

    def keep_going(carry):
      num_steps, current, _ = carry
      return (num_steps < max_steps) & jnp.any(~is_finished(current))

    def advance(carry):
      num_steps, current, collected = carry
      step_keys = jax.vmap(jax.random.fold_in, (0, None))(rng_keys, num_steps)
      actions = random_legal_actions(step_keys, current.legal_action_mask)
      following = step_batch(current, actions)
      reward = jnp.where(is_finished(current), 0.0, rewards_of(following, player))
      return num_steps + 1, following, collected + reward

    initial = (jnp.int32(0), state, jnp.zeros(jnp.shape(player), jnp.float32))
    _, _, collected = jax.lax.while_loop(keep_going, advance, initial)
    return collected

  def evaluate(params, rng_key, state):
    del params
    batch_size = batch_size_of(state)
    rollout_keys = jax.random.split(rng_key, (num_rollouts, batch_size))
    returns = jax.vmap(play_out, in_axes=(None, 0))(state, rollout_keys)  # [R, B]
    logits = jnp.zeros(jnp.shape(state.legal_action_mask), jnp.float32)
    return logits, jnp.mean(returns, axis=0)

  return evaluate


def network_evaluator(apply_fn: Callable) -> Evaluator:
  """Scores states with a policy-value network applied to `state.observation`.

  Args:
    apply_fn: `apply_fn(params, observation [B, ...]) -> (logits [B, A],
      value [B])`, the value for the player to move (pgx observations are already
      from that player's point of view).

  Returns:
    `evaluate(params, rng_key, state)` with the network weights as `params`; the
    key is unused.
  """

  def evaluate(params, rng_key, state):
    del rng_key
    logits, value = apply_fn(params, state.observation)
    return jnp.asarray(logits, jnp.float32), jnp.asarray(value, jnp.float32)

  return evaluate


def __getattr__(name: str):
  # The flax network lives in `mcgs_jax.games.networks` so that this module (and
  # `make_game`) works without flax; its old names here still resolve.
  if name in ("MLPPolicyValueNet", "init_network"):
    from mcgs_jax.games import networks

    return getattr(networks, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
