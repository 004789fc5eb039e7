"""Arena: matches between two search agents, every game of a match in one batch.

`play_match(game, agent_a, agent_b, num_games=...)` plays `num_games` games of a
two-player game between two `Agent`s and returns a `MatchResult` from agent A's
point of view: wins, draws, losses, score, an Elo difference with a 95% interval,
game lengths and what each agent's searches used (nodes, transposition hits).

How a match is played:
  * All games advance together, one ply at a time over the whole batch; a Python
    loop calls the jitted pieces (each agent's search, then the move) until every
    game is over (with progress on stderr when `progress=True`). Each piece
    compiles once per match configuration (the ply number is an argument, not a
    constant).
  * At every ply both agents search every game and each game keeps the action of
    the agent whose turn it is there. This costs two searches per ply, but it is
    right for any turn order (a player may move twice in a row). Each agent's
    search is timed on its own (`search_seconds_per_ply` in the result), and an
    agent that keeps its graph (`reuse`) reroots it by every move played, its own
    and the opponent's, inside its timed search.
  * An agent's engine is this library (`"mcgs"`) or DeepMind's mctx (`"mctx"`,
    `mctx.muzero_policy` / `mctx.gumbel_muzero_policy` on the same evaluator), so
    "this library against mctx" is one match; `equal_time=True` first chooses B's
    simulations so that both take the same time per move.
  * Colours alternate: agent A moves first in games `0 .. N/2 - 1` and second in
    games `N/2 .. N - 1` (`MatchResult.a_first`). Game `i` and game `i + N/2` start
    from the same initial state and, with `opening_moves > 0`, play the same
    uniformly random opening of `opening_moves` plies before the agents take over,
    so every opening is played once with each colour assignment.
  * pgx draws the first player id at `init`; A's player id in each game is the
    player to move at the start when A moves first and the other one otherwise.
    A game's outcome is the sum of the rewards A's player collects in it (+1 win,
    0 draw, -1 loss for the pgx board games); its sign counts as a win, a draw or
    a loss.
  * Agents play for strength, not exploration: no Dirichlet noise and temperature
    0 for `muzero` (the most visited action), the most visited action for `uct`,
    and the Sequential-Halving winner for `gumbel`.
  * With several devices (`len(jax.devices()) > 1`) and `num_games` a multiple of
    their number, the batch of games is split across all of them with a
    `jax.sharding.Mesh` over a `"games"` axis; on one device the same code runs
    unsharded. Results do not depend on the split. With `jax.distributed`
    initialised on several hosts, `jax.devices()` lists every host's devices and
    the same call spreads the games over all of them.
"""

import dataclasses
import functools
import math
import sys
import time
from collections.abc import Callable
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np

import mcgs_jax as mg
from mcgs_jax._src.per_game import where_per_game
from mcgs_jax.apps import memory, registry
from mcgs_jax.apps.cli_args import progress_bar
from mcgs_jax.apps.memory import estimated_search_bytes
from mcgs_jax.games import adapter, evaluators

EVALUATORS = registry.EVALUATOR_NAMES
MESH_AXIS = "games"
Z_95 = 1.959963984540054  # two-sided 95% quantile of the standard normal
_MAX_PLIES = 100_000  # safety cap on a match's length, far above any supported game


ENGINES = ("mcgs", "mctx")
# What mctx's search offers of the arena's policies (it has no UCT).
MCTX_POLICIES = ("muzero", "gumbel")


@dataclasses.dataclass(frozen=True)
class Agent:
  """A search agent: an engine, a policy, a leaf evaluator and the search's settings.

  The defaults are this library's default agent: a graph search (MCGS) that keeps its
  graph between moves (`reuse`) and proves exact values (`solver`), UCT with
  random-rollout leaves, 512 simulations.
  `mcgs-jax arena` plays `muzero` with a trained network (see `arena_command`).

  Attributes:
    policy: `"muzero"`, `"gumbel"` or `"uct"`.
    evaluator: `"uniform"` (uniform prior, value 0), `"rollout"` (random
      playouts, `num_rollouts` per leaf) or `"network"` (`apply_fn` with the
      params passed to `play_match`).
    num_simulations: simulations per move (new playouts, whatever a kept graph
      already holds).
    engine: `"mcgs"` (this library) or `"mctx"` (DeepMind's `mctx.muzero_policy` or
      `mctx.gumbel_muzero_policy` on the same evaluator: a tree searched from
      scratch at every move; needs the `mctx` package).
    transpositions: search a graph (MCGS, True) or a tree (MCTS, False). Default:
      True for `mcgs`; `mctx` searches a tree.
    solver: prove exact values during the search (MCTS-solver; `mcgs` only).
      Default: True for `mcgs` (every game the arena plays has exact terminal
      values; measured on connect four at 64 simulations with the network: +72
      Elo at equal time per move, +120 at equal simulations; with UCT + rollouts at
      128: +52; `benchmarks/RESULTS.md`); `mctx` cannot.
    num_parallel: playouts per game per search step (virtual visits; `mcgs` only).
    num_rollouts: random playouts per evaluation with `evaluator="rollout"`.
    apply_fn: `apply_fn(params, observation) -> (logits, value)` for
      `evaluator="network"`.
    reuse: keep the graph between plies (`mcgs_jax.reroot` by the move played, the
      agent's own and the opponent's) and continue it at the next search. Default:
      True for `mcgs` (measured: about +250 Elo at equal simulations on connect
      four, `benchmarks/RESULTS.md`); `mctx` cannot.
    capacity: nodes per game of the graph; default `num_simulations + 1`, or
      `4 * num_simulations + 1` with `reuse` (what does not fit is counted in the
      graph's `capacity_overflows`, never corrupts it; `mcgs` only).
    name: a label for reports; `describe()` is used when empty.
  """

  policy: str = "uct"
  evaluator: str = "rollout"
  num_simulations: int = 512
  engine: str = "mcgs"
  transpositions: bool | None = None
  solver: bool | None = None
  num_parallel: int = 1
  num_rollouts: int = 1
  apply_fn: Callable | None = None
  reuse: bool | None = None
  capacity: int | None = None
  name: str = ""

  def __post_init__(self):
    registry.check_policy(self.policy)
    registry.check_evaluator(self.evaluator)
    if self.engine not in ENGINES:
      raise ValueError(f"unknown engine {self.engine!r}; expected one of {ENGINES}")
    if self.evaluator == "network" and self.apply_fn is None:
      raise ValueError("evaluator 'network' needs apply_fn")
    for field in ("num_simulations", "num_rollouts"):
      if int(getattr(self, field)) < 1:
        raise ValueError(f"{field} must be at least 1, got {getattr(self, field)}")
    if self.capacity is not None and int(self.capacity) < 2:
      raise ValueError(f"capacity must be at least 2, got {self.capacity}")
    mctx_engine = self.engine == "mctx"
    if mctx_engine:
      self._check_mctx()
    # Frozen: the engine's defaults are written once, here.
    if self.transpositions is None:
      object.__setattr__(self, "transpositions", not mctx_engine)
    if self.reuse is None:
      object.__setattr__(self, "reuse", not mctx_engine)
    if self.solver is None:
      object.__setattr__(self, "solver", not mctx_engine)
    self.graph_options()  # the search's own checks of the graph settings
    if self.num_simulations % self.num_parallel:
      raise ValueError(
        f"num_simulations ({self.num_simulations}) must be a multiple of "
        f"num_parallel ({self.num_parallel})"
      )

  def _check_mctx(self) -> None:
    """ValueError for what mctx's search cannot do."""
    if self.policy not in MCTX_POLICIES:
      raise ValueError(
        f"engine 'mctx' has policies {MCTX_POLICIES}, not {self.policy!r} (mctx has no UCT)"
      )
    unsupported = [
      name
      for name, value in (
        ("transpositions=True", self.transpositions),
        ("reuse=True", self.reuse),
        ("solver=True", self.solver),
        ("num_parallel > 1", self.num_parallel > 1),
        ("capacity", self.capacity is not None),
      )
      if value
    ]
    if unsupported:
      raise ValueError(
        f"engine 'mctx' searches a tree from scratch at every move: "
        f"{', '.join(unsupported)} is for engine 'mcgs'"
      )

  @property
  def search_capacity(self) -> int:
    """Nodes per game of the agent's graph (`capacity` or its default)."""
    if self.capacity is not None:
      return int(self.capacity)
    return 4 * self.num_simulations + 1 if self.reuse else self.num_simulations + 1

  def graph_options(self) -> mg.GraphOptions:
    """The graph settings of the agent's search (`mcgs` engine), checked by
    `GraphOptions` (ValueError or TypeError naming the field)."""
    return mg.GraphOptions(
      transpositions=cast(bool, self.transpositions),  # set by __post_init__
      solver=cast(bool, self.solver),  # set by __post_init__
      num_parallel=self.num_parallel,
      capacity=self.search_capacity,
    )

  def describe(self) -> str:
    """`name`, or e.g. `"muzero/rollout/64 graph solver reuse"` (`"mctx muzero/..."` for
    mctx's search)."""
    if self.name:
      return self.name
    text = (
      f"{self.policy}/{self.evaluator}/{self.num_simulations} "
      f"{'graph' if self.transpositions else 'tree'}"
    )
    if self.engine == "mctx":
      return f"mctx {self.policy}/{self.evaluator}/{self.num_simulations}"
    if self.solver:
      text += " solver"
    if self.reuse:
      text += " reuse"
    if self.num_parallel > 1:
      text += f" K={self.num_parallel}"
    return text


@dataclasses.dataclass(frozen=True)
class MatchResult:
  """The result of a match, from agent A's point of view.

  Attributes:
    wins, draws, losses: games A won, drew and lost (they sum to `games`).
    score: `(wins + draws / 2) / games`.
    elo: Elo difference of A over B implied by the score (`elo_from_score`).
    elo_ci95: `(low, high)`, a 95% interval for `elo` (`elo_interval`).
    score_ci95: `(low, high)`, the same interval on the score.
    games: number of games.
    mean_game_length: mean number of plies per game, openings included.
    agents: `{"a": stats, "b": stats}`; each `stats` dict has `name`, `searches`
      (searches whose move was played), `mean_nodes` and `mean_transposition_hits`
      (per search), `nodes_per_ply` (a list: the mean nodes of that agent's
      searches at each ply, `nan` where it did not move), `engine` and
      `num_simulations`.
    outcomes: `[games]` float, the rewards A collected in each game.
    a_first: `[games]` bool, A moved first.
    game_lengths: `[games]` int, plies played.
    openings: `[games, opening_moves]` int, the random opening of each game.
    seconds: wall-clock time of the match, compilation included.
    num_devices: devices the games were spread over.
    first_ply_seconds: wall-clock time of the first searched ply (the first after
      the openings), which includes compiling both searches when this
      configuration was not compiled before in the process.
    calibration: with `equal_time`, what `calibrate_simulations` measured; else
      None.
    timing: `{"a": times, "b": times}` (wall time, so not part of what the same
      seed reproduces); each `times` has `search_seconds_per_ply` (one search of
      the whole batch of games, its `reroot` included, averaged over the searched
      plies after the first; every ply both agents search every game) and
      `first_search_seconds` (the first searched ply, which compiles).
  """

  wins: int
  draws: int
  losses: int
  score: float
  elo: float
  elo_ci95: tuple[float, float]
  score_ci95: tuple[float, float]
  games: int
  mean_game_length: float
  agents: dict[str, dict[str, Any]]
  outcomes: np.ndarray
  a_first: np.ndarray
  game_lengths: np.ndarray
  openings: np.ndarray
  seconds: float
  num_devices: int
  first_ply_seconds: float = 0.0
  calibration: dict[str, Any] | None = None
  timing: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)

  def to_dict(self) -> dict[str, Any]:
    """A JSON-ready dict: arrays and tuples as lists, `nan` as None."""
    return {
      field.name: _json_ready(getattr(self, field.name)) for field in dataclasses.fields(self)
    }


def _json_ready(value):
  """`value` with arrays and tuples as lists and non-finite floats as None."""
  if isinstance(value, np.ndarray):
    value = value.tolist()
  if isinstance(value, dict):
    return {key: _json_ready(item) for key, item in value.items()}
  if isinstance(value, (list, tuple)):
    return [_json_ready(item) for item in value]
  if isinstance(value, float) and not math.isfinite(value):
    return None
  return value


# ---------------------------------------------------------------------------------
# Elo


def elo_from_score(score: float) -> float:
  """`-400 log10(1 / score - 1)`: the Elo difference whose expected score is
  `score` (0 at 0.5; infinite at 0 and 1, so callers clip)."""
  if score <= 0.0:
    return -math.inf
  if score >= 1.0:
    return math.inf
  return -400.0 * math.log10(1.0 / score - 1.0)


def elo_interval(
  points: np.ndarray,
) -> tuple[float, float, tuple[float, float], tuple[float, float]]:
  """Score, Elo and their 95% intervals from per-game points (1, 0.5 or 0).

  The interval is the normal approximation on the mean score, `score +- 1.96
  s / sqrt(N)` with `s` the sample standard deviation of the points plus one win
  and one loss (so that 16 wins of 16 do not give a zero-width interval), mapped
  through `elo_from_score`. Scores are clipped to `[0.5 / N, 1 - 0.5 / N]` before
  mapping, so a clean sweep gives a large finite Elo rather than infinity.

  Returns:
    `(score, elo, (elo_low, elo_high), (score_low, score_high))`.
  """
  points = np.asarray(points, np.float64)
  count = points.size
  if count == 0:
    raise ValueError("no games")
  score = float(points.mean())
  # One extra win and one extra loss in the spread only (as Agresti-Coull does for
  # proportions): a clean sweep or all draws still get an interval of nonzero width.
  spread = float(np.concatenate([points, [0.0, 1.0]]).std(ddof=1))
  half_width = Z_95 * spread / math.sqrt(count)
  low_clip, high_clip = 0.5 / count, 1.0 - 0.5 / count
  clip = lambda value: min(max(value, low_clip), high_clip)
  score_low = max(score - half_width, 0.0)
  score_high = min(score + half_width, 1.0)
  elo = elo_from_score(clip(score))
  elo_low, elo_high = elo_from_score(clip(score_low)), elo_from_score(clip(score_high))
  return score, elo, (elo_low, elo_high), (score_low, score_high)


# ---------------------------------------------------------------------------------
# Agents as jittable functions


def _game_from_spec(spec: str) -> adapter.Game:
  """`make_game(spec)`, built once per spec (`registry.game_from_spec`) so that
  repeated matches reuse compiled steps; ValueError for a game with chance (2048:
  `mcgs-jax play`)."""
  game = registry.game_from_spec(spec)
  if not isinstance(game, adapter.Game):
    raise ValueError(
      f"game {spec!r} has chance and one player: the arena plays two-player games "
      "(2048: mcgs-jax play)"
    )
  return game


def _agent_game(game: adapter.Game, agent: Agent) -> adapter.Game:
  """`game` with the agent's evaluator."""
  evaluator = registry.make_evaluator(
    agent.evaluator, game.env, num_rollouts=agent.num_rollouts, apply_fn=agent.apply_fn
  )
  return dataclasses.replace(game, evaluator=evaluator)


def _mctx_search_policy(game: adapter.Game, agent: Agent) -> Callable:
  """`policy(params, key, root, invalid) -> (action, nodes)` with mctx's own search,
  set to play (no root noise, most visited move for muzero)."""
  playing = registry.PLAYING_OPTIONS.get(agent.policy, {})
  search = registry.mctx_policy(agent.policy, game.recurrent_fn, **playing)

  def policy(params, key, root, invalid):
    out = search(params, key, root, agent.num_simulations, invalid)
    # mctx's tree: one node per simulation plus the root, visited or not.
    return out.action, jnp.sum(out.search_tree.node_visits > 0, axis=-1).astype(jnp.int32)

  return policy


def _make_search(game: adapter.Game, agent: Agent) -> Callable:
  """`search(params, key, state, graph, played) -> (action [B], nodes [B], hits [B],
  graph)`, not jitted.

  Finished games get an all-invalid root (a trivial search, action 0). With
  `agent.reuse`, `graph` is the agent's graph of the previous ply (or an all-empty
  graph); it is rerooted by `played` `[B]`, the move played since (rerooting an
  empty graph gives an empty graph), and the search continues it. `hits` counts
  this search's transposition hits only. Without reuse `graph` is None and returned
  as None.
  """
  game = _agent_game(game, agent)
  if agent.engine == "mctx":
    mctx_policy = _mctx_search_policy(game, agent)

    def search_mctx(params, key, state, graph, played):
      del graph, played
      root_key, search_key = jax.random.split(key)
      invalid = game.invalid_actions(state) | evaluators.is_finished(state)[:, None]
      root = game.root(params, root_key, state)
      action, nodes = mctx_policy(params, search_key, root, invalid)
      return action.astype(jnp.int32), nodes, jnp.zeros_like(nodes), None

    return search_mctx

  # No root noise, most visited move: play, not explore.
  policy = registry.playing_policy(
    agent.policy,
    hash_fn=game.hash_fn,
    transpositions=agent.transpositions,
    solver=agent.solver,
    num_parallel=agent.num_parallel,
    capacity=agent.search_capacity,
  )

  def search(params, key, state, graph, played):
    root_key, search_key = jax.random.split(key)
    finished = evaluators.is_finished(state)
    invalid = game.invalid_actions(state) | finished[:, None]
    root = game.root(params, root_key, state)
    earlier_hits = 0
    if graph is not None:
      graph = mg.reroot(graph, played)
      # A kept graph counts hits over its whole life; an emptied one starts at 0.
      earlier_hits = graph.transposition_hits
    out = policy(
      params,
      search_key,
      root,
      game.recurrent_fn,
      agent.num_simulations,
      invalid_actions=invalid,
      graph=graph,
    )
    searched = out.search_graph
    return (
      out.action,
      searched.num_nodes,
      searched.transposition_hits - earlier_hits,
      searched if agent.reuse else None,
    )

  return search


def _initial_graph(search: Callable, params, state, agent: Agent):
  """An all-empty graph of the shapes `search` produces (None without reuse)."""
  if not agent.reuse:
    return None
  played = jnp.zeros(state.current_player.shape, jnp.int32)
  shapes = jax.eval_shape(
    lambda p, s: search(p, jax.random.PRNGKey(0), s, None, played)[3], params, state
  )
  return mg.empty_like(shapes)


@functools.lru_cache(maxsize=32)
def _jitted_search(game: adapter.Game, agent: Agent) -> Callable:
  """`jax.jit(_make_search(game, agent))`, cached: a match and the calibration before
  it share compiled searches."""
  return jax.jit(_make_search(game, agent))


@dataclasses.dataclass(frozen=True)
class _MatchSteps:
  """The jitted pieces of a match (cached per configuration by `_match_steps`).

  `search_a` / `search_b`: `_make_search`'s function of each agent, jitted, so that
  each agent's search (its `reroot` included) is timed on its own. `opening(state,
  opening_actions, ply) -> (state, action)` plays the ply's opening move;
  `advance(state, a_player, action_a, action_b) -> (state, action, a_moved)` plays
  the move of the agent to move (finished games stay as they are).
  """

  search_a: Callable
  search_b: Callable
  opening: Callable
  advance: Callable


@functools.lru_cache(maxsize=16)
def _match_steps(game: adapter.Game, agent_a: Agent, agent_b: Agent) -> _MatchSteps:
  def opening(state, opening_actions, ply):
    finished = evaluators.is_finished(state)
    column = jnp.minimum(ply, opening_actions.shape[1] - 1)
    action = jax.lax.dynamic_index_in_dim(opening_actions, column, axis=1, keepdims=False)
    action = jnp.where(finished, 0, action).astype(jnp.int32)
    return where_per_game(finished, state, game.step(state, action)), action

  def advance(state, a_player, action_a, action_b):
    finished = evaluators.is_finished(state)
    a_to_move = state.current_player == a_player
    action = jnp.where(finished, 0, jnp.where(a_to_move, action_a, action_b)).astype(jnp.int32)
    return where_per_game(finished, state, game.step(state, action)), action, a_to_move

  return _MatchSteps(
    search_a=_jitted_search(game, agent_a),
    search_b=_jitted_search(game, agent_b),
    opening=jax.jit(opening),
    advance=jax.jit(advance),
  )


# ---------------------------------------------------------------------------------
# Matches


def _mesh_sharding(num_games: int):
  """A `NamedSharding` over all devices on the games axis, or None (one device, or
  `num_games` not a multiple of the device count)."""
  devices = jax.devices()
  if len(devices) < 2 or num_games % len(devices):
    return None
  mesh = jax.sharding.Mesh(np.asarray(devices), (MESH_AXIS,))
  return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(MESH_AXIS))


def _fetch(arrays):
  """The arrays as numpy, whole: gathered from every host when there are several
  (untested), else copied from the local devices."""
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils

    return jax.tree_util.tree_map(np.asarray, multihost_utils.process_allgather(arrays, tiled=True))
  return jax.device_get(arrays)


_OPENING_ROUNDS = 64  # redraws of duplicate or game-ending openings


@functools.lru_cache(maxsize=16)
def _batched_env_step(env):
  return jax.jit(jax.vmap(env.step))


def draw_openings(game: adapter.Game, states, opening_moves: int, seed: int) -> np.ndarray:
  """`[N, max(opening_moves, 1)]` int: a random opening for each of the `N` initial
  `states` (batched), each of `opening_moves` uniformly random legal plies.

  Openings are distinct where the game allows: a duplicate is drawn again (up to
  `_OPENING_ROUNDS` times, after which duplicates are kept, e.g. when there are
  fewer distinct openings than games). An opening that ends the game is drawn
  again too; if some still do after every redraw, the openings are too long for
  the game and this raises `ValueError` (no game would be left to play).
  """
  count = int(jax.tree_util.tree_leaves(states)[0].shape[0])
  openings = np.zeros((count, max(opening_moves, 1)), np.int64)
  if opening_moves == 0:
    return openings
  rng = np.random.default_rng(seed)
  step = _batched_env_step(game.env)
  redraw = np.ones(count, bool)
  ended = np.zeros(count, bool)
  for _ in range(_OPENING_ROUNDS):
    state = states
    drawn = np.zeros((count, opening_moves), np.int64)
    ended = np.zeros(count, bool)
    for ply in range(opening_moves):
      legal = np.asarray(state.legal_action_mask)
      finished = np.asarray(evaluators.is_finished(state))
      ended |= finished
      scores = np.where(legal, rng.random(legal.shape), -1.0)
      drawn[:, ply] = np.where(legal.any(axis=1), scores.argmax(axis=1), 0)
      state = step(state, jnp.asarray(drawn[:, ply], jnp.int32))
    ended |= np.asarray(evaluators.is_finished(state))
    # Keep the new draws of the rows to redraw that are playable and unseen.
    seen = {tuple(row) for row, bad in zip(openings, redraw, strict=True) if not bad}
    for index in np.flatnonzero(redraw & ~ended):
      row = tuple(drawn[index])
      if row not in seen:
        seen.add(row)
        openings[index] = drawn[index]
        redraw[index] = False
    if not redraw.any():
      return openings
  # Rows still to redraw: duplicates are acceptable, game-ending openings are not.
  for index in np.flatnonzero(redraw & ~ended):
    openings[index] = drawn[index]
    redraw[index] = False
  if redraw.any():
    raise ValueError(
      f"openings of {opening_moves} random plies end the game before any search "
      f"(no game left to play); use fewer opening plies"
    )
  return openings


def play_match(
  game_spec_or_game: str | adapter.Game,
  agent_a: Agent,
  agent_b: Agent,
  *,
  num_games: int,
  seed: int = 0,
  params_a=None,
  params_b=None,
  opening_moves: int = 0,
  equal_time: bool = False,
  progress: bool = False,
  on_start: Callable[[Callable[[], MatchResult | None]], None] | None = None,
) -> MatchResult:
  """Plays `num_games` games between `agent_a` and `agent_b`; see the module doc.

  Args:
    game_spec_or_game: a `make_game` spec (`"connect_four"`, `"tic_tac_toe"`,
      `"nim:3,4,5"`, ...) or a `Game` (its evaluator is replaced by each agent's).
    agent_a, agent_b: the agents; results are A's.
    num_games: games to play, even and >= 2 (half with A first).
    seed: the only source of randomness (initial states, openings, searches).
    params_a, params_b: evaluator parameters (network weights) of A and B.
    opening_moves: plies of uniformly random legal moves at the start of each game.
    equal_time: before the match, choose B's simulations so that B's search takes
      A's time per move, measured on the match's positions after the openings
      (`calibrate_simulations`); the match is then played with that B, and
      `MatchResult.calibration` holds what was measured.
    progress: on stderr, a line while the step compiles (the first ply), then a
      tqdm bar of plies (of at most the game's length, where known) with the games
      finished so far.
    on_start: called once, before the calibration and the first ply, with a
      function that returns the `MatchResult` of the games finished so far (None
      while none is; `games` counts only those, and the searches' statistics cover
      every ply played): what `mcgs-jax arena --json` prints after Ctrl-C.

  Returns:
    A `MatchResult`. The same arguments give the same games on any number of
    devices (with `equal_time`, B's simulations come from timings and may differ
    between runs).

  Raises:
    ValueError: for a bad game spec, an odd or non-positive `num_games`, a
      negative `opening_moves` or a bad agent setting.
  """
  num_games, opening_moves = _checked_match(num_games, opening_moves, agent_a, agent_b)
  if isinstance(game_spec_or_game, str):
    game = _game_from_spec(game_spec_or_game)
  else:
    game = game_spec_or_game
  started = time.perf_counter()
  state, a_player, opening_actions, a_first, search_key = _match_start(
    game, num_games, seed, opening_moves
  )
  calibration = None
  sharding: jax.sharding.NamedSharding | None = None
  tally = _Tally.empty(num_games, opening_moves)

  def result_fields() -> dict[str, Any]:
    """What a result says besides the games: time, devices, calibration."""
    return dict(
      seconds=time.perf_counter() - started,
      num_devices=1 if sharding is None else len(jax.devices()),
      calibration=calibration,
    )

  def result_so_far() -> MatchResult | None:
    """The result of the games finished so far (None while none is)."""
    return _finished_games_result(tally, agent_a, agent_b, a_first=a_first, **result_fields())

  if on_start is not None:
    on_start(result_so_far)
  if equal_time:
    agent_b, calibration = calibrate_simulations(
      game,
      agent_a,
      agent_b,
      _after_openings(game, state, opening_actions, opening_moves),
      params_a=params_a,
      params_b=params_b,
      seed=seed,
      progress=progress,
    )
  steps = _match_steps(game, agent_a, agent_b)
  check_memory([estimated_search_bytes(game, agent, state) for agent in (agent_a, agent_b)])
  graphs = [
    _initial_graph(steps.search_a, params_a, state, agent_a),
    _initial_graph(steps.search_b, params_b, state, agent_b),
  ]
  played = jnp.zeros((num_games,), jnp.int32)
  sharding = _mesh_sharding(num_games)
  if sharding is not None:
    state, a_player, opening_actions, graphs, played = jax.device_put(
      (state, a_player, opening_actions, graphs, played), sharding
    )
  report = _MatchProgress(
    progress, f"{agent_a.describe()} vs {agent_b.describe()}", num_games, game
  )
  tally = _play_plies(
    steps,
    (params_a, params_b),
    state,
    a_player,
    opening_actions,
    opening_moves,
    graphs,
    played,
    search_key,
    report,
    tally,
  )
  return _match_result(tally, agent_a, agent_b, a_first=a_first, **result_fields())


def check_memory(search_bytes: list[int], available: int | None = None) -> None:
  """`memory.InsufficientMemoryError` (a `ValueError`) when the agents' searches
  (`search_bytes`, A's and B's, from `estimated_search_bytes`) cannot fit in the
  memory available, with the estimate; a warning on stderr above
  `memory.WARN_FRACTION` of it."""
  memory.check_memory(
    {"A": search_bytes[0], "B": search_bytes[1]},
    owner="the match",
    users="searches",
    held="its searches' graphs",
    advice="fewer games, simulations or capacity",
    available=available,
  )


def _checked_match(num_games, opening_moves, agent_a, agent_b) -> tuple[int, int]:
  """`(num_games, opening_moves)` as ints; ValueError or TypeError for bad ones or for
  an agent that is not an `Agent`."""
  num_games = int(num_games)
  if num_games < 2 or num_games % 2:
    raise ValueError(f"num_games must be even and at least 2, got {num_games}")
  opening_moves = int(opening_moves)
  if opening_moves < 0:
    raise ValueError(f"opening_moves must be >= 0, got {opening_moves}")
  for label, agent in (("agent_a", agent_a), ("agent_b", agent_b)):
    if not isinstance(agent, Agent):
      raise TypeError(f"{label} must be an Agent, got {type(agent).__name__}")
  return num_games, opening_moves


@dataclasses.dataclass
class _Tally:
  """What a match has counted so far, on the host, per game and per side (`"a"`,
  `"b"`)."""

  outcomes: np.ndarray  # [N] float64: the rewards A collected
  lengths: np.ndarray  # [N] int64: plies played, openings included
  openings: np.ndarray  # [N, opening_moves] int64: the opening plies, -1 after an end
  over: np.ndarray  # [N] bool: the games over (set once their last ply is counted)
  searches: dict[str, dict[str, Any]]  # side: searches, nodes, hits, nodes_per_ply
  timing: dict[str, dict[str, float]]  # side: first (search seconds), seconds, plies
  first_ply_seconds: float = 0.0

  @classmethod
  def empty(cls, num_games: int, opening_moves: int) -> "_Tally":
    return cls(
      outcomes=np.zeros(num_games, np.float64),
      lengths=np.zeros(num_games, np.int64),
      openings=np.zeros((num_games, opening_moves), np.int64),
      over=np.zeros(num_games, bool),
      searches={
        side: {"searches": 0, "nodes": 0.0, "hits": 0.0, "nodes_per_ply": []} for side in ("a", "b")
      },
      timing={side: {"first": 0.0, "seconds": 0.0, "plies": 0} for side in ("a", "b")},
    )

  def add_search_time(self, side: str, seconds: float) -> None:
    """One search of `side`; its first one (which compiles) is kept apart."""
    timed = self.timing[side]
    if timed["plies"] == 0 and timed["first"] == 0.0:
      timed["first"] = seconds
    else:
      timed["seconds"] += seconds
      timed["plies"] += 1

  def add_ply(self, ply: int, finished, action, rewards, moves, in_opening: bool) -> None:
    """A ply played in the games not `finished` before it, `moves` its `(a_moved,
    searched, nodes, hits)` `[N]` (nothing searched in an opening ply)."""
    active = ~finished
    self.outcomes += np.where(active, rewards, 0.0)
    self.lengths += active
    if in_opening:
      self.openings[:, ply] = np.where(active, action, -1)
    a_moved, searched, nodes, hits = moves
    for side, mask in (("a", searched & a_moved), ("b", searched & ~a_moved)):
      count = int(mask.sum())
      totals = self.searches[side]
      totals["searches"] += count
      totals["nodes"] += float(nodes[mask].sum())
      totals["hits"] += float(hits[mask].sum())
      totals["nodes_per_ply"].append(float(nodes[mask].mean()) if count else float("nan"))


class _MatchProgress:
  """What `play_match(progress=True)` writes on stderr: a line while the searches
  compile, one when the first searched ply is played, then a bar of plies (where
  tqdm is installed). Silent with `enabled=False`."""

  def __init__(self, enabled: bool, agents: str, num_games: int, game: adapter.Game):
    self.enabled = enabled
    self.agents = agents
    self.num_games = num_games
    self.limit = _ply_bound(game)
    self.bar: Any = None

  def compiling(self) -> None:
    if self.enabled:
      print(f"compiling the searches ({self.agents}) ...", file=sys.stderr, flush=True)

  def played(self, ply: int, first_searched: bool, first_ply_seconds: float, finished) -> None:
    """After `ply` plies, `finished` `[N]` the games over."""
    if self.enabled and first_searched:
      limit = self.limit
      print(
        f"compiled and played the first searched ply in "
        f"{first_ply_seconds:.1f} s; now one ply at a time "
        f"for all {self.num_games} games" + (f" (at most {limit} plies)" if limit else ""),
        file=sys.stderr,
        flush=True,
      )
      self.bar = progress_bar(
        total=limit, initial=ply, unit="ply", file=sys.stderr, leave=False, desc="plies"
      )
    elif self.bar is not None:
      self.bar.update(1)
    if self.bar is not None:
      self.bar.set_postfix_str(f"games over {int(finished.sum())}/{self.num_games}")

  def close(self) -> None:
    if self.bar is not None:
      self.bar.close()


def _ply_bound(game: adapter.Game) -> int | None:
  """An upper bound on a game's plies where one is known (for progress), else None:
  `registry.max_game_length`, or the sum of Nim's heaps."""
  heaps = getattr(game.env, "initial_heaps", None)
  if heaps is not None:
    return int(sum(heaps))
  return registry.max_game_length(game)


def _play_plies(
  steps: "_MatchSteps",
  params: tuple,
  state,
  a_player,
  opening_actions,
  opening_moves: int,
  graphs: list,
  played,
  search_key,
  report: _MatchProgress,
  tally: _Tally,
) -> _Tally:
  """Plays every game of a match to its end, one ply of the whole batch at a time:
  the opening plies of `opening_actions` `[N, max(opening_moves, 1)]`, then the
  searched plies (`_searched_ply`), counting into `tally` (an empty one, returned).
  `graphs` and `played` are the agents' kept graphs and the last move (see
  `_make_search`)."""
  num_games = int(a_player.shape[0])
  no_search = (np.zeros(num_games, bool), np.zeros(num_games, bool))
  first_ply_started = time.perf_counter()
  try:
    finished = np.asarray(_fetch(evaluators.is_finished(state)))
    tally.over = finished
    ply = 0
    while not finished.all():
      if ply >= _MAX_PLIES:
        raise RuntimeError(f"games still running after {_MAX_PLIES} plies")
      in_opening = ply < opening_moves
      first_searched = ply == opening_moves
      if first_searched:
        report.compiling()
        first_ply_started = time.perf_counter()
      if in_opening:
        state, action = steps.opening(state, opening_actions, jnp.int32(ply))
        nodes = np.zeros(num_games, np.int64)
        moves = (*no_search, nodes, nodes)
      else:
        key = jax.random.fold_in(search_key, ply)
        state, action, graphs, moves = _searched_ply(
          steps, params, key, state, a_player, graphs, played, tally
        )
      played = action
      action, now_finished, rewards = _fetch(
        (action, evaluators.is_finished(state), evaluators.rewards_of(state, a_player))
      )
      tally.add_ply(ply, finished, action, rewards, moves, in_opening)
      finished = np.asarray(now_finished)
      tally.over = finished
      ply += 1
      if first_searched:
        tally.first_ply_seconds = time.perf_counter() - first_ply_started
      report.played(ply, first_searched, tally.first_ply_seconds, finished)
  finally:
    report.close()
  return tally


def _searched_ply(steps: "_MatchSteps", params: tuple, key, state, a_player, graphs, played, tally):
  """Both agents search every game (each search timed into `tally`) and each game
  plays the move of the agent to move there. Returns `(state, action, graphs,
  (a_moved, searched, nodes, hits))`, the last four `[N]` numpy: whether A moved,
  whether the game was still on, and the nodes and transposition hits of the search
  whose move was played."""
  key_a, key_b = jax.random.split(key)
  graphs = list(graphs)
  outputs = []
  for index, (side, search, side_key) in enumerate(
    (("a", steps.search_a, key_a), ("b", steps.search_b, key_b))
  ):
    search_started = time.perf_counter()
    output = jax.block_until_ready(search(params[index], side_key, state, graphs[index], played))
    tally.add_search_time(side, time.perf_counter() - search_started)
    graphs[index] = output[3]
    outputs.append(output)
  (action_a, nodes_a, hits_a, _), (action_b, nodes_b, hits_b, _) = outputs
  before_finished = evaluators.is_finished(state)
  state, action, a_to_move = steps.advance(state, a_player, action_a, action_b)
  moves = _fetch(
    (
      a_to_move,
      ~before_finished,
      jnp.where(a_to_move, nodes_a, nodes_b),
      jnp.where(a_to_move, hits_a, hits_b),
    )
  )
  return state, action, graphs, moves


def _match_result(
  tally: _Tally,
  agent_a: Agent,
  agent_b: Agent,
  *,
  a_first: np.ndarray,
  seconds: float,
  num_devices: int,
  calibration: dict[str, Any] | None,
) -> MatchResult:
  """The `MatchResult` of a match's tally."""
  outcomes = tally.outcomes
  num_games = int(outcomes.size)
  wins = int((outcomes > 0).sum())
  losses = int((outcomes < 0).sum())
  points = np.where(outcomes > 0, 1.0, np.where(outcomes < 0, 0.0, 0.5))
  score, elo, elo_ci, score_ci = elo_interval(points)
  agents, timings = {}, {}
  for side, agent in (("a", agent_a), ("b", agent_b)):
    totals, timed = tally.searches[side], tally.timing[side]
    searches = totals["searches"]
    agents[side] = {
      "name": agent.describe(),
      "engine": agent.engine,
      "num_simulations": agent.num_simulations,
      "searches": searches,
      "mean_nodes": totals["nodes"] / searches if searches else 0.0,
      "mean_transposition_hits": totals["hits"] / searches if searches else 0.0,
      "nodes_per_ply": totals["nodes_per_ply"],
    }
    timings[side] = {
      "search_seconds_per_ply": (
        timed["seconds"] / timed["plies"] if timed["plies"] else float("nan")
      ),
      "first_search_seconds": timed["first"],
    }
  return MatchResult(
    wins=wins,
    draws=num_games - wins - losses,
    losses=losses,
    score=score,
    elo=elo,
    elo_ci95=elo_ci,
    score_ci95=score_ci,
    games=num_games,
    mean_game_length=float(tally.lengths.mean()),
    agents=agents,
    outcomes=outcomes,
    a_first=a_first,
    game_lengths=tally.lengths,
    openings=tally.openings,
    seconds=seconds,
    num_devices=num_devices,
    first_ply_seconds=tally.first_ply_seconds,
    calibration=calibration,
    timing=timings,
  )


def _finished_games_result(
  tally: _Tally, agent_a: Agent, agent_b: Agent, *, a_first: np.ndarray, **result_fields
) -> MatchResult | None:
  """The `MatchResult` of the games of `tally` that are over (None while none is):
  their outcomes, lengths and openings, and the searches of every ply played."""
  over = tally.over.copy()
  if not over.any():
    return None
  finished = dataclasses.replace(
    tally, outcomes=tally.outcomes[over], lengths=tally.lengths[over], openings=tally.openings[over]
  )
  return _match_result(finished, agent_a, agent_b, a_first=a_first[over], **result_fields)


def _match_start(game: adapter.Game, num_games: int, seed: int, opening_moves: int):
  """`(state, a_player, opening_actions, a_first, search_key)` of a match: the
  initial states (game i and i + N/2 share theirs and their opening), A's player id
  per game, the `[N, max(opening_moves, 1)]` opening plies, whether A moves first,
  and the key of the searches."""
  half = num_games // 2
  init_key, opening_key, search_key = jax.random.split(jax.random.PRNGKey(seed), 3)
  pair_init_keys = jax.random.split(init_key, half)
  state = jax.vmap(game.env.init)(jnp.concatenate([pair_init_keys, pair_init_keys]))
  pair_openings = draw_openings(
    game,
    jax.vmap(game.env.init)(pair_init_keys),
    opening_moves,
    int(jax.random.randint(opening_key, (), 0, 2**31 - 1)),
  )
  opening_actions = jnp.asarray(
    np.concatenate([pair_openings, pair_openings]).reshape(num_games, max(opening_moves, 1)),
    jnp.int32,
  )
  a_first = np.arange(num_games) < half
  first_player = np.asarray(state.current_player)
  a_player = jnp.asarray(np.where(a_first, first_player, 1 - first_player), jnp.int32)
  return state, a_player, opening_actions, a_first, search_key


def _after_openings(game: adapter.Game, state, opening_actions, opening_moves: int):
  """The states after the opening plies (where the agents take over)."""
  step = _batched_env_step(game.env)
  for ply in range(opening_moves):
    state = step(state, opening_actions[:, ply])
  return state


_CALIBRATION_REPEATS = 3  # timed calls per measurement (the median counts)
_CALIBRATION_ROUNDS = 4  # measurements of B at most, the first two included


def _search_seconds(game: adapter.Game, agent: Agent, params, state, seed: int) -> float:
  """The median wall time of `agent`'s search of every game in `state` (compiled
  first, not counted). An agent that keeps its graph is timed as it plays: it
  searches `state` from an empty graph, the move it chose is played, and the timed
  search reroots that graph by it and continues it from the next position."""
  search = _jitted_search(game, agent)
  graph = _initial_graph(search, params, state, agent)
  played = jnp.zeros(state.current_player.shape, jnp.int32)
  key = jax.random.PRNGKey(seed)
  action, _, _, searched = jax.block_until_ready(search(params, key, state, graph, played))
  if agent.reuse:
    finished = evaluators.is_finished(state)
    state = where_per_game(finished, state, game.step(state, jnp.where(finished, 0, action)))
    graph, played = searched, action
    jax.block_until_ready(search(params, key, state, graph, played))
  times = []
  for repeat in range(_CALIBRATION_REPEATS):
    started = time.perf_counter()
    jax.block_until_ready(search(params, jax.random.fold_in(key, repeat), state, graph, played))
    times.append(time.perf_counter() - started)
  return float(np.median(times))


def calibrate_simulations(
  game: adapter.Game,
  agent_a: Agent,
  agent_b: Agent,
  state,
  *,
  params_a=None,
  params_b=None,
  seed: int = 0,
  progress: bool = False,
) -> tuple[Agent, dict[str, Any]]:
  """`agent_b` with the simulations that make its search take `agent_a`'s time.

  Both searches are timed on `state` (a batch of positions: a match's positions after
  its openings), compiled first and timed as the median of a few calls; an agent with
  `reuse` is timed continuing its graph one move later (its `reroot` included), as it
  searches during a match. B's time is modelled as `c0 + c1 * S` through the two
  nearest measurements and solved for A's time, at most `_CALIBRATION_ROUNDS`
  measurements of B (B's simulations a multiple of its `num_parallel`, at least one
  step).

  Returns:
    `(agent_b with num_simulations set, calibration)`, `calibration` a dict:
    `a_simulations`, `a_seconds` (per search of the batch), `b_simulations`,
    `b_seconds` (B's measured time at the chosen simulations) and `measurements`
    (every `[simulations, seconds]` of B).
  """
  target = _search_seconds(game, agent_a, params_a, state, seed)
  step = agent_b.num_parallel
  measured: dict[int, float] = {}

  def measure(simulations: int) -> float:
    simulations = max(step, simulations // step * step)
    if simulations not in measured:
      trial = dataclasses.replace(agent_b, num_simulations=simulations)
      measured[simulations] = _search_seconds(game, trial, params_b, state, seed)
      if progress:
        print(
          f"calibrating B: {simulations} simulations take {measured[simulations]:.3f} s "
          f"per search (A: {target:.3f} s)",
          file=sys.stderr,
          flush=True,
        )
    return measured[simulations]

  first = max(step, agent_a.num_simulations // step * step)
  seconds = measure(first)
  measure(first * 2 if seconds < target else max(step, first // 2))
  for _ in range(_CALIBRATION_ROUNDS - 2):
    # The two measurements nearest the target in time define the line.
    (s0, t0), (s1, t1) = sorted(measured.items(), key=lambda item: abs(item[1] - target))[:2]
    slope = (t1 - t0) / (s1 - s0) if s1 != s0 else 0.0
    if slope <= 0:
      break
    guess = int(round(s0 + (target - t0) / slope))
    guess = min(max(guess, step), 64 * first)
    guess = max(step, guess // step * step)
    if guess in measured:
      break
    measure(guess)
  chosen = min(measured, key=lambda simulations: abs(measured[simulations] - target))
  calibration = {
    "a_simulations": agent_a.num_simulations,
    "a_seconds": target,
    "b_simulations": chosen,
    "b_seconds": measured[chosen],
    "measurements": sorted([simulations, seconds] for simulations, seconds in measured.items()),
  }
  return dataclasses.replace(agent_b, num_simulations=chosen), calibration
