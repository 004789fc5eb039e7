"""Exact references for jumanji's planning problems: the best return an episode can
reach, against which a search's return is measured (`mcgs-jax evaluate`).

  * Knapsack-v1: the 0/1 knapsack optimum, by OR-Tools' CP-SAT solver. Weights,
    values and the budget are scaled to integers (`SCALE`, weights rounded up and the
    budget down, so every packing it returns fits jumanji's float budget); the
    packing's value is then summed in float32 as jumanji pays it. The scaling can
    miss a packing that fits the float budget by less than 1 / `SCALE`.
  * TSP-v1: the shortest tour (the return is minus its length), by CP-SAT's circuit
    constraint over distances scaled to integers; the tour's length is then summed
    in float32 as jumanji pays it. Optimal to within 20 / `SCALE` of length.
  * Sudoku and Rubik's cube: 1, the reward for solving: every puzzle jumanji draws
    has a solution, and every partly scrambled cube is 7 turns from solved, well
    within its 20-step limit (`RubiksCube-v0`'s 100-turn scrambles are not known to
    be solvable within 200 steps: no reference).

OR-Tools is an optional dependency (`pip install mcgs-jax[bench]`); a missing solve
(time limit) is a NaN, never a wrong optimum.
"""

import math
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

# Integer scale of CP-SAT's data: 1e-7 of a unit (a weight, a value, a distance).
SCALE = 10_000_000
SOLVER_SECONDS = 60.0  # per instance; a solve that does not prove optimality is NaN
INSTALL_HINT = "pip install 'mcgs-jax[bench]' (OR-Tools)"


def _cp_model():
  """OR-Tools' `cp_model` module, or ValueError saying how to install it."""
  try:
    from ortools.sat.python import cp_model
  except ImportError as error:
    raise ValueError(
      f"exact optima need OR-Tools, which is not installed: {INSTALL_HINT}"
    ) from error
  return cp_model


def _solve(model, cp_model) -> Any:
  """The solver after an optimal solve of `model`, or None (not proven optimal)."""
  solver = cp_model.CpSolver()
  solver.parameters.max_time_in_seconds = SOLVER_SECONDS
  solver.parameters.num_workers = 1  # the same result on any machine
  status = solver.Solve(model)
  return solver if status == cp_model.OPTIMAL else None


def knapsack_optimum(weights: np.ndarray, values: np.ndarray, budget: float) -> float:
  """The largest total value (float32 sum) of items whose weights (`[n]`) fit in
  `budget`; NaN when the solver does not prove it within `SOLVER_SECONDS`."""
  cp_model = _cp_model()
  weights = np.asarray(weights, np.float64)
  values = np.asarray(values, np.float64)
  model = cp_model.CpModel()
  packed = [model.NewBoolVar(f"item_{i}") for i in range(len(weights))]
  scaled_weights = [math.ceil(w * SCALE) for w in weights]
  model.Add(sum(w * x for w, x in zip(scaled_weights, packed, strict=True)) <= int(budget * SCALE))
  model.Maximize(sum(round(v * SCALE) * x for v, x in zip(values, packed, strict=True)))
  solver = _solve(model, cp_model)
  if solver is None:
    return math.nan
  chosen = np.array([bool(solver.Value(x)) for x in packed])
  return float(np.sum(np.asarray(values, np.float32)[chosen], dtype=np.float32))


def tour_length(coordinates: np.ndarray, tour: list[int]) -> float:
  """The length (float32 legs, the return leg included) of visiting the cities of
  `coordinates` (`[n, 2]`) in the order `tour`."""
  points = np.asarray(coordinates, np.float32)[tour]
  legs = np.linalg.norm(points - np.roll(points, -1, axis=0), axis=-1).astype(np.float32)
  return float(np.sum(legs, dtype=np.float32))


def tsp_optimum(coordinates: np.ndarray) -> float:
  """The length of the shortest tour through every city of `coordinates` (`[n, 2]`);
  NaN when the solver does not prove it within `SOLVER_SECONDS`."""
  cp_model = _cp_model()
  points = np.asarray(coordinates, np.float64)
  count = len(points)
  distance = np.linalg.norm(points[:, None] - points[None], axis=-1)
  model = cp_model.CpModel()
  arcs, cost = [], []
  for i in range(count):
    for j in range(count):
      if i != j:
        arc = model.NewBoolVar(f"arc_{i}_{j}")
        arcs.append((i, j, arc))
        cost.append(round(distance[i, j] * SCALE) * arc)
  model.AddCircuit(arcs)
  model.Minimize(sum(cost))
  solver = _solve(model, cp_model)
  if solver is None:
    return math.nan
  successor = {i: j for i, j, arc in arcs if solver.Value(arc)}
  tour = [0]
  while len(tour) < count:
    tour.append(successor[tour[-1]])
  return tour_length(points, tour)


def _knapsack(env, state) -> float:
  return knapsack_optimum(state.env_state.weights, state.env_state.values, env.env.total_budget)


def _tsp(env, state) -> float:
  return -tsp_optimum(state.env_state.coordinates)


def _solvable(env, state) -> float:
  del env, state
  return 1.0


# The best return of an instance, by env id, from its unbatched initial state.
_OPTIMA: dict[str, Callable] = {
  "Knapsack-v1": _knapsack,
  "TSP-v1": _tsp,
  "Sudoku-v0": _solvable,
  "Sudoku-very-easy-v0": _solvable,
  "RubiksCube-partly-scrambled-v0": _solvable,
}
ENV_IDS = tuple(_OPTIMA)


def has_optimum(env) -> bool:
  """Whether `optimal_returns` knows the best return of `env`'s instances."""
  return getattr(env, "env_id", None) in _OPTIMA


def optimal_returns(env, states) -> np.ndarray:
  """`[B]` float: the best return of each instance, from its initial state (a batch
  of `JumanjiState`s, `[B, ...]`); NaN where the solver did not prove it. ValueError
  for an env without a reference (`ENV_IDS`)."""
  optimum = _OPTIMA.get(getattr(env, "env_id", None) or "")
  if optimum is None:
    raise ValueError(f"no exact reference for {getattr(env, 'id', env)!r}; known: {ENV_IDS}")
  host = jax.tree_util.tree_map(np.asarray, states)
  batch = int(np.shape(host.current_player)[0])
  return np.array([optimum(env, _instance(host, b)) for b in range(batch)])


def _instance(states, index: int):
  """Instance `index` of a batch of states (numpy leaves)."""
  return jax.tree_util.tree_map(lambda leaf: leaf[index], states)
