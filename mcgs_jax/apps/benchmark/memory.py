"""The memory of `mcgs-jax bench`: the groups a run will time (`planned_groups`),
refused before any work when their graphs cannot fit (`check_run_memory`), and the
memory part's rows (`memory_rows`: bytes per node of a graph search per game)."""

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax

from mcgs_jax.apps import memory_estimates
from mcgs_jax.apps.benchmark.timing import IMPLEMENTATIONS, make_policy


@dataclasses.dataclass(frozen=True)
class PlannedGroup:
  """A group `run` will time: its part, the flags that size it, its batch size and
  the capacity of each of its searches (mctx's tree: `S + 1` nodes)."""

  part: str
  flags: str
  batch_size: int
  capacities: tuple[int, ...]


def planned_groups(
  *,
  batch_sizes: Sequence[int],
  simulations: Sequence[int],
  scaling_batch_size: int,
  scaling_simulations: Sequence[int],
  capacities: Sequence[int],
  capacity_batch_size: int,
  probe_windows: Sequence[int],
  probe_batch_size: int,
  probe_simulations: int,
) -> list[PlannedGroup]:
  """The groups `run` times with these arguments (its keywords; the capacity part's
  graphs are sized by `capacities` alone), in its order."""
  implementations = len(IMPLEMENTATIONS)
  groups = [
    PlannedGroup("throughput", "--batch-sizes or --simulations", b, (s + 1,) * implementations)
    for b in batch_sizes
    for s in simulations
  ]
  if scaling_simulations:
    groups.append(
      PlannedGroup(
        "scaling",
        "--scaling-batch-size or --scaling-simulations",
        scaling_batch_size,
        tuple(s + 1 for s in scaling_simulations for _ in IMPLEMENTATIONS),
      )
    )
  if capacities:
    # Tree and graph mode, new tables and recycled ones, at every capacity.
    groups.append(
      PlannedGroup(
        "capacity",
        "--capacity-batch-size or --capacities",
        capacity_batch_size,
        tuple(c for c in capacities for _ in range(4)),
      )
    )
  if probe_windows:
    groups.append(
      PlannedGroup(
        "probe-window",
        "--probe-batch-size or --probe-simulations",
        probe_batch_size,
        (probe_simulations + 1,) * len(probe_windows),
      )
    )
  return groups


def check_run_memory(game, groups: Sequence[PlannedGroup], available: int | None = None) -> None:
  """`memory_estimates.InsufficientMemoryError` (a `ValueError`) naming the estimate when a
  group's searches cannot fit in the memory available (`memory_estimates.check_memory`); a
  warning on stderr for one near it. A group keeps the last result of every search it
  times (one graph each) while one search runs (`memory_estimates.GRAPHS_PER_SEARCH` graphs of
  the largest); each graph is sized by `memory_estimates.graph_bytes` from the group's batch,
  the search's capacity, the game's actions and its stored state."""
  state = jax.eval_shape(lambda key: game.init(key, 1), jax.random.PRNGKey(0))
  for group in groups:
    graphs = [
      memory_estimates.graph_bytes(game, state, capacity, batch_size=group.batch_size)
      for capacity in group.capacities
    ]
    memory_estimates.check_memory(
      {
        f"{len(graphs)} results kept": sum(graphs),
        "the running search's copies": (memory_estimates.GRAPHS_PER_SEARCH - 1) * max(graphs),
      },
      owner=f"the benchmark's {group.part} part (B {group.batch_size})",
      users="searches",
      held="its searches' graphs",
      advice=f"a smaller {group.flags}",
      available=available,
    )


def memory_rows(
  game_ids: Sequence[str],
  *,
  budget_bytes: float,
  batch_size: int = 8,
  capacities=(129, 513),
  num_simulations: int = 16,
  progress=print,
):
  """Memory of a graph-mode search per game, with and without stored observations.

  For each game and `store_observation` in (True, False), compiles the search at
  two capacities and reads the program's memory analysis (output, the graph, plus
  temporaries; arguments aside): `bytes_per_node` is the growth per node of one game,
  `bytes_per_game` what a game costs besides its nodes, `state_bytes` the stored
  embedding of one node (part of `bytes_per_node`), and `max_nodes` the most
  `B x capacity` whose graphs fit in `budget_bytes`.
  """
  from mcgs_jax.games.adapter import make_game

  rows = []
  low, high = capacities
  for game_id in game_ids:
    for store_observation in (True, False):
      game = make_game(game_id, store_observation=store_observation)
      state = game.init(jax.random.PRNGKey(0), batch_size)
      totals = {}
      for capacity in capacities:
        policy: Any = make_policy(game, "graph", num_simulations, capacity=capacity)
        analysis = policy.lower(None, jax.random.PRNGKey(0), state).compile().memory_analysis()
        totals[capacity] = analysis.output_size_in_bytes + analysis.temp_size_in_bytes
      per_node = (totals[high] - totals[low]) / (batch_size * (high - low))
      per_game = totals[low] / batch_size - low * per_node
      stored = jax.tree_util.tree_leaves(game.stored(state))
      state_bytes = sum(leaf.nbytes for leaf in stored) // batch_size
      row = dict(
        kind="memory",
        game=game_id,
        store_observation=store_observation,
        num_actions=game.num_actions,
        bytes_per_node=round(per_node),
        state_bytes=state_bytes,
        bytes_per_game=round(per_game),
        max_nodes=int(budget_bytes // per_node),
        budget_gb=budget_bytes / 1e9,
      )
      rows.append(row)
      progress(row)
  return rows
