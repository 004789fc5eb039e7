"""Single-agent episodes played by a search agent, and what they reached against the
exact references (`mcgs_jax.games.optima`).

`play_episodes(game, agent, num_instances=N)` draws N instances of a one-player game
(a jumanji environment through `make_game("jumanji:<id>")`) and plays every one to its
end in one batch: at each step the agent's search (the arena's `Agent`: engine,
policy, evaluator, graph options) picks the move of every unfinished instance, the
graph kept between steps where the agent reuses it. Instance `i` of seed `s` is
`game.env.init(fold_in(PRNGKey(s), i))`, whatever N is, so a run on other seeds
plays instances no other run saw.
"""

import dataclasses
import functools
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax.apps import engines, registry
from mcgs_jax.apps.arena.agent import Agent, initial_graph, jitted_search
from mcgs_jax.games import evaluators, optima
from mcgs_jax.games.adapter import Game

# A return this close to the highest value bound counts as solved (float sums).
SOLVED_TOLERANCE = 1e-6


@dataclasses.dataclass(frozen=True)
class EpisodeResult:
  """N instances played to their end by one agent.

  Attributes:
    agent: the agent's description (`Agent.describe()`).
    engine: `"mcgs"` or `"mctx"`.
    num_simulations: simulations per step.
    returns: `[N]` float, the sum of each episode's rewards.
    steps: `[N]` int, the steps each episode took.
    solved: `[N]` bool, the return reached the game's highest value (Sudoku and
      Rubik's cube: the puzzle is solved); None where the game has no bound.
    optimal: `[N]` float, the best return of each instance
      (`optima.optimal_returns`), NaN where none is known.
    nodes: mean nodes of a search (per instance and step searched).
    hits_per_simulation: transposition hits of the searches over their
      simulations (0 for mctx's tree).
    search_seconds: mean wall time of one search step of the whole batch, after
      the first (which compiles).
    first_search_seconds: the first step's search, compiling included.
  """

  agent: str
  engine: str
  num_simulations: int
  returns: np.ndarray
  steps: np.ndarray
  solved: np.ndarray | None
  optimal: np.ndarray
  nodes: float
  hits_per_simulation: float
  search_seconds: float
  first_search_seconds: float

  @property
  def gap(self) -> np.ndarray:
    """`[N]` float, `(optimal - return) / |optimal|`: the relative optimality gap
    (0 at the optimum), NaN where no optimum is known."""
    with np.errstate(invalid="ignore", divide="ignore"):
      return (self.optimal - self.returns) / np.abs(self.optimal)

  def summary(self) -> dict[str, Any]:
    """The means a report prints: return, solved share, gap, nodes, hits per
    simulation and seconds per step."""
    gap = self.gap
    known = ~np.isnan(gap)
    return dict(
      agent=self.agent,
      engine=self.engine,
      simulations=self.num_simulations,
      instances=int(self.returns.shape[0]),
      mean_return=float(np.mean(self.returns)),
      solved=None if self.solved is None else float(np.mean(self.solved)),
      mean_gap=float(np.mean(gap[known])) if known.any() else None,
      optimal_share=float(np.mean(gap[known] <= SOLVED_TOLERANCE)) if known.any() else None,
      mean_steps=float(np.mean(self.steps)),
      nodes=self.nodes,
      hits_per_simulation=self.hits_per_simulation,
      search_seconds=self.search_seconds,
      first_search_seconds=self.first_search_seconds,
    )


def instances(game: Game, num_instances: int, seed: int):
  """`[N]` initial states: instance `i` is `env.init(fold_in(PRNGKey(seed), i))`."""
  base = jax.random.PRNGKey(seed)
  keys = jax.vmap(lambda i: jax.random.fold_in(base, i))(jnp.arange(num_instances))
  return jax.vmap(game.env.init)(keys)


def episode_length(game: Game) -> int:
  """The most steps an episode of `game` takes (`registry.max_game_length`);
  ValueError where it is unknown."""
  length = registry.max_game_length(game)
  if length is None:
    raise ValueError(f"{game.env.id}: no known episode length (no time limit or bound)")
  return int(length)


@functools.partial(jax.jit, static_argnums=0)
def _advance(game: Game, state, action, returns, steps):
  """One step of every unfinished instance: `(state, returns, steps)`."""
  live = ~evaluators.is_finished(state)
  state = game.step(state, action)
  reward = jnp.asarray(state.rewards, jnp.float32)[:, 0]
  return state, returns + jnp.where(live, reward, 0.0), steps + live


def play_episodes(
  game: Game,
  agent: Agent,
  *,
  num_instances: int,
  seed: int = 0,
  params: Any = None,
  optimal: np.ndarray | None = None,
) -> EpisodeResult:
  """Plays `num_instances` instances of `game` (seed `seed`) to their end with
  `agent`'s search; `optimal` `[N]` the instances' best returns where the caller
  has them (default: `optima.optimal_returns` where it knows the game, else NaN)."""
  state = instances(game, num_instances, seed)
  if optimal is None:
    optimal = (
      optima.optimal_returns(game.env, state)
      if optima.has_optimum(game.env)
      else np.full((num_instances,), np.nan)
    )
  search = jitted_search(game, agent)
  graph = initial_graph(search, params, state, agent)
  played = jnp.zeros((num_instances,), jnp.int32)
  returns = jnp.zeros((num_instances,), jnp.float32)
  steps = jnp.zeros((num_instances,), jnp.int32)
  key = jax.random.PRNGKey(seed + 1)
  seconds, nodes, hits, searched = [], 0.0, 0.0, 0
  for step in range(episode_length(game)):
    live = ~np.asarray(evaluators.is_finished(state))
    if not live.any():
      break
    started = time.perf_counter()
    action, step_nodes, step_hits, graph = jax.block_until_ready(
      search(params, jax.random.fold_in(key, step), state, graph, played)
    )
    seconds.append(time.perf_counter() - started)
    nodes += float(np.sum(np.asarray(step_nodes)[live]))
    hits += float(np.sum(np.asarray(step_hits)[live]))
    searched += int(live.sum())
    state, returns, steps = _advance(game, state, action, returns, steps)
    played = action
  returns_np = np.asarray(returns, np.float64)
  bounds = game.value_bounds
  solved = None if bounds is None else returns_np >= bounds[1] - SOLVED_TOLERANCE
  return EpisodeResult(
    agent=agent.describe(),
    engine=agent.engine,
    num_simulations=agent.num_simulations,
    returns=returns_np,
    steps=np.asarray(steps),
    solved=solved,
    optimal=np.asarray(optimal, np.float64),
    nodes=nodes / max(searched, 1),
    hits_per_simulation=0.0
    if engines.get_engine(agent.engine).external
    else hits / max(searched * agent.num_simulations, 1),
    search_seconds=float(np.mean(seconds[1:])) if len(seconds) > 1 else float("nan"),
    first_search_seconds=seconds[0] if seconds else float("nan"),
  )
