"""Side-by-side speed of `mctx.muzero_policy` and `mcgs_jax.muzero_policy`.

Same pgx game, same small flax network (a random MLP 64-64), same batch of positions,
same B and S, in one process: mctx, ours in tree mode, ours in graph mode. What it
measures (each part is one group; inside a group every configuration is compiled
and warmed up first, then the timed runs go round-robin over the configurations, so
a change of load on a shared machine hits all of them alike; the median of
`--repeats` runs is reported):

  * throughput (`--batch-sizes`, `--simulations`): simulations per second, as a
    ratio to mctx in the same group, and the compile time;
  * S-scaling (`--scaling-batch-size`, `--scaling-simulations`): how the cost of
    one simulation grows from the smallest S to the largest (capacity S + 1);
  * capacity (`--capacities`, at `--capacity-simulations` and
    `--capacity-batch-size`): the same search with a larger graph, so the cost of
    one simulation against capacity alone, depth fixed (tree and graph mode), each
    allocating new tables and recycling the previous search's (`recycle=`, donated);
  * probe window (`--probe-windows`, graph mode at `--probe-batch-size` and
    `--probe-simulations`): time, transposition hits and dropped inserts per
    window size, as an A/B;
  * memory (`--memory GAMES`): bytes per node and per game of a graph search of
    each game, stored observation or not (`make_game(store_observation=...)`), from
    the compiled program's own memory analysis, and the largest B x capacity that
    fits in `--memory-budget-gb`.

Every timed row of ours also says how far the playouts went: `edge_steps` (mean edges
counted per playout, `sum N(n, a) / (B S)`), `deepest` (mean over games of the
deepest node's distance from the root) and `ns_per_edge_step` (run time per counted
edge step, all games together), so that cost growth from longer paths is told
apart from cost growth per step.

`--markdown FILE` writes the tables as in benchmarks/RESULTS.md (ratios first);
`--json FILE` the rows (`"partial": false`; after Ctrl-C, the rows measured so far
with `"partial": true`, then exit status 130). Before any work, each group's graphs
are estimated from its batch, capacities, actions and stored state
(`check_run_memory`): a group that cannot fit is refused with the estimate (exit
status 2, one line), one near the limit warns. Needs the `bench` extra (mctx, pgx,
flax).

This module runs the measurements (`run`); the searches and their timing are in
`timing`, the memory checks and the memory part in `memory`, the tables in `tables`,
and the command (its parser and `main`) is `mcgs_jax.apps.cli.bench_command`;
`mcgs_jax.apps.benchmark` exports their public names (`__all__`).
"""

import dataclasses
import functools
from collections.abc import Callable, Sequence

import jax
import numpy as np

from mcgs_jax.apps.benchmark.memory import (
  check_run_memory,
  planned_groups,
)
from mcgs_jax.apps.benchmark.timing import (
  IMPLEMENTATIONS,
  make_policy,
  path_statistics,
  random_positions,
  time_group,
)


def run(
  *,
  game_id: str = "connect_four",
  batch_sizes=(1024,),
  simulations=(64,),
  scaling_batch_size: int = 64,
  scaling_simulations=(64, 1024),
  capacities: Sequence[int] = (),
  capacity_simulations: int = 64,
  capacity_batch_size: int = 64,
  probe_windows: Sequence[int] = (),
  probe_batch_size: int = 1024,
  probe_simulations: int = 64,
  repeats: int = 3,
  seed: int = 0,
  max_children: int | None = None,
  progress=print,
):
  """Measures every part (see the module doc); returns a list of result rows.

  Each row has `kind` (`throughput`, `scaling`, `capacity` or `probe_window`),
  `impl`, `batch_size`, `num_simulations`, `capacity`, `probe_window` (None for
  mctx and for the default), `compile_s`, `run_s`, `sims_per_s`, and a ratio:
  `speedup_vs_mctx` (throughput, scaling), `cost_vs_smallest` (capacity: per
  simulation, against the smallest capacity of the same impl) or `time_vs_first`
  (probe windows, against the first window given). Graph-mode rows also carry the
  mean nodes, transposition hits, dropped inserts and capacity overflows per game.
  `max_children`: compact edges (`GraphOptions.max_children`) in every search of
  ours; None keeps dense edge tables.

  Raises:
    memory_estimates.InsufficientMemoryError: (a `ValueError`) before any work, when a group's
      searches cannot fit in the memory available (`check_run_memory`).
  """
  from mcgs_jax.apps.registry import game_from_spec

  check_run_memory(
    game_from_spec(game_id),
    planned_groups(
      batch_sizes=batch_sizes,
      simulations=simulations,
      scaling_batch_size=scaling_batch_size,
      scaling_simulations=scaling_simulations,
      capacities=capacities,
      capacity_batch_size=capacity_batch_size,
      probe_windows=probe_windows,
      probe_batch_size=probe_batch_size,
      probe_simulations=probe_simulations,
    ),
  )
  network_key, positions_key, search_key = jax.random.split(jax.random.PRNGKey(seed), 3)
  game, params = network_game(game_id, network_key)
  measure = functools.partial(
    _measure_group, game, params, search_key, positions_key, repeats, max_children
  )
  rows = []

  def finish(group):
    for row in group:
      rows.append(row)
      progress(row)

  for batch_size in batch_sizes:
    for num_simulations in simulations:
      finish(_throughput_group(measure, batch_size, num_simulations))
  if scaling_simulations:
    finish(_scaling_group(measure, scaling_batch_size, scaling_simulations))
  if capacities:
    finish(_capacity_group(measure, capacities, capacity_simulations, capacity_batch_size))
  if probe_windows:
    finish(_probe_window_group(measure, probe_windows, probe_simulations, probe_batch_size))
  return rows


def network_game(game_id: str, rng_key):
  """`(game, params)`: `game_id` with a random MLP 64-64 as its evaluator."""
  from mcgs_jax.apps.registry import game_from_spec, make_evaluator
  from mcgs_jax.games.networks import init_network

  game = game_from_spec(game_id)  # the one `main` checked
  apply_fn, params = init_network(game.env, rng_key, hidden=(64, 64))
  evaluator = make_evaluator("network", game.env, apply_fn=apply_fn)
  return dataclasses.replace(game, evaluator=evaluator), params


def _measure_group(
  game,
  params,
  search_key,
  positions_key,
  repeats: int,
  max_children: int | None,
  kind: str,
  configs,
  batch_size,
  recycling=(),
) -> list[dict]:
  """Times one group (`time_group`) on `batch_size` random positions; returns its rows.

  `configs`: `{label: (impl, num_simulations, capacity, probe_window)}`;
  `recycling`: the labels whose searches recycle the previous graph.
  """
  policies = {}
  for label, (impl, num_simulations, capacity, probe_window) in configs.items():
    options = {}
    if capacity is not None:
      options["capacity"] = capacity
    if probe_window is not None:
      options["probe_window"] = probe_window
    if max_children is not None and impl != "mctx":
      options["max_children"] = max_children
    policies[label] = make_policy(
      game, impl, num_simulations, recycle=label in recycling, **options
    )
  state = random_positions(game, positions_key, batch_size, max_opening_moves=8)
  timings = time_group(policies, params, search_key, state, repeats, recycling=recycling)
  group = []
  for label, (impl, num_simulations, capacity, probe_window) in configs.items():
    compile_seconds, seconds, output = timings[label]
    row = dict(
      kind=kind,
      impl=impl,
      recycle=label in recycling,
      batch_size=batch_size,
      num_simulations=num_simulations,
      capacity=capacity
      if capacity is not None
      else (None if impl == "mctx" else num_simulations + 1),
      probe_window=probe_window,
      compile_s=round(compile_seconds, 2),
      run_s=round(seconds, 4),
      sims_per_s=round(batch_size * num_simulations / seconds, 1),
    )
    if impl != "mctx":
      row.update(path_statistics(output, seconds))
    if impl == "graph":
      row.update(_graph_counters(output))
    group.append(row)
  return group


def _graph_counters(output) -> dict:
  """The mean nodes, transposition hits, dropped inserts and capacity overflows per
  game of a graph-mode search's output."""
  graph = output.search_graph
  return dict(
    mean_nodes=round(float(np.mean(graph.num_nodes)), 1),
    mean_transposition_hits=round(float(np.mean(graph.transposition_hits)), 2),
    mean_dropped_inserts=round(float(np.mean(graph.dropped_inserts)), 3),
    mean_capacity_overflows=round(float(np.mean(graph.capacity_overflows)), 3),
  )


def _throughput_group(measure: Callable, batch_size: int, num_simulations: int) -> list[dict]:
  """The three implementations at one B and S, with their speed against mctx."""
  group = measure(
    "throughput",
    {impl: (impl, num_simulations, None, None) for impl in IMPLEMENTATIONS},
    batch_size,
  )
  mctx_seconds = group[0]["run_s"]
  for row in group:
    row["speedup_vs_mctx"] = round(mctx_seconds / row["run_s"], 2)
  return group


def _scaling_group(measure: Callable, batch_size: int, simulations: Sequence[int]) -> list[dict]:
  """The three implementations at every S, with their speed against mctx at that S."""
  group = measure(
    "scaling",
    {(impl, s): (impl, s, None, None) for s in simulations for impl in IMPLEMENTATIONS},
    batch_size,
  )
  for row in group:
    mctx_row = next(
      r for r in group if r["impl"] == "mctx" and r["num_simulations"] == row["num_simulations"]
    )
    row["speedup_vs_mctx"] = round(mctx_row["run_s"] / row["run_s"], 2)
  return group


def _probe_window_group(
  measure: Callable, probe_windows: Sequence[int], num_simulations: int, batch_size: int
) -> list[dict]:
  """Graph mode at every probe window, with the time against the first window."""
  group = measure(
    "probe_window",
    {w: ("graph", num_simulations, None, w) for w in probe_windows},
    batch_size,
  )
  for row in group:
    row["time_vs_first"] = round(row["run_s"] / group[0]["run_s"], 2)
  return group


def _capacity_group(
  measure: Callable, capacities: Sequence[int], num_simulations: int, batch_size: int
) -> list[dict]:
  """Tree and graph mode at every capacity, new tables and recycled ones, with the
  cost against the smallest capacity of the same kind."""
  for capacity in capacities:
    if capacity < num_simulations + 1:
      raise ValueError(f"capacity {capacity} is below S + 1 = {num_simulations + 1}")
  configs = {
    (impl, c, recycle): (impl, num_simulations, c, None)
    for c in capacities
    for impl in ("tree", "graph")
    for recycle in (False, True)
  }
  group = measure(
    "capacity", configs, batch_size, recycling=tuple(label for label in configs if label[2])
  )
  for row in group:
    smallest = min(
      (r for r in group if (r["impl"], r["recycle"]) == (row["impl"], row["recycle"])),
      key=lambda r: r["capacity"],
    )
    row["cost_vs_smallest"] = round(row["run_s"] / smallest["run_s"], 2)
  return group
