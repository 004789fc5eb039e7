"""A seeded, layered two-player zero-sum game with many transpositions.

The game has layers `0 .. depth`, each of `width` states. A state is (layer, index in
layer, player to move). The game starts at (0, 0); from (l, i), action `a` leads to
(l + 1, next_index[l, i, a]), where `next_index` is a random table fixed by the seed,
so with `num_actions ** l > width` many move orders reach the same state. Reaching
layer `depth` ends the game after exactly `depth` moves.

Conventions:
  * `terminal_values[i]` in {-1, 0, +1} is the outcome, for the player who made the
    final move, of ending the game at (depth, i). That player gets it as reward, the
    other player its negation; every earlier move has reward 0.
  * With `illegal_fraction > 0`, a seeded mask makes some actions illegal; every
    non-terminal state keeps at least one legal action.
  * State values (`exact_values`) are the outcome under perfect play for the player to
    move; a terminal state's value is the outcome already decided for that player,
    i.e. `-terminal_values[i]`. Action values are for the player who takes the action.
  * As in pgx: `init(key)` draws which player id (0 or 1) moves first; stepping a
    terminated state returns it unchanged with zero rewards; an illegal action ends
    the game at once with `-1` for the player who took it and `+1` for the other; a
    terminated state's `legal_action_mask` is all True.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np


@chex.dataclass(frozen=True)
class DagState:
  """One state of the DAG game (unbatched; every field gains a leading axis under vmap).

  current_player: int32 [], id (0 or 1) of the player to move.
  observation: bool [depth + 1 + width], one-hot layer then one-hot index.
  rewards: float32 [2], reward of each player id for the last transition.
  terminated: bool [], the game is over.
  truncated: bool [], always False.
  legal_action_mask: bool [num_actions]; all True once terminated.
  _step_count: int32 [], moves played so far.
  layer: int32 [], in [0, depth].
  index: int32 [], in [0, width).
  """

  current_player: chex.Array
  observation: chex.Array
  rewards: chex.Array
  terminated: chex.Array
  truncated: chex.Array
  legal_action_mask: chex.Array
  _step_count: chex.Array
  layer: chex.Array
  index: chex.Array

  @property
  def env_id(self) -> str:
    return "dag"


def transposition_words(state: DagState) -> chex.Array:
  """What decides a DAG state: uint32 [3], (layer, index, terminated).

  The player to move is left out: players strictly alternate, so from a given start the
  layer already fixes who moves, and the rules treat both player ids alike (rewards go
  to whoever made the final move), so the value for the player to move depends on
  (layer, index) only. The terminated flag is kept because an illegal action ends the
  game without moving.
  """
  return jnp.stack([state.layer, state.index, state.terminated.astype(jnp.int32)]).astype(
    jnp.uint32
  )


def _select(pred, on_true, on_false):
  """Picks `on_true` or `on_false` leaf by leaf (both pytrees of one structure)."""
  return jax.tree.map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)


class DagGame:
  """The layered DAG game; all tables are drawn from `seed` at construction.

  Attributes (numpy, also kept as jnp constants for `step`):
    next_index: int32 [depth, width, num_actions], index in layer l + 1 reached by
      each action.
    legal: bool [depth, width, num_actions], legal actions of every non-terminal state.
    terminal_values: int32 [width], outcome of ending at (depth, i) for the player who
      made the final move.
  """

  def __init__(
    self,
    num_actions: int = 4,
    depth: int = 6,
    width: int = 8,
    seed: int = 0,
    illegal_fraction: float = 0.0,
  ):
    if num_actions < 1 or depth < 1 or width < 1:
      raise ValueError("num_actions, depth and width must be positive")
    if not 0.0 <= illegal_fraction < 1.0:
      raise ValueError(f"illegal_fraction must be in [0, 1), got {illegal_fraction}")
    self._num_actions = num_actions
    self.depth = depth
    self.width = width
    self.seed = seed
    rng = np.random.default_rng(seed)
    shape = (depth, width, num_actions)
    self.next_index = rng.integers(0, width, size=shape).astype(np.int32)
    self.terminal_values = rng.integers(-1, 2, size=width).astype(np.int32)
    legal = rng.random(shape) >= illegal_fraction
    always_legal = rng.integers(0, num_actions, size=(depth, width))
    legal[np.arange(depth)[:, None], np.arange(width)[None, :], always_legal] = True
    self.legal = legal
    self._next_index_jnp = jnp.asarray(self.next_index)
    self._legal_jnp = jnp.asarray(self.legal)
    self._terminal_values_jnp = jnp.asarray(self.terminal_values, jnp.float32)
    self._exact_values: np.ndarray | None = None  # computed on first use

  @property
  def id(self) -> str:
    return "dag"

  @property
  def version(self) -> str:
    return "v0"

  @property
  def num_players(self) -> int:
    return 2

  @property
  def num_actions(self) -> int:
    return self._num_actions

  @property
  def observation_shape(self) -> tuple[int]:
    return (self.depth + 1 + self.width,)

  transposition_words = staticmethod(transposition_words)

  def init(self, key: chex.PRNGKey) -> DagState:
    """The start (0, 0); `key` draws which player id moves first."""
    first_player = jax.random.bernoulli(key).astype(jnp.int32)
    return self.init_at(0, 0, first_player)

  def init_at(self, layer, index, current_player=0) -> DagState:
    """The state (layer, index) with `current_player` to move. Jittable."""
    layer = jnp.asarray(layer, jnp.int32)
    index = jnp.asarray(index, jnp.int32)
    terminated = layer >= self.depth
    return DagState(
      current_player=jnp.asarray(current_player, jnp.int32),
      observation=self._observe(layer, index),
      rewards=jnp.zeros(2, jnp.float32),
      terminated=terminated,
      truncated=jnp.bool_(False),
      legal_action_mask=self._legal_action_mask(layer, index, terminated),
      _step_count=jnp.int32(0),
      layer=layer,
      index=index,
    )

  def step(self, state: DagState, action, key=None) -> DagState:
    """Plays `action` (int32 []) for `state.current_player`. `key` is unused."""
    del key
    action = jnp.asarray(action, jnp.int32)
    mover = state.current_player
    is_legal = state.legal_action_mask[action]
    row = jnp.minimum(state.layer, self.depth - 1)  # a terminated state never moves

    layer = jnp.where(is_legal, state.layer + 1, state.layer)
    index = jnp.where(is_legal, self._next_index_jnp[row, state.index, action], state.index)
    reached_end = is_legal & (layer == self.depth)
    terminated = reached_end | ~is_legal
    mover_reward = jnp.where(
      reached_end, self._terminal_values_jnp[index], jnp.where(is_legal, 0.0, -1.0)
    )
    rewards = jnp.zeros(2, jnp.float32).at[mover].set(mover_reward).at[1 - mover].set(-mover_reward)
    moved = DagState(
      current_player=1 - mover,
      observation=self._observe(layer, index),
      rewards=rewards,
      terminated=terminated,
      truncated=jnp.bool_(False),
      legal_action_mask=self._legal_action_mask(layer, index, terminated),
      _step_count=state._step_count + 1,
      layer=layer,
      index=index,
    )
    unchanged = state.replace(rewards=jnp.zeros_like(state.rewards))
    return _select(state.terminated | state.truncated, unchanged, moved)

  def exact_values(self) -> np.ndarray:
    """int32 [depth + 1, width]: minimax value of every state for the player to move.

    Layer `depth` holds `-terminal_values` (the outcome already decided, seen by the
    player to move); below it `V[l, i] = max over legal a of -V[l + 1, next_index]`.
    """
    return self._solved_values().copy()

  def exact_action_values(self, layer: int, index: int) -> dict[int, int]:
    """Value of every legal action at (layer, index) for the player who takes it.

    Empty for a terminal state (layer == depth).
    """
    if not (0 <= layer <= self.depth and 0 <= index < self.width):
      raise ValueError(f"no state ({layer}, {index})")
    if layer == self.depth:
      return {}
    values = self._solved_values()
    return {
      int(a): int(-values[layer + 1, self.next_index[layer, index, a]])
      for a in np.flatnonzero(self.legal[layer, index])
    }

  def _solved_values(self) -> np.ndarray:
    """`exact_values`, computed once and kept (callers must not modify it)."""
    if self._exact_values is None:
      values = np.zeros((self.depth + 1, self.width), np.int32)
      values[self.depth] = -self.terminal_values
      for layer in range(self.depth - 1, -1, -1):
        action_values = -values[layer + 1][self.next_index[layer]]  # [width, A]
        values[layer] = np.where(self.legal[layer], action_values, -2).max(axis=1)
      self._exact_values = values
    return self._exact_values

  def _legal_action_mask(self, layer, index, terminated):
    row = jnp.minimum(layer, self.depth - 1)
    return self._legal_jnp[row, index] | terminated

  def _observe(self, layer, index):
    return jnp.concatenate([jnp.arange(self.depth + 1) == layer, jnp.arange(self.width) == index])
