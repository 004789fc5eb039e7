"""The arena's agents: `Agent` (an engine, a policy, an evaluator and the search's
settings) and the jittable search each agent plays with (`make_search`), on the
game with the agent's evaluator (`agent_game`)."""

import dataclasses
import functools
from collections.abc import Callable
from typing import cast

import jax
import jax.numpy as jnp

import mcgs_jax as mg
from mcgs_jax._src import hashing
from mcgs_jax.apps import engines, registry
from mcgs_jax.games import adapter, evaluators, keys

ENGINES = engines.ENGINE_NAMES
# What mctx's search offers of the arena's policies (it has no UCT).
MCTX_POLICIES = registry.MCTX_POLICY_NAMES


@dataclasses.dataclass(frozen=True)
class Agent:
  """A search agent: an engine, a policy, a leaf evaluator and the search's settings.

  The defaults are this library's default agent: a graph search (MCGS) that keeps its
  graph between moves (`reuse`) and proves exact values (`solver`), UCT with
  random-rollout leaves, 512 simulations.
  `mcgs-jax arena` plays `muzero` with a trained network (see
  `mcgs_jax.apps.cli.arena_command`).

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
      values, and the solver plays stronger at equal time per move and at equal
      simulations); `mctx` cannot.
    num_parallel: playouts per game per search step (virtual visits; `mcgs` only).
    num_rollouts: random playouts per evaluation with `evaluator="rollout"`.
    apply_fn: `apply_fn(params, observation) -> (logits, value)` for
      `evaluator="network"`.
    reuse: keep the graph between plies (`mcgs_jax.reroot` by the move played, the
      agent's own and the opponent's) and continue it at the next search. Default:
      True for `mcgs` (stronger at equal simulations); `mctx` cannot.
    capacity: nodes per game of the graph; default `num_simulations + 1`, or
      `4 * num_simulations + 1` with `reuse` (what does not fit is counted in the
      graph's `capacity_overflows`, never corrupts it; `mcgs` only).
    make_room: with `reuse`, keep only the `capacity - num_simulations` most
      visited nodes when rerooting (`mcgs_jax.reroot(..., max_nodes=...)`), so that
      no playout of the next search finds the graph full. Default False.
    max_children: compact edges, `K` slots per node (`mcgs_jax.GraphOptions`;
      `mcgs` only); None: dense edge tables.
    key_history: the history mode of the game's transposition key
      (`mcgs_jax.games.keys.HISTORY_MODES`: `"bounded"`, `"exact"`, `"position"`;
      `mcgs` only); None: the key the game was built with (`make_game`'s default).
    repetition_bound: R of the `"bounded"` and `"position"` keys (`mcgs` only); None:
      the game's (11 by default).
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
  make_room: bool = False
  max_children: int | None = None
  key_history: str | None = None
  repetition_bound: int | None = None
  name: str = ""

  def __post_init__(self):
    registry.check_policy(self.policy)
    registry.check_evaluator(self.evaluator)
    engine = engines.get_engine(self.engine)
    if self.evaluator == "network" and self.apply_fn is None:
      raise ValueError("evaluator 'network' needs apply_fn")
    for field in ("num_simulations", "num_rollouts"):
      if int(getattr(self, field)) < 1:
        raise ValueError(f"{field} must be at least 1, got {getattr(self, field)}")
    if self.capacity is not None and int(self.capacity) < 2:
      raise ValueError(f"capacity must be at least 2, got {self.capacity}")
    if not isinstance(self.make_room, bool):
      raise ValueError(f"make_room must be True or False, got {self.make_room!r}")
    if self.key_history is not None or self.repetition_bound is not None:
      keys.check_history(*self._key_options().values())
    if engine.external:
      self._check_external(engine)
    # Frozen: the engine's defaults are written once, here.
    if self.transpositions is None:
      object.__setattr__(self, "transpositions", engine.keeps_graph)
    if self.reuse is None:
      object.__setattr__(self, "reuse", engine.keeps_graph)
    if self.solver is None:
      object.__setattr__(self, "solver", engine.solver)
    if self.make_room and not self.reuse:
      raise ValueError("make_room=True needs reuse (there is no kept graph to make room in)")
    if self.make_room and self.search_capacity <= self.num_simulations:
      raise ValueError(
        f"make_room=True needs capacity ({self.search_capacity}) above num_simulations "
        f"({self.num_simulations}): no node would be kept"
      )
    self.graph_options()  # the search's own checks of the graph settings
    if self.num_simulations % self.num_parallel:
      raise ValueError(
        f"num_simulations ({self.num_simulations}) must be a multiple of "
        f"num_parallel ({self.num_parallel})"
      )

  def _check_external(self, engine: engines.Engine) -> None:
    """ValueError for what an external engine's search (mctx's) cannot do."""
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
        ("make_room=True", self.make_room),
        ("max_children", self.max_children is not None),
        ("key_history", self.key_history is not None),
        ("repetition_bound", self.repetition_bound is not None),
      )
      if value
    ]
    if unsupported:
      raise ValueError(
        f"engine 'mctx' searches a tree from scratch at every move: "
        f"{', '.join(unsupported)} is for engine 'mcgs'"
      )

  def _key_options(self) -> dict:
    """`make_game`'s key keywords of the agent, the library's defaults filled in."""
    return dict(
      history=self.key_history if self.key_history is not None else keys.DEFAULT_HISTORY,
      repetition_bound=(
        self.repetition_bound
        if self.repetition_bound is not None
        else keys.DEFAULT_REPETITION_BOUND
      ),
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
      max_children=self.max_children,
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
    if engines.get_engine(self.engine).external:
      return f"{self.engine} {self.policy}/{self.evaluator}/{self.num_simulations}"
    if self.solver:
      text += " solver"
    if self.reuse:
      text += " reuse"
    if self.make_room:
      text += " room"
    if self.num_parallel > 1:
      text += f" K={self.num_parallel}"
    if self.max_children is not None:
      text += f" slots={self.max_children}"
    if self.key_history is not None:
      text += f" key={self.key_history}"
    if self.repetition_bound is not None:
      text += f" R={self.repetition_bound}"
    return text


# ---------------------------------------------------------------------------------
# Agents as jittable functions


def two_player_game(spec: str) -> adapter.Game:
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


@functools.lru_cache(maxsize=32)
def jitted_search(game: adapter.Game, agent: Agent) -> Callable:
  """`jax.jit(make_search(game, agent))`, cached: a match and the calibration before
  it share compiled searches."""
  return jax.jit(make_search(game, agent))


def make_search(game: adapter.Game, agent: Agent) -> Callable:
  """`search(params, key, state, graph, played) -> (action [B], nodes [B], hits [B],
  graph)`, not jitted.

  Finished games get an all-invalid root (a trivial search, action 0). With
  `agent.reuse`, `graph` is the agent's graph of the previous ply (or an all-empty
  graph); it is rerooted by `played` `[B]`, the move played since (rerooting an
  empty graph gives an empty graph), and the search continues it. `hits` counts
  this search's transposition hits only. Without reuse `graph` is None and returned
  as None.
  """
  game = agent_game(game, agent)
  if engines.get_engine(agent.engine).external:
    mctx_policy = mctx_search_policy(game, agent)

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
    max_children=agent.max_children,
    value_bounds=game.value_bounds,
  )

  def search(params, key, state, graph, played):
    root_key, search_key = jax.random.split(key)
    finished = evaluators.is_finished(state)
    invalid = game.invalid_actions(state) | finished[:, None]
    root = game.root(params, root_key, state)
    earlier_hits = 0
    if graph is not None:
      room = agent.search_capacity - agent.num_simulations
      graph = mg.reroot(graph, played, max_nodes=room if agent.make_room else None)
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


def agent_game(game: adapter.Game, agent: Agent) -> adapter.Game:
  """`game` with the agent's evaluator, and its key where the agent names a history
  mode or bound."""
  evaluator = registry.make_evaluator(
    agent.evaluator, game.env, num_rollouts=agent.num_rollouts, apply_fn=agent.apply_fn
  )
  game = dataclasses.replace(game, evaluator=evaluator)
  if agent.key_history is None and agent.repetition_bound is None:
    return game
  options = agent._key_options()
  hash_fn = adapter.hash_fn_for_env(
    game.env, hashing.DEFAULT_LANES, options["history"], options["repetition_bound"]
  )
  return dataclasses.replace(game, hash_fn=hash_fn)


def mctx_search_policy(game: adapter.Game, agent: Agent) -> Callable:
  """`policy(params, key, root, invalid) -> (action, nodes)` with mctx's own search,
  set to play (no root noise, most visited move for muzero)."""
  playing = registry.PLAYING_OPTIONS.get(agent.policy, {})
  search = registry.mctx_policy(agent.policy, game.recurrent_fn, **playing)

  def policy(params, key, root, invalid):
    out = search(params, key, root, agent.num_simulations, invalid)
    # mctx's tree: one node per simulation plus the root, visited or not.
    return out.action, jnp.sum(out.search_tree.node_visits > 0, axis=-1).astype(jnp.int32)

  return policy


def initial_graph(search: Callable, params, state, agent: Agent):
  """An all-empty graph of the shapes `search` produces (None without reuse)."""
  if not agent.reuse:
    return None
  played = jnp.zeros(state.current_player.shape, jnp.int32)
  shapes = jax.eval_shape(
    lambda p, s: search(p, jax.random.PRNGKey(0), s, None, played)[3], params, state
  )
  return mg.empty_like(shapes)
