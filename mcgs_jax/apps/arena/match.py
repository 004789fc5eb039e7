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

This module plays the match, from `play_match` down in the order it calls its
steps. The agents and their searches are in `agent`, the equal-time calibration in
`calibration`, and `MatchResult` with the Elo intervals in `results`;
`mcgs_jax.apps.arena` exports their public names (`__all__`).
"""

import dataclasses
import functools
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax._src.batched import where_per_game
from mcgs_jax.apps import memory_estimates, registry
from mcgs_jax.apps.arena.agent import (
  Agent,
  initial_graph,
  jitted_search,
  two_player_game,
)
from mcgs_jax.apps.arena.calibration import calibrate_simulations
from mcgs_jax.apps.arena.results import (
  MatchResult,
  Tally,
  finished_games_result,
  match_result,
)
from mcgs_jax.apps.memory_estimates import estimated_search_bytes
from mcgs_jax.apps.progress import progress_bar
from mcgs_jax.games import adapter, evaluators

EVALUATORS = registry.EVALUATOR_NAMES
MESH_AXIS = "games"
_MAX_PLIES = 100_000  # safety cap on a match's length, far above any supported game
_OPENING_ROUNDS = 64  # redraws of duplicate or game-ending openings


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
  game, num_games, opening_moves = _checked_match(
    game_spec_or_game, num_games, opening_moves, agent_a, agent_b
  )
  started = time.perf_counter()
  state, a_player, opening_actions, a_first, search_key = _match_start(
    game, num_games, seed, opening_moves
  )
  calibration = None
  sharding: jax.sharding.NamedSharding | None = None
  tally = Tally.empty(num_games, opening_moves)

  def result_fields() -> dict[str, Any]:
    """What a result says besides the games: time, devices, calibration."""
    return dict(
      seconds=time.perf_counter() - started,
      num_devices=1 if sharding is None else len(jax.devices()),
      calibration=calibration,
    )

  def result_so_far() -> MatchResult | None:
    """The result of the games finished so far (None while none is)."""
    return finished_games_result(tally, agent_a, agent_b, a_first=a_first, **result_fields())

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
  params = (params_a, params_b)
  steps, placed, sharding, report = _prepared_match(
    game, (agent_a, agent_b), params, (state, a_player, opening_actions), progress
  )
  tally = _play_plies(steps, params, placed, opening_moves, search_key, report, tally)
  return match_result(tally, agent_a, agent_b, a_first=a_first, **result_fields())


def _prepared_match(game: adapter.Game, agents, params, start, progress: bool):
  """`(steps, placed, sharding, report)`: the match's steps (`_match_steps`), its
  `start` (`(state, a_player, opening_actions)`, `[N]` games) placed on the devices
  with their sharding (`_placed_match`), and the report of its progress."""
  agent_a, agent_b = agents
  steps = _match_steps(game, agent_a, agent_b)
  placed, sharding = _placed_match(game, steps, agents, params, *start)
  num_games = int(start[1].shape[0])
  report = _MatchProgress(
    progress, f"{agent_a.describe()} vs {agent_b.describe()}", num_games, game
  )
  return steps, placed, sharding, report


def _checked_match(
  game_spec_or_game, num_games, opening_moves, agent_a, agent_b
) -> tuple[adapter.Game, int, int]:
  """`(game, num_games, opening_moves)`: the game of a spec (`two_player_game`) and the
  counts as ints; ValueError or TypeError for bad ones or for an agent that is not an
  `Agent`."""
  num_games = int(num_games)
  if num_games < 2 or num_games % 2:
    raise ValueError(f"num_games must be even and at least 2, got {num_games}")
  opening_moves = int(opening_moves)
  if opening_moves < 0:
    raise ValueError(f"opening_moves must be >= 0, got {opening_moves}")
  for label, agent in (("agent_a", agent_a), ("agent_b", agent_b)):
    if not isinstance(agent, Agent):
      raise TypeError(f"{label} must be an Agent, got {type(agent).__name__}")
  if isinstance(game_spec_or_game, str):
    return two_player_game(game_spec_or_game), num_games, opening_moves
  return game_spec_or_game, num_games, opening_moves


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


@functools.lru_cache(maxsize=16)
def _batched_env_step(env):
  """`env.step` over a batch of states, jitted once per env."""
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


def _after_openings(game: adapter.Game, state, opening_actions, opening_moves: int):
  """The states after the opening plies (where the agents take over)."""
  step = _batched_env_step(game.env)
  for ply in range(opening_moves):
    state = step(state, opening_actions[:, ply])
  return state


@dataclasses.dataclass(frozen=True)
class _MatchSteps:
  """The jitted pieces of a match (cached per configuration by `_match_steps`).

  `search_a` / `search_b`: `make_search`'s function of each agent, jitted, so that
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
  """The `_MatchSteps` of a match between `agent_a` and `agent_b` on `game`."""

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
    search_a=jitted_search(game, agent_a),
    search_b=jitted_search(game, agent_b),
    opening=jax.jit(opening),
    advance=jax.jit(advance),
  )


def _placed_match(
  game: adapter.Game, steps: _MatchSteps, agents, params, state, a_player, opening_actions
):
  """`((state, a_player, opening_actions, graphs, played), sharding)`: a match's arrays,
  with each agent's first graph (`initial_graph`) and the last move played (none yet:
  zeros), on the devices of `sharding` (`_mesh_sharding`; None: as they are). First,
  `check_memory` of the agents' searches."""
  check_memory([estimated_search_bytes(game, agent, state) for agent in agents])
  graphs = [
    initial_graph(steps.search_a, params[0], state, agents[0]),
    initial_graph(steps.search_b, params[1], state, agents[1]),
  ]
  num_games = int(a_player.shape[0])
  placed = (state, a_player, opening_actions, graphs, jnp.zeros((num_games,), jnp.int32))
  sharding = _mesh_sharding(num_games)
  if sharding is not None:
    placed = jax.device_put(placed, sharding)
  return placed, sharding


def check_memory(search_bytes: list[int], available: int | None = None) -> None:
  """`memory_estimates.InsufficientMemoryError` (a `ValueError`) when the agents' searches
  (`search_bytes`, A's and B's, from `estimated_search_bytes`) cannot fit in the
  memory available, with the estimate; a warning on stderr above
  `memory_estimates.WARN_FRACTION` of it."""
  memory_estimates.check_memory(
    {"A": search_bytes[0], "B": search_bytes[1]},
    owner="the match",
    users="searches",
    held="its searches' graphs",
    advice="fewer games, simulations or capacity",
    available=available,
  )


def _mesh_sharding(num_games: int):
  """A `NamedSharding` over all devices on the games axis, or None (one device, or
  `num_games` not a multiple of the device count)."""
  devices = jax.devices()
  if len(devices) < 2 or num_games % len(devices):
    return None
  mesh = jax.sharding.Mesh(np.asarray(devices), (MESH_AXIS,))
  return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(MESH_AXIS))


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
  steps: _MatchSteps,
  params: tuple,
  placed: tuple,
  opening_moves: int,
  search_key,
  report: _MatchProgress,
  tally: Tally,
) -> Tally:
  """Plays every game of a match to its end, one ply of the whole batch at a time:
  the opening plies of `opening_actions` `[N, max(opening_moves, 1)]`, then the
  searched plies (`_searched_ply`), counting into `tally` (an empty one, returned).
  `placed` is `_placed_match`'s `(state, a_player, opening_actions, graphs, played)`:
  `graphs` and `played` are the agents' kept graphs and the last move (see
  `make_search`)."""
  state, a_player, opening_actions, graphs, played = placed
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


def _searched_ply(steps: _MatchSteps, params: tuple, key, state, a_player, graphs, played, tally):
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


def _fetch(arrays):
  """The arrays as numpy, whole: gathered from every host when there are several
  (untested), else copied from the local devices."""
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils

    return jax.tree_util.tree_map(np.asarray, multihost_utils.process_allgather(arrays, tiled=True))
  return jax.device_get(arrays)
