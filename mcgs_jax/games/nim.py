"""Nim as a pgx-style environment: jittable, written unbatched, used under `jax.vmap`.

Rules (normal play): the players alternately take one or more stones from a single
heap; whoever takes the last stone wins.

Conventions:
  * Action `a = heap_index * max_heap + (take - 1)` takes `take` stones
    (`1 <= take <= max_heap`) from heap `heap_index`, so `num_actions = H * max_heap`
    where `H` is the number of heaps and `max_heap = max(initial heaps)`.
  * `rewards[p]` is the reward of player `p` for the last transition: `+1` for the
    player who took the last stone, `-1` for the other, `0` on every other move.
  * As in pgx: `init(key)` draws which player id (0 or 1) moves first; stepping a
    terminated state returns it unchanged with zero rewards; an illegal action ends
    the game at once, the heaps unchanged, with `-1` for the player who took it and
    `+1` for the other; a terminated state's `legal_action_mask` is all True.

Example:
  env = Nim((3, 4, 5))
  states = jax.vmap(env.init)(jax.random.split(key, 8))
  states = jax.vmap(env.step)(states, actions)      # actions: int32 [8]
"""

from collections.abc import Sequence

import chex
import jax
import jax.numpy as jnp
import numpy as np


@chex.dataclass(frozen=True)
class NimState:
  """One Nim position (unbatched; every field gains a leading axis under vmap).

  current_player: int32 [], id (0 or 1) of the player to move.
  observation: bool [H, max_heap + 1], one-hot size of every heap.
  rewards: float32 [2], reward of each player id for the last transition.
  terminated: bool [], the game is over.
  truncated: bool [], always False (Nim always ends).
  legal_action_mask: bool [H * max_heap]; all True once terminated.
  _step_count: int32 [], moves played so far.
  heaps: int32 [H], stones left in every heap.
  """

  current_player: chex.Array
  observation: chex.Array
  rewards: chex.Array
  terminated: chex.Array
  truncated: chex.Array
  legal_action_mask: chex.Array
  _step_count: chex.Array
  heaps: chex.Array

  @property
  def env_id(self) -> str:
    return "nim"


def transposition_words(state: NimState) -> chex.Array:
  """What decides a Nim state: uint32 [H + 1], the heaps then the terminated flag.

  The player to move is deliberately left out. Nim is impartial: both players have the
  same moves from the same heaps, so the value of a position for the player to move
  depends on the heaps alone, and the search keeps every value from the mover's
  perspective. Leaving the player id out therefore merges states that differ only in
  who is to move (e.g. reached after an odd and an even number of moves, or from games
  whose first player differs) without changing any value. The terminated flag is kept
  because an illegal action ends the game without touching the heaps.
  """
  return jnp.concatenate(
    [state.heaps.astype(jnp.uint32), state.terminated.astype(jnp.uint32)[None]]
  )


MAX_HEAPS = 16
MAX_HEAP = 64
MAX_STONES = 256


def parse_heaps(text: str) -> tuple[int, ...]:
  """Heap sizes from a comma-separated string: `"3,4,5" -> (3, 4, 5)`."""
  heaps = []
  for part in text.split(","):
    try:
      heaps.append(int(part.strip()))
    except ValueError:
      raise ValueError(f"heaps must be integers, got {part.strip()!r} in {text!r}") from None
  if not heaps or min(heaps) < 0 or max(heaps) < 1:
    raise ValueError(f"heaps must be non-negative with at least one stone, got {text!r}")
  if len(heaps) > MAX_HEAPS or max(heaps) > MAX_HEAP or sum(heaps) > MAX_STONES:
    # Every (heap, stones) pair is an action, and the exact solver recurses once
    # per move (at most once per stone): bound both.
    raise ValueError(
      f"at most {MAX_HEAPS} heaps of at most {MAX_HEAP} stones and {MAX_STONES} in all, "
      f"got {text!r}"
    )
  return tuple(heaps)


def _select(pred, on_true, on_false):
  """Picks `on_true` or `on_false` leaf by leaf (both pytrees of one structure)."""
  return jax.tree.map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)


class Nim:
  """Nim with the initial heaps given at construction (default 3-4-5).

  Attributes:
    initial_heaps: tuple of int, heap sizes of `init`.
    num_heaps: `H`.
    max_heap: largest initial heap; also the largest take of one action.
  """

  def __init__(self, heaps: Sequence[int] = (3, 4, 5)):
    heaps = tuple(int(h) for h in heaps)
    if not heaps or min(heaps) < 0 or max(heaps) < 1:
      raise ValueError(f"heaps must be non-negative with at least one stone, got {heaps}")
    self.initial_heaps = heaps
    self.num_heaps = len(heaps)
    self.max_heap = max(heaps)

  @property
  def id(self) -> str:
    return "nim"

  @property
  def version(self) -> str:
    return "v0"

  @property
  def num_players(self) -> int:
    return 2

  @property
  def num_actions(self) -> int:
    return self.num_heaps * self.max_heap

  @property
  def observation_shape(self) -> tuple[int, int]:
    return (self.num_heaps, self.max_heap + 1)

  transposition_words = staticmethod(transposition_words)

  def action(self, heap_index: int, take: int) -> int:
    """The action that takes `take` stones from heap `heap_index`."""
    if not (0 <= heap_index < self.num_heaps and 1 <= take <= self.max_heap):
      raise ValueError(f"no action takes {take} from heap {heap_index}")
    return heap_index * self.max_heap + take - 1

  def describe_action(self, action: int) -> str:
    """The inverse of `action`, for people: `"heap 0 take 2"`."""
    return f"heap {action // self.max_heap} take {action % self.max_heap + 1}"

  def init(self, key: chex.PRNGKey) -> NimState:
    """The initial heaps; `key` draws which player id moves first."""
    first_player = jax.random.bernoulli(key).astype(jnp.int32)
    return self.init_from_heaps(jnp.asarray(self.initial_heaps, jnp.int32), first_player)

  def init_from_heaps(self, heaps, current_player=0) -> NimState:
    """A state with the given heaps (int [H], each in [0, max_heap]) and player to move.

    All heaps empty gives a terminated state: the player to move has already lost.
    Jittable; the bounds are checked only for concrete (non-traced) heaps.
    """
    if isinstance(heaps, (tuple, list, np.ndarray)):
      heaps_np = np.asarray(heaps)
      if (
        heaps_np.shape != (self.num_heaps,) or heaps_np.min() < 0 or heaps_np.max() > self.max_heap
      ):
        raise ValueError(
          f"heaps must be {self.num_heaps} ints in [0, {self.max_heap}], got {heaps}"
        )
    heaps = jnp.asarray(heaps, jnp.int32)
    terminated = jnp.all(heaps == 0)
    return NimState(
      current_player=jnp.asarray(current_player, jnp.int32),
      observation=self._observe(heaps),
      rewards=jnp.zeros(2, jnp.float32),
      terminated=terminated,
      truncated=jnp.bool_(False),
      legal_action_mask=self._legal_action_mask(heaps, terminated),
      _step_count=jnp.int32(0),
      heaps=heaps,
    )

  def step(self, state: NimState, action, key=None) -> NimState:
    """Plays `action` (int32 []) for `state.current_player`. `key` is unused."""
    del key
    action = jnp.asarray(action, jnp.int32)
    mover = state.current_player
    heap_index = action // self.max_heap
    take = action % self.max_heap + 1
    is_legal = state.legal_action_mask[action]

    heaps = jnp.where(is_legal, state.heaps.at[heap_index].add(-take), state.heaps)
    took_last = is_legal & jnp.all(heaps == 0)
    terminated = took_last | ~is_legal
    # `mover_reward` is +1 for taking the last stone, -1 for an illegal action.
    mover_reward = jnp.where(took_last, 1.0, jnp.where(is_legal, 0.0, -1.0))
    rewards = jnp.zeros(2, jnp.float32).at[mover].set(mover_reward).at[1 - mover].set(-mover_reward)
    moved = NimState(
      current_player=1 - mover,
      observation=self._observe(heaps),
      rewards=rewards,
      terminated=terminated,
      truncated=jnp.bool_(False),
      legal_action_mask=self._legal_action_mask(heaps, terminated),
      _step_count=state._step_count + 1,
      heaps=heaps,
    )
    unchanged = state.replace(rewards=jnp.zeros_like(state.rewards))
    return _select(state.terminated | state.truncated, unchanged, moved)

  def _legal_action_mask(self, heaps, terminated):
    """bool [H * max_heap]: take `t` from heap `h` is legal iff `t <= heaps[h]`."""
    takes = jnp.arange(1, self.max_heap + 1, dtype=jnp.int32)
    mask = (takes[None, :] <= heaps[:, None]).reshape(-1)
    return mask | terminated

  def _observe(self, heaps):
    """bool [H, max_heap + 1], one-hot size of every heap."""
    return heaps[:, None] == jnp.arange(self.max_heap + 1, dtype=jnp.int32)[None, :]
