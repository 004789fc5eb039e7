"""Equal time per move: `calibrate_simulations` chooses agent B's simulations so that
its search takes agent A's time, each search timed as it runs in a match
(`_search_seconds`)."""

import dataclasses
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax._src.batched import where_per_game
from mcgs_jax.apps.arena.agent import Agent, initial_graph, jitted_search
from mcgs_jax.games import adapter, evaluators

_CALIBRATION_REPEATS = 3  # timed calls per measurement (the median counts)
CALIBRATION_ROUNDS = 4  # measurements of B at most, the first two included


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
  nearest measurements and solved for A's time, at most `CALIBRATION_ROUNDS`
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
  for _ in range(CALIBRATION_ROUNDS - 2):
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


def _search_seconds(game: adapter.Game, agent: Agent, params, state, seed: int) -> float:
  """The median wall time of `agent`'s search of every game in `state` (compiled
  first, not counted). An agent that keeps its graph is timed as it plays: it
  searches `state` from an empty graph, the move it chose is played, and the timed
  search reroots that graph by it and continues it from the next position."""
  search = jitted_search(game, agent)
  graph = initial_graph(search, params, state, agent)
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
