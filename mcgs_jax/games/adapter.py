"""Turns a game environment and an evaluator into the functions a search calls.

`make_game(spec)` returns a `Game` whose `root` and `recurrent_fn` follow mctx's
(MuZero-style) conventions for two-player zero-sum games, so they can be handed to
`mctx.muzero_policy` as well as to `mcgs_jax`'s policies. A node's embedding is the
batched environment state (a pytree of `[B, ...]` arrays), by default without its
`observation` (`Game.store_observation`): the graph keeps one embedding per node, and
the observation is what the evaluator reads of a *new* state, which `step` recomputes
(in chess, pgx's observation is most of a state's bytes). In chess, shogi and go, the
legal-action masks are stored as bits and the boards in narrower integers
(`Game.storage`, `mcgs_jax.games.storage`), rebuilt bit for bit before `step`.

Conventions of `recurrent_fn(params, rng_key, action, state)`, with
`mover = state.current_player` and `next_state = step(state, action)`:
  * `reward` `[B]`: `next_state.rewards[mover]`, the reward of the move for the
    player who made it.
  * `discount` `[B]`: `0` when `next_state` is over (terminated or truncated), else
    `-1` when the player to move changes and `+1` when the mover moves again, times
    `next_state.discount` where states have one (jumanji's discount of the step).
  * `prior_logits` `[B, A]`: the evaluator's logits at `next_state`, shifted so the
    largest is 0, with every illegal action (`Game.invalid_actions`: every action
    once the game is over) set to `finfo(float32).min` (finite: never -inf, never
    NaN, even when no action is legal).
  * `value` `[B]`: the evaluator's value of `next_state` for its player to move; 0
    when `next_state` is over.
Stepping a finished state is a no-op with zero reward, so a search that walks below
a terminal node sees reward 0, discount 0 and value 0 there.

Supported specs of `make_game`:
  * a pgx env id with a key in `mcgs_jax.games.keys` (`keys.SUPPORTED_ENV_IDS`:
    `"tic_tac_toe"`, `"connect_four"`, `"othello"`, `"hex"`, `"go_9x9"`, `"chess"`,
    ...). Other pgx ids raise `ValueError` rather than fall back to a generic key:
    pgx states carry step counters and history that a bit-for-bit key would split
    on (no transpositions found) and that a hand-picked partial key could wrongly
    merge. Build a `Game` directly with your own `hash_fn` for them.
  * `"nim"` or `"nim:3,4,5"`: Nim with the given heaps (`mcgs_jax.games.nim`).
  * `"dag"` or `"dag:actions=3,depth=6,width=5,seed=0"`: the layered DAG game
    (`mcgs_jax.games.dag`); keys are `actions` (or `num_actions`), `depth`, `width`,
    `seed`, `illegal_fraction`.
  * `"jumanji:<env id>"`: a single-agent jumanji environment, e.g.
    `"jumanji:Sudoku-v0"` (`mcgs_jax.games.jumanji_env`: actions flattened, keys per
    env in `JUMANJI_KEY_CONTENTS`, the exact key for the others).
  * an env object: one with a `transposition_words(state) -> uint32 [W]` method (Nim,
    DAG, `jumanji_env.JumanjiEnv` and look-alikes) or a pgx env whose `id` is
    supported as above.
"""

import dataclasses
import difflib
import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from mcgs_jax._src import hashing
from mcgs_jax._src.logits import mask_invalid_actions
from mcgs_jax._src.types import RecurrentFnOutput, RootFnOutput
from mcgs_jax.games import evaluators
from mcgs_jax.games.keys import (
  DEFAULT_HISTORY,
  DEFAULT_REPETITION_BOUND,
  SUPPORTED_ENV_IDS,
  check_history,
)
from mcgs_jax.games.storage import StateStorage, storage_for

# Every name `make_game` accepts (Nim and the DAG game take arguments after a colon,
# jumanji an env id).
SUPPORTED_GAMES = ("nim", "dag", "2048", "jumanji") + tuple(SUPPORTED_ENV_IDS)

_DAG_ARGUMENT_NAMES = {
  "actions": "num_actions",
  "num_actions": "num_actions",
  "depth": "depth",
  "width": "width",
  "seed": "seed",
  "illegal_fraction": "illegal_fraction",
}


@functools.lru_cache(maxsize=16)
def _jitted_env_step(env) -> Callable:
  """`jax.jit(env.step)`, compiled once per env (pgx's steps are slow run eagerly)."""
  return jax.jit(env.step)


@dataclasses.dataclass(frozen=True)
class Game:
  """A game environment bound to an evaluator and a transposition key.

  Every field is hashable (the env and the functions hash by identity), so a `Game`
  or its bound methods can be closed over or passed as static arguments to
  `jax.jit`.

  Attributes:
    env: a pgx env or an object with the same protocol (`init(key)`,
      `step(state, action)`, `num_actions`; states with `current_player`,
      `rewards [num_players]`, `terminated`, `legal_action_mask [A]`, optionally
      `truncated`, `observation` and `discount`, the env's own discount of the
      step that reached the state, which `recurrent_fn` multiplies in).
    evaluator: `evaluate(params, rng_key, state) -> (logits [B, A], value [B])`, see
      `mcgs_jax.evaluators`.
    hash_fn: state batch -> uint32 `[B, L]` transposition keys.
    num_actions: `A`.
    observation_spec: `(shape, dtype)` of one state's `observation`, or None when
      the env's states have none.
    store_observation: keep the observation in the embeddings that `root` and
      `recurrent_fn` return (so in every node of the graph). False (the default
      of `make_game`): they hold a `[B, 0]` placeholder instead, and `recurrent_fn`
      and `step` put a zero observation back before stepping. That is exact for
      envs whose `step` computes the new state's observation without reading the
      old one: pgx, Nim and the DAG game.
    storage: the smaller form in which nodes store some leaves of the state
      (`mcgs_jax.games.storage.StateStorage`: bit-packed legal-action masks,
      narrower boards), or None to store them as the env returns them.
    value_bounds: the lowest and highest value of a state for its player to move
      (`GraphOptions.value_bounds`, read by the solver): `(-1, 1)` for two-player
      outcomes, the env's own `value_bounds` where it has one (jumanji's Sudoku and
      Rubik's cube: `(0, 1)`; None for returns with no known bound). `search_game`,
      the arena and self-play pass it to the search.
  """

  env: Any
  evaluator: Callable
  hash_fn: Callable
  num_actions: int
  observation_spec: tuple | None = None
  store_observation: bool = True
  storage: StateStorage | None = None
  value_bounds: tuple[float, float] | None = (-1.0, 1.0)

  def _dropped_observation(self) -> tuple | None:
    """`(shape, dtype)` of the observation that nodes do not store, or None."""
    spec = self.observation_spec
    if self.store_observation or spec is None or spec[0] == (0,):
      return None
    return spec

  def stored(self, state):
    """`state` (batched) as a node stores it: its observation replaced by a `[..., 0]`
    placeholder unless `store_observation`, and the leaves of `storage` in their
    smaller form (see the class doc). A stored state is returned as it is."""
    if self.storage is not None:
      state = self.storage.store(state)
    spec = self._dropped_observation()
    observation = getattr(state, "observation", None)
    if spec is None or observation is None or observation.shape[-1:] == (0,):
      return state
    batch_shape = observation.shape[: observation.ndim - len(spec[0])]
    return state.replace(observation=jnp.zeros(batch_shape + (0,), observation.dtype))

  def restored(self, state):
    """A state `step` accepts, from a stored one: a zero observation where the
    stored state has the placeholder, and the leaves of `storage` as the env holds
    them, bit for bit (full states are returned as they are)."""
    if self.storage is not None:
      state = self.storage.restore(state)
    spec = self._dropped_observation()
    observation = getattr(state, "observation", None)
    if spec is None or observation is None or observation.shape[-1:] != (0,):
      return state
    shape, dtype = spec
    return state.replace(observation=jnp.zeros(observation.shape[:-1] + shape, dtype))

  def init(self, rng_key, batch_size: int):
    """`batch_size` initial states, one key each (pgx draws the first player)."""
    return jax.vmap(self.env.init)(jax.random.split(rng_key, batch_size))

  def step(self, state, action):
    """Plays `action` (`[B]` int) in every game of the batch; `state` may be a stored
    one (a node's embedding). Returns full states."""
    return jax.vmap(self.env.step)(self.restored(state), jnp.asarray(action, jnp.int32))

  def invalid_actions(self, state):
    """`[B, A]` bool, True for the actions that are illegal in `state` (full or
    stored), and every action of a finished game (terminated or truncated: pgx
    marks every action legal there). A search from a finished state thus has a
    terminal root: no playout, all-zero `action_weights`, action 0."""
    finished = evaluators.is_finished(state)
    legal = (
      state.legal_action_mask
      if self.storage is None
      else self.storage.restore(state).legal_action_mask
    )
    return ~legal | finished[..., None]

  def _evaluate(self, params, rng_key, state):
    """The evaluator at `state`, illegal actions masked, value 0 for finished games."""
    logits, value = self.evaluator(params, rng_key, state)
    prior_logits = mask_invalid_actions(
      jnp.asarray(logits, jnp.float32), self.invalid_actions(state)
    )
    value = jnp.where(evaluators.is_finished(state), 0.0, jnp.asarray(value, jnp.float32))
    return prior_logits, value

  def root(self, params, rng_key, state) -> RootFnOutput:
    """The search's root: evaluation of `state` (a batch of full states); the
    embedding is `stored(state)`."""
    prior_logits, value = self._evaluate(params, rng_key, state)
    return RootFnOutput(prior_logits=prior_logits, value=value, embedding=self.stored(state))

  def recurrent_fn(self, params, rng_key, action, state):
    """One move of every game; see the module docstring for the conventions.

    Args:
      params: the evaluator's parameters.
      rng_key: one key for the whole batch (the evaluator splits it per game).
      action: `[B]` int32.
      state: the batch of states (the parent nodes' embeddings, stored or full).

    Returns:
      `(RecurrentFnOutput, stored(next_state))`; the evaluator saw the full state.
    """
    mover = state.current_player
    next_state = self.step(state, action)
    reward = evaluators.rewards_of(next_state, mover)
    turn_sign = jnp.where(next_state.current_player == mover, 1.0, -1.0)
    env_discount = getattr(next_state, "discount", None)  # jumanji's, where states carry it
    if env_discount is not None:
      turn_sign = turn_sign * env_discount
    discount = jnp.where(evaluators.is_finished(next_state), 0.0, turn_sign)
    prior_logits, value = self._evaluate(params, rng_key, next_state)
    output = RecurrentFnOutput(
      reward=reward, discount=discount.astype(jnp.float32), prior_logits=prior_logits, value=value
    )
    return output, self.stored(next_state)

  def play(self, actions: Sequence[int], rng_key: jax.Array | None = None):
    """The unbatched state reached by playing `actions` from `env.init(rng_key)`.

    `rng_key` defaults to `jax.random.PRNGKey(0)`; with pgx it decides which player
    id moves first. Raises `ValueError` naming the move and its index when a move is
    out of range, illegal, or played after the game ended.
    """
    if rng_key is None:
      rng_key = jax.random.PRNGKey(0)
    state = self.env.init(rng_key)
    step = _jitted_env_step(self.env)
    for index, action in enumerate(actions):
      if not 0 <= action < self.num_actions:
        raise ValueError(f"move {index} ({action}) is out of range [0, {self.num_actions})")
      if bool(state.terminated):
        raise ValueError(f"move {index} ({action}) is played after the game ended")
      if not bool(state.legal_action_mask[action]):
        raise ValueError(f"move {index} ({action}) is illegal")
      state = step(state, jnp.int32(action))
    return state


def _words_hash_fn(transposition_words: Callable, lanes: int) -> Callable:
  """Batched hash from an unbatched `transposition_words(state) -> uint32 [W]`."""

  def hash_fn(state):
    return hashing.hash_words(jax.vmap(transposition_words)(state), lanes=lanes)

  return hash_fn


def _pgx_hash_fn(
  env_id: str,
  lanes: int,
  history: str = DEFAULT_HISTORY,
  repetition_bound: int = DEFAULT_REPETITION_BOUND,
) -> Callable:
  """The key `mcgs_jax.games.keys` defines for a pgx game, keeping history as
  `history` says (`keys.HISTORY_MODES`); ValueError if none."""
  from mcgs_jax.games import keys

  return keys.transposition_key_fn(
    env_id, lanes=lanes, history=history, repetition_bound=repetition_bound
  )


def hash_fn_for_env(
  env,
  lanes: int,
  history: str = DEFAULT_HISTORY,
  repetition_bound: int = DEFAULT_REPETITION_BOUND,
) -> Callable:
  """The transposition key of an env object (see `make_game`); `history` and
  `repetition_bound` apply to pgx games (Nim's and the DAG game's keys read no
  history)."""
  if hasattr(env, "transposition_words"):
    return _words_hash_fn(env.transposition_words, lanes)
  env_id = getattr(env, "id", None)
  if isinstance(env_id, str):
    return _pgx_hash_fn(env_id, lanes, history, repetition_bound)
  raise ValueError(
    f"cannot derive a transposition key for {env!r}: it has neither a "
    "transposition_words method nor a pgx id; build a Game with your own hash_fn"
  )


def _parse_dag_arguments(text: str) -> dict:
  """`"actions=3,depth=6"` -> `{"num_actions": 3, "depth": 6}` (ints or floats)."""
  arguments = {}
  for item in filter(None, text.split(",")):
    name, separator, value = item.partition("=")
    name = name.strip()
    if not separator or name not in _DAG_ARGUMENT_NAMES:
      raise ValueError(
        f"bad dag argument {item!r}; expected name=value with name in {sorted(_DAG_ARGUMENT_NAMES)}"
      )
    try:
      number = float(value) if name == "illegal_fraction" else int(value)
    except ValueError as error:
      raise ValueError(f"bad value in dag argument {item!r}") from error
    arguments[_DAG_ARGUMENT_NAMES[name]] = number
  return arguments


def _env_from_spec(spec: str):
  """The env named by a `make_game` spec string."""
  name, colon, arguments = spec.partition(":")
  if name == "jumanji":
    from mcgs_jax.games import jumanji_env

    return jumanji_env.make_jumanji_env(arguments)
  if colon and not arguments:
    raise ValueError(f"game {spec!r} names no arguments after ':'; write {name!r} for the defaults")
  if name == "nim":
    from mcgs_jax.games import nim

    return nim.Nim(nim.parse_heaps(arguments)) if arguments else nim.Nim()
  if name == "dag":
    from mcgs_jax.games import dag

    return dag.DagGame(**_parse_dag_arguments(arguments))
  if arguments or name not in SUPPORTED_ENV_IDS:
    guess = difflib.get_close_matches(name, SUPPORTED_GAMES, n=1)
    hint = f" (did you mean {guess[0]!r}?)" if guess else ""
    raise ValueError(
      f"unknown game {spec!r}{hint}: expected 'nim[:heaps]', "
      f"'dag[:name=value,...]', 'jumanji:<env id>' or one of {', '.join(SUPPORTED_ENV_IDS)}"
    )
  import pgx

  return pgx.make(name)


def make_game(
  game,
  evaluator: Callable | None = None,
  *,
  lanes: int = hashing.DEFAULT_LANES,
  store_observation: bool = False,
  compact_state: bool = True,
  history: str = DEFAULT_HISTORY,
  repetition_bound: int = DEFAULT_REPETITION_BOUND,
) -> Any:
  """Builds a `Game` from a spec string or an env object.

  `"2048"` (or `"2048:SIZE"`) is a game with chance: it returns the
  `mcgs_jax.games.play2048.Stochastic2048` that `stochastic_muzero_policy` takes
  (its two recurrent functions, both keys, and the halves of a step), with an
  `Evaluator2048` as `evaluator`.

  Args:
    game: a spec string (`"connect_four"`, `"tic_tac_toe"`, `"nim:3,4,5"`,
      `"dag:actions=3,depth=6,width=5,seed=0"`, `"jumanji:Sudoku-v0"`, ...; see the
      module docstring) or an env object.
    evaluator: `evaluate(params, rng_key, state) -> (logits, value)`; defaults to
      `evaluators.uniform_evaluator()`.
    lanes: uint32 lanes of the transposition key (2 = 64 bits).
    store_observation: keep each node's observation in the graph (`Game`). False
      stores a placeholder and recomputes nothing extra: `step` computes a new
      state's observation anyway. Bytes per node (`mcgs-jax bench --memory`):
      chess 46,266 -> 15,802 for the state, connect four 285 -> 201.
    compact_state: store the leaves of `mcgs_jax.games.storage.STORED_AS` (chess,
      shogi, go) in their smaller form, rebuilt bit for bit before every step;
      False stores them as pgx returns them. Bytes per stored state (no
      observation; `storage.state_bytes`): chess 15,802 -> 5,898, shogi 4,824 ->
      689, go_19x19 19,181 -> 9,479.
    history: how much history the transposition key of a pgx game keeps
      (`mcgs_jax.games.keys.HISTORY_MODES`): `"bounded"` (default; KataGo's rule:
      history only while a cycle of at most `repetition_bound` plies through the
      last move is possible), `"exact"` (all a rule may read) or `"position"`
      (CrazyAra's rule: the position alone until a position repeats). See
      docs/games.md, "Keys per game".
    repetition_bound: R, the plies within which `"bounded"` and `"position"` keep
      every difference that history, clocks and step limits make (default 11).

  Raises:
    ValueError: for an unknown or malformed spec, a game without a transposition
      key, an unknown `history` or a `repetition_bound` outside
      `[1, keys.MAX_REPETITION_BOUND]`.
  """
  check_history(history, repetition_bound)
  if isinstance(game, str) and game.partition(":")[0] == "2048":
    from mcgs_jax.games import play2048

    return play2048.make_from_spec(game, evaluator)  # type: ignore[arg-type]
  env = _env_from_spec(game) if isinstance(game, str) else game
  hash_fn = hash_fn_for_env(env, lanes, history, repetition_bound)
  if evaluator is None:
    evaluator = evaluators.uniform_evaluator()
  # The shapes of one state: pgx's `env.num_actions` would run `init` eagerly, which is
  # slow for shogi.
  state = jax.eval_shape(env.init, jax.random.PRNGKey(0))
  return Game(
    env=env,
    evaluator=evaluator,
    hash_fn=hash_fn,
    num_actions=int(state.legal_action_mask.shape[-1]),
    observation_spec=_observation_spec(state),
    store_observation=store_observation,
    storage=storage_for(getattr(env, "id", None), state) if compact_state else None,
    value_bounds=getattr(env, "value_bounds", (-1.0, 1.0)),
  )


def _observation_spec(state) -> tuple | None:
  """`(shape, dtype)` of the observation of one state (or its shapes), None if it has
  none."""
  observation = getattr(state, "observation", None)
  if observation is None:
    return None
  return tuple(observation.shape), observation.dtype


def search_game(
  policy: Callable,
  game: Game,
  state: Any,
  num_simulations: int,
  key: jax.Array,
  *,
  root_key: jax.Array | None = None,
  params: Any = None,
  also_invalid: jax.Array | None = None,
  **options: Any,
) -> Any:
  """`policy` (`mcgs_jax.muzero_policy`, `gumbel_muzero_policy` or `uct_policy`) on
  the batched states `state` `[B, ...]` of `game` (from `make_game`); returns the
  policy's output.

  The root is `game.root` evaluated with `root_key` (default: `key`, the search's
  key); the invalid actions `[B, A]` are the game's, and also those of `also_invalid`
  (bool `[B, A]`) when given; the game's state keys are the transposition keys
  (`hash_fn`) and its `value_bounds` the solver's bounds. `options` are the policy's
  other keywords (they win over the game's). Call it inside the function that
  `jax.jit` compiles, so that the whole search is one program.
  """
  root = game.root(params, key if root_key is None else root_key, state)
  invalid_actions = game.invalid_actions(state)
  if also_invalid is not None:
    invalid_actions = invalid_actions | also_invalid
  options = {"hash_fn": game.hash_fn, "value_bounds": game.value_bounds, **options}
  return policy(
    params,
    key,
    root,
    game.recurrent_fn,
    num_simulations,
    invalid_actions=invalid_actions,
    **options,
  )
