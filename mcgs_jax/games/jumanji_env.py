"""jumanji's single-agent environments as games: `make_game("jumanji:Sudoku-v0")`.

jumanji (InstaDeep's suite of JAX environments) steps a state with
`state, timestep = env.step(state, action)`. `JumanjiEnv` gives such an environment
the pgx protocol that `mcgs_jax.games.Game` consumes (`init(key)`,
`step(state, action)`, `num_actions`, `id`), with a `JumanjiState` holding jumanji's
state and what the search reads of the last timestep:

  * Actions: a `MultiDiscreteArray` action (Sudoku's `[9, 9, 9]`, Rubik's cube's
    `[6, 1, 3]`) is one index, row-major over `num_values` (`(row, col, digit)` is
    `81 * row + 9 * col + digit`), unflattened before jumanji's `step`.
  * Legal actions: the observation's `action_mask`, flattened the same way; a mask
    with one row per agent (Cleaner, RobotWarehouse) is the joint mask, an action
    legal when every agent's part is. All actions are legal where the observation has
    no mask (Rubik's cube). An action jumanji's mask forbids is never legal.
  * Rewards and discounts: `rewards [1]` is the timestep's reward (the player is
    always 0) and `discount` the timestep's discount, which `Game.recurrent_fn`
    multiplies in. A last timestep with discount 0 is `terminated`; one with a
    non-zero discount (a time limit cutting off the episode) is `truncated`. Every
    registered single-agent env ends its time limits with discount 0, as a
    termination.
  * `observation`: the network's input: one row of features per action for Knapsack
    (items) and TSP (cities), `[A, F]`; for the other envs the timestep's
    observation, every leaf flattened into one float32 vector `[O]`. `step` never
    reads the old observation, so `Game.store_observation=False` is exact.
  * Stepping a finished state returns it unchanged with reward 0 (pgx's rule).

`make_jumanji_env(env_id)` refuses, with a `ValueError` that says why, an env whose
actions are not discrete, whose flattened action count exceeds `MAX_ACTIONS`
(JobShop-v0: 21**10 joint actions), whose reward or discount is not a scalar
(multi-agent envs), an unknown id, and any id when jumanji is not installed.

Transposition keys (`JumanjiEnv.transposition_words`) are written per environment
where the state holds what does not decide the future (`JUMANJI_KEY_CONTENTS`);
every other env gets the exact key (`EXACT_KEY_CONTENTS`): every leaf of jumanji's
state, its PRNG key included.
"""

import difflib
import math
from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax._src.hashing import leaf_to_words

# The most flattened actions an env may have. A node stores `[A]` priors and edges,
# so the graph grows with A; 8,192 is above chess's 4,672 (pgx's widest game here)
# and refuses JobShop-v0 (21**10 joint actions), Connector-v3 (5**10) and MMST-v0
# (36**3 = 46,656).
MAX_ACTIONS = 8192

INSTALL_HINT = "pip install 'mcgs-jax[jumanji]'"

EXACT_KEY_CONTENTS = (
  "Every leaf of jumanji's state, bit for bit, its PRNG key included, and the "
  "terminated and truncated flags. Sound for any env (only identical states meet), "
  "but a step counter, a PRNG key that step advances or a record of the move order "
  "keeps apart states whose futures are the same."
)

_FLAGS = " The terminated and truncated flags close every key."

# What each written key holds and why (docs/games.md, "jumanji environments").
JUMANJI_KEY_CONTENTS: dict[str, str] = {
  "Sudoku-v0": (
    "Board (81 cells: -1 empty or the digit). The puzzle is in the board; the action "
    "mask, the reward (1 when the board is solved) and the end (no digit fits "
    "anywhere) follow from it. Not the PRNG key: step never reads it." + _FLAGS
  ),
  "Sudoku-very-easy-v0": "As Sudoku-v0 (same env, puzzles of another database).",
  "Knapsack-v1": (
    "Item weights and values (the instance, bit for bit), the packed set and the "
    "legal-action mask (the items that fit). Not remaining_budget: it is a float "
    "sum whose last bits depend on the packing order; the packed set decides it up "
    "to rounding, and the mask keeps apart the rare orders whose rounding changes "
    "what fits now. Not the PRNG key: step never reads it." + _FLAGS
  ),
  "TSP-v1": (
    "City coordinates (the instance, bit for bit), the visited set, the current "
    "city and the start city (the last step pays the return leg to it). Not the "
    "trajectory (the visit order: the dense reward pays each leg as it is "
    "travelled), num_visited (the size of the visited set) or the PRNG key." + _FLAGS
  ),
  "RubiksCube-v0": (
    "Cube (54 stickers) and step count: the episode ends at 200 steps, so the "
    "steps taken decide which solutions remain. Not the PRNG key: step never "
    "reads it." + _FLAGS
  ),
  "RubiksCube-partly-scrambled-v0": (
    "As RubiksCube-v0: cube and step count (this env's time limit is 20 steps)."
  ),
  "SlidingTilePuzzle-v0": (
    "Puzzle (25 tiles) and step count: the episode ends at 500 steps. Not the empty "
    "tile's position (it follows from the puzzle) or the PRNG key (step never reads "
    "it)." + _FLAGS
  ),
  "Minesweeper-v0": (
    "Board (100 cells: -1 unexplored or the count of adjacent mines) and the mine "
    "locations, sorted (the instance). Not the step count (no time limit, the "
    "reward does not read it) or the PRNG key (mines are placed at reset; step "
    "never reads it)." + _FLAGS
  ),
  "Game2048-v1": (
    "Board (16 exponents) and the PRNG key, from which step draws the new tile: the "
    "key makes the env deterministic given the state, so the key is exact. The key "
    "advances by one split per step whatever the move, so move orders that reach "
    "one board in one number of steps meet. Not the score (a running sum) or the "
    "step count (no time limit)." + _FLAGS
  ),
}


@chex.dataclass(frozen=True)
class JumanjiState:
  """One jumanji state and its last timestep (unbatched; each field gains a leading
  axis under vmap).

  env_state: jumanji's state of the env (a pytree, its PRNG key included).
  observation: float32, the network's input: `[A, F]`, one row of features per
    action, for Knapsack (items) and TSP (cities); `[O]`, the timestep's
    observation with every leaf flattened, for the other envs.
  legal_action_mask: bool [A], the flattened action mask (all True without one).
  terminated: bool [], the last timestep ended the episode with discount 0.
  truncated: bool [], it ended the episode with a non-zero discount (time limit).
  rewards: float32 [1], the reward of the last transition (0 at reset).
  discount: float32 [], the discount of the last transition (1 at reset).
  current_player: int32 [], always 0.
  """

  env_state: Any  # jumanji's State: a pytree of arrays
  observation: chex.Array  # float32 [A, F] or [O]
  legal_action_mask: chex.Array  # bool [A]
  terminated: chex.Array  # bool []
  truncated: chex.Array  # bool []
  rewards: chex.Array  # float32 [1]
  discount: chex.Array  # float32 []
  current_player: chex.Array  # int32 []


def _words(*leaves) -> jax.Array:
  """Unbatched arrays of any shape and dtype (typed PRNG keys included) as uint32 `[W]`."""
  words = []
  for leaf in leaves:
    leaf = jnp.asarray(leaf)
    if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
      leaf = jax.random.key_data(leaf)
    words.append(leaf_to_words(leaf[None], 1)[0])
  return jnp.concatenate(words)


def exact_words(state: JumanjiState) -> jax.Array:
  """Every leaf of jumanji's state, bit for bit (`EXACT_KEY_CONTENTS`)."""
  return _words(*jax.tree_util.tree_leaves(state.env_state))


def _sudoku_words(state: JumanjiState) -> jax.Array:
  return _words(state.env_state.board)


def _knapsack_words(state: JumanjiState) -> jax.Array:
  env_state = state.env_state
  return _words(
    env_state.weights, env_state.values, env_state.packed_items, state.legal_action_mask
  )


def _tsp_words(state: JumanjiState) -> jax.Array:
  env_state = state.env_state
  start_city = env_state.trajectory[0]  # -1 before the first city is chosen
  return _words(env_state.coordinates, env_state.visited_mask, env_state.position, start_city)


def _rubiks_cube_words(state: JumanjiState) -> jax.Array:
  return _words(state.env_state.cube, state.env_state.step_count)


def _sliding_tile_words(state: JumanjiState) -> jax.Array:
  return _words(state.env_state.puzzle, state.env_state.step_count)


def _minesweeper_words(state: JumanjiState) -> jax.Array:
  return _words(state.env_state.board, jnp.sort(state.env_state.flat_mine_locations))


def _game_2048_words(state: JumanjiState) -> jax.Array:
  return _words(state.env_state.board, state.env_state.key)


# The lowest and highest return of an episode, where the env bounds it: the solver's
# shortcuts (`GraphOptions.value_bounds`) then prove a solved path at once and set
# aside proven dead ends. Sudoku and Rubik's cube pay 1 on solving and nothing
# else; the others' returns have no bound known in advance (None: the solver proves
# by full expansion only).
VALUE_BOUNDS: dict[str, tuple[float, float]] = {
  "Sudoku-v0": (0.0, 1.0),
  "Sudoku-very-easy-v0": (0.0, 1.0),
  "RubiksCube-v0": (0.0, 1.0),
  "RubiksCube-partly-scrambled-v0": (0.0, 1.0),
}

# The most steps an episode of an env without a time limit takes: every step fills a
# Sudoku cell, packs an item or visits a city, or the episode ends.
_EPISODE_BOUNDS: dict[str, Callable[[Any], int]] = {
  "Sudoku-v0": lambda env: 81,
  "Sudoku-very-easy-v0": lambda env: 81,
  "Knapsack-v1": lambda env: int(env.num_items),
  "TSP-v1": lambda env: int(env.num_cities),
  "Minesweeper-v0": lambda env: int(env.num_rows) * int(env.num_cols),
}

_KEY_WORDS: dict[str, Callable[[JumanjiState], jax.Array]] = {
  "Sudoku-v0": _sudoku_words,
  "Sudoku-very-easy-v0": _sudoku_words,
  "Knapsack-v1": _knapsack_words,
  "TSP-v1": _tsp_words,
  "RubiksCube-v0": _rubiks_cube_words,
  "RubiksCube-partly-scrambled-v0": _rubiks_cube_words,
  "SlidingTilePuzzle-v0": _sliding_tile_words,
  "Minesweeper-v0": _minesweeper_words,
  "Game2048-v1": _game_2048_words,
}


def key_contents(env_id: str | None) -> str:
  """What the transposition key of `env_id` holds: its `JUMANJI_KEY_CONTENTS` entry,
  or `EXACT_KEY_CONTENTS` for an env without a written key (or None: an env object)."""
  return JUMANJI_KEY_CONTENTS.get(env_id or "", EXACT_KEY_CONTENTS)


def _import_jumanji():
  """The jumanji module, or ValueError saying how to install it."""
  try:
    import jumanji
  except ImportError as error:
    raise ValueError(
      f"jumanji environments need jumanji, which is not installed: {INSTALL_HINT}"
    ) from error
  return jumanji


def _action_sizes(action_spec) -> tuple[int, ...] | None:
  """`num_values` of a `DiscreteArray` `(n,)` or `MultiDiscreteArray` `(n1, n2, ...)`
  spec, or None for any other (continuous or bounded) spec."""
  num_values = getattr(action_spec, "num_values", None)
  if num_values is None:
    return None
  return tuple(int(n) for n in np.asarray(num_values).reshape(-1))


def _mask_kind(mask_shape: tuple[int, ...] | None, sizes: tuple[int, ...]) -> str | None:
  """How an observation's `action_mask` maps onto the flattened actions: `"none"` (no
  mask: all legal), `"joint"` (one entry per joint action, shaped `num_values`),
  `"per_agent"` (`[agents, n]`, one row per agent of a `MultiDiscreteArray` whose
  parts all have n values), or None when the shape fits neither."""
  if mask_shape is None:
    return "none"
  if mask_shape == sizes:
    return "joint"
  if len(sizes) > 1 and len(set(sizes)) == 1 and mask_shape == (len(sizes), sizes[0]):
    return "per_agent"
  return None


def _refusals(env, sizes: tuple[int, ...] | None, timestep) -> list[str]:
  """Why `env` cannot be a game here (empty when it can)."""
  reasons = []
  if sizes is None:
    reasons.append(
      f"its action spec is {type(env.action_spec).__name__}, not a DiscreteArray or "
      "MultiDiscreteArray (only discrete actions can be searched)"
    )
  elif math.prod(sizes) > MAX_ACTIONS:
    count = math.prod(sizes)
    reasons.append(
      f"its action space {list(sizes)} flattens to {count:,} joint actions, more than "
      f"MAX_ACTIONS = {MAX_ACTIONS:,} (every node stores one prior and one edge per action)"
    )
  shapes = {name: tuple(jnp.shape(getattr(timestep, name))) for name in ("reward", "discount")}
  if any(shapes.values()):
    reasons.append(
      f"its reward has shape {shapes['reward']} and its discount {shapes['discount']}, not "
      "scalars: a multi-agent env (one per agent); only single-agent envs are searched"
    )
  mask = getattr(timestep.observation, "action_mask", None)
  if sizes is not None and mask is not None and _mask_kind(mask.shape, sizes) is None:
    reasons.append(
      f"its action_mask has shape {tuple(mask.shape)}, which maps onto neither the "
      f"joint actions {list(sizes)} nor one row per agent"
    )
  return reasons


def _flat_observation(observation) -> jax.Array:
  """float32 `[O]`: every leaf of a jumanji observation, flattened and concatenated."""
  leaves = jax.tree_util.tree_leaves(observation)
  if not leaves:
    return jnp.zeros((0,), jnp.float32)
  return jnp.concatenate([jnp.ravel(jnp.asarray(leaf)).astype(jnp.float32) for leaf in leaves])


def _knapsack_entities(env, observation) -> jax.Array:
  """float32 `[items, 6]`, one row per item (its action): weight, value, packed,
  legal, the log of value per weight, and the budget left (the same in every row)."""
  weights, values = observation.weights, observation.values
  left = env.total_budget - jnp.sum(jnp.where(observation.packed_items, weights, 0.0))
  # Weights and values are drawn in (0, 1); the floor keeps the log finite.
  ratio = jnp.log(jnp.maximum(values, 1e-3)) - jnp.log(jnp.maximum(weights, 1e-3))
  columns = (weights, values, observation.packed_items, observation.action_mask, ratio)
  return jnp.stack([*columns, jnp.broadcast_to(left, weights.shape)], axis=-1).astype(jnp.float32)


def _tsp_entities(env, observation) -> jax.Array:
  """float32 `[cities, 8]`, one row per city (its action): x, y, visited, current,
  start, distance to the current city and to the start (0 before the first city is
  chosen), legal."""
  del env
  points = observation.coordinates
  count = points.shape[0]
  cities = jnp.arange(count)
  current = (cities == observation.position) & (observation.position >= 0)
  start = (cities == observation.trajectory[0]) & (observation.trajectory[0] >= 0)

  def distance_to(mask):
    anchor = jnp.sum(jnp.where(mask[:, None], points, 0.0), axis=0)
    return jnp.where(jnp.any(mask), jnp.linalg.norm(points - anchor, axis=-1), 0.0)

  columns = [points[:, 0], points[:, 1], ~observation.action_mask, current, start]
  columns += [distance_to(current), distance_to(start), observation.action_mask]
  return jnp.stack(columns, axis=-1).astype(jnp.float32)


# Observations with one row of features per action (an item, a city), for a network
# that scores every action from its own row (`networks.EntityPolicyValueNet`); the
# other envs' observations are their leaves flattened into one vector.
_ENTITY_OBSERVATIONS: dict[str, Callable[[Any, Any], jax.Array]] = {
  "Knapsack-v1": _knapsack_entities,
  "TSP-v1": _tsp_entities,
}


def _select(pred, on_true, on_false):
  """Picks `on_true` or `on_false` leaf by leaf (both pytrees of one structure)."""
  return jax.tree.map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)


class JumanjiEnv:
  """A jumanji environment with the pgx protocol of `mcgs_jax.games.Game`.

  Attributes:
    env: the jumanji environment.
    env_id: its registered id, which selects the written key of
      `JUMANJI_KEY_CONTENTS`, or None (the exact key).
    action_sizes: `num_values` of its action spec, `(n,)` or `(n1, n2, ...)`.
    num_actions: `A`, their product.
  """

  def __init__(self, env, env_id: str | None = None):
    """Wraps `env`; ValueError naming every reason when it cannot be searched.

    Args:
      env: a jumanji environment (`reset`, `step`, `action_spec`).
      env_id: the id `jumanji.make` built `env` from. It selects the written key,
        which is right only for the registered configuration: pass None for an env
        built with other arguments (it then gets the exact key).
    """
    self.env = env
    self.env_id = env_id
    sizes = _action_sizes(env.action_spec)
    _, timestep = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
    reasons = _refusals(env, sizes, timestep)
    if reasons:
      raise ValueError(f"jumanji env {self._name()} is not supported: " + "; ".join(reasons))
    assert sizes is not None
    self.action_sizes = sizes
    self.num_actions = math.prod(sizes)
    self._multi_discrete = np.ndim(np.asarray(env.action_spec.num_values)) > 0
    self._action_dtype = getattr(env.action_spec, "dtype", jnp.int32)
    mask = getattr(timestep.observation, "action_mask", None)
    self._mask_kind = _mask_kind(None if mask is None else tuple(mask.shape), sizes)
    self._key_words = _KEY_WORDS.get(env_id or "", exact_words)

  def _name(self) -> str:
    return repr(self.env_id) if self.env_id else type(self.env).__name__

  @property
  def id(self) -> str:
    """`"jumanji:<env id>"` (the class name for an env without an id)."""
    return f"jumanji:{self.env_id or type(self.env).__name__}"

  @property
  def num_players(self) -> int:
    return 1

  @property
  def max_game_length(self) -> int | None:
    """The most steps an episode takes: the env's `time_limit` where it has one, else
    the bound of `_EPISODE_BOUNDS` (Sudoku's cells, Knapsack's items, TSP's cities),
    else None (the rollout evaluator's cap; self-play needs it)."""
    time_limit = getattr(self.env, "time_limit", None)
    if isinstance(time_limit, int):
      return time_limit
    bound = _EPISODE_BOUNDS.get(self.env_id or "")
    return None if bound is None else bound(self.env)

  @property
  def value_bounds(self) -> tuple[float, float] | None:
    """The lowest and highest return of an episode (`VALUE_BOUNDS`), or None where
    it has no known bound; `make_game` gives it to the `Game`."""
    return VALUE_BOUNDS.get(self.env_id or "")

  @property
  def key_contents(self) -> str:
    """What `transposition_words` holds (`key_contents(env_id)`)."""
    return key_contents(self.env_id)

  def unflatten_action(self, action) -> jax.Array:
    """jumanji's action for a flat index (int32 []): the index itself, or the
    `[len(num_values)]` multi-index (row-major)."""
    action = jnp.asarray(action, jnp.int32)
    if not self._multi_discrete:
      return action.astype(self._action_dtype)
    parts = jnp.unravel_index(action, self.action_sizes)
    return jnp.stack(parts).astype(self._action_dtype)

  def legal_actions(self, observation) -> jax.Array:
    """bool `[A]`: the flattened legal actions of a jumanji observation."""
    if self._mask_kind == "none":
      return jnp.ones((self.num_actions,), jnp.bool_)
    mask = jnp.asarray(observation.action_mask, jnp.bool_)
    if self._mask_kind == "joint":
      return mask.reshape(-1)
    joint = jnp.ones(self.action_sizes, jnp.bool_)
    for agent in range(len(self.action_sizes)):
      shape = [1] * len(self.action_sizes)
      shape[agent] = self.action_sizes[agent]
      joint = joint & mask[agent].reshape(shape)
    return joint.reshape(-1)

  @property
  def entity_observation(self) -> bool:
    """Whether `observation` holds one row of features per action (`[A, F]`:
    Knapsack's items, TSP's cities) rather than one flat vector."""
    return (self.env_id or "") in _ENTITY_OBSERVATIONS

  def _observe(self, observation) -> jax.Array:
    """The network's input of a jumanji observation (see `JumanjiState`)."""
    entities = _ENTITY_OBSERVATIONS.get(self.env_id or "")
    return _flat_observation(observation) if entities is None else entities(self.env, observation)

  def _state(self, env_state, timestep) -> JumanjiState:
    """The `JumanjiState` of jumanji's state and the timestep that reached it."""
    discount = jnp.asarray(timestep.discount, jnp.float32)
    last = timestep.last()
    return JumanjiState(
      env_state=env_state,
      observation=self._observe(timestep.observation),
      legal_action_mask=self.legal_actions(timestep.observation),
      terminated=last & (discount == 0),
      truncated=last & (discount != 0),
      rewards=jnp.reshape(jnp.asarray(timestep.reward, jnp.float32), (1,)),
      discount=discount,
      current_player=jnp.int32(0),
    )

  def init(self, key: chex.PRNGKey) -> JumanjiState:
    """`env.reset(key)`: the key draws the instance (puzzle, items, cities, scramble)."""
    return self._state(*self.env.reset(key))

  def step(self, state: JumanjiState, action) -> JumanjiState:
    """Plays the flat `action` (int32 []); a finished state is returned unchanged
    with reward 0. Reads no observation of `state`."""
    env_state, timestep = self.env.step(state.env_state, self.unflatten_action(action))
    moved = self._state(env_state, timestep)
    unchanged = state.replace(rewards=jnp.zeros_like(state.rewards))
    return _select(state.terminated | state.truncated, unchanged, moved)

  def transposition_words(self, state: JumanjiState) -> jax.Array:
    """uint32 `[W]`: the env's key (`key_contents`), then terminated and truncated."""
    return jnp.concatenate([self._key_words(state), _words(state.terminated, state.truncated)])


def make_jumanji_env(env_id: str) -> JumanjiEnv:
  """`JumanjiEnv(jumanji.make(env_id), env_id)`, for `make_game("jumanji:<env id>")`.

  Raises:
    ValueError: when jumanji is not installed, `env_id` is not registered (naming
      the closest registered ids), or the env cannot be searched (see `JumanjiEnv`).
  """
  jumanji = _import_jumanji()
  registered = sorted(jumanji.registered_environments())
  if not env_id:
    raise ValueError(f"name a jumanji env: 'jumanji:<env id>', one of {', '.join(registered)}")
  if env_id not in registered:
    close = difflib.get_close_matches(env_id, registered, n=3, cutoff=0.5)
    hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
    raise ValueError(
      f"unknown jumanji env {env_id!r}{hint}; write 'jumanji:<env id>' with a registered "
      f"id: {', '.join(registered)}"
    )
  return JumanjiEnv(jumanji.make(env_id), env_id)
