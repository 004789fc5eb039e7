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
"""

import contextlib
import dataclasses
import datetime
import functools
import json
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.extend.backend
import numpy as np

from mcgs_jax._src.per_game import where_per_game
from mcgs_jax.apps import files, memory, partial

IMPLEMENTATIONS = ("mctx", "tree", "graph")


def random_positions(game, rng_key, batch_size: int, max_opening_moves: int):
  """`batch_size` positions after 0..`max_opening_moves` random legal moves (a game
  that would end stays at the position before its last move)."""
  from mcgs_jax.games.evaluators import random_legal_actions

  init_key, moves_key, length_key = jax.random.split(rng_key, 3)
  state = game.init(init_key, batch_size)
  lengths = jax.random.randint(length_key, (batch_size,), 0, max_opening_moves + 1)

  def play(step, carry):
    state, key = carry
    key, move_key = jax.random.split(key)
    action = random_legal_actions(jax.random.split(move_key, batch_size), state.legal_action_mask)
    moved = game.step(state, action)
    keep = (step < lengths) & ~moved.terminated
    state = where_per_game(keep, moved, state)
    return state, key

  state, _ = jax.lax.fori_loop(0, max_opening_moves, play, (state, moves_key))
  return state


def make_policy(
  game, impl: str, num_simulations: int, *, recycle: bool = False, **graph_options
) -> Callable:
  """`impl`'s muzero policy, `(params, key, state) -> PolicyOutput`, jitted.

  `impl` is `"mctx"`, `"tree"` (ours, `transpositions=False`) or `"graph"` (ours,
  with the game's transposition key); `graph_options` (`capacity`, `probe_window`,
  ...) go to ours. With `recycle` (ours only), the policy takes a fourth argument,
  the previous output's `search_graph` (or None), which it recycles and donates.
  """
  if impl == "mctx":
    import mctx

    def theirs(params, key, state):
      root = game.root(params, key, state)
      return mctx.muzero_policy(
        params,
        key,
        mctx.RootFnOutput(
          prior_logits=root.prior_logits, value=root.value, embedding=root.embedding
        ),
        game.recurrent_fn,
        num_simulations,
        invalid_actions=game.invalid_actions(state),
      )

    return jax.jit(theirs)
  if impl not in ("tree", "graph"):
    raise ValueError(f"unknown implementation {impl!r}; expected one of {IMPLEMENTATIONS}")
  from mcgs_jax.apps.registry import POLICIES

  def ours(params, key, state, recycled=None):
    root = game.root(params, key, state)
    return POLICIES["muzero"](
      params,
      key,
      root,
      game.recurrent_fn,
      num_simulations,
      invalid_actions=game.invalid_actions(state),
      hash_fn=game.hash_fn,
      transpositions=impl == "graph",
      recycle=recycled,
      **graph_options,
    )

  return jax.jit(ours, donate_argnames="recycled") if recycle else jax.jit(ours)


def time_policy(policy, params, key, state, repeats: int):
  """`(compile seconds, median run seconds)` of one policy on its own."""
  start = time.perf_counter()
  compiled = policy.lower(params, key, state).compile()
  compile_seconds = time.perf_counter() - start
  jax.block_until_ready(compiled(params, key, state))
  runs = []
  for repeat in range(repeats):
    run_key = jax.random.fold_in(key, repeat)
    start = time.perf_counter()
    jax.block_until_ready(compiled(params, run_key, state).action)
    runs.append(time.perf_counter() - start)
  return compile_seconds, statistics.median(runs)


def time_group(policies: dict, params, key, state, repeats: int, recycling=()) -> dict:
  """Times several policies on the same inputs, interleaved.

  Every policy is compiled and run once (warm-up) first; then `repeats` rounds each
  run every policy once, in order. A policy named in `recycling` (made with
  `make_policy(..., recycle=True)`) is handed its previous output's graph at every
  run; its warm-up runs twice (a first graph, then the recycling program).
  Returns `{name: (compile seconds, median run seconds, output of the last run)}`.
  """
  compiled, compile_seconds, outputs = {}, {}, {}
  for name, policy in policies.items():
    extra: tuple = ()
    if name in recycling:
      extra = (jax.block_until_ready(policy(params, key, state)).search_graph,)
    start = time.perf_counter()
    compiled[name] = policy.lower(params, key, state, *extra).compile()
    compile_seconds[name] = time.perf_counter() - start
    outputs[name] = jax.block_until_ready(compiled[name](params, key, state, *extra))
  runs: dict[str, list] = {name: [] for name in policies}
  for repeat in range(repeats):
    run_key = jax.random.fold_in(key, repeat)
    for name in policies:
      extra = (outputs[name].search_graph,) if name in recycling else ()
      start = time.perf_counter()
      outputs[name] = jax.block_until_ready(compiled[name](params, run_key, state, *extra))
      runs[name].append(time.perf_counter() - start)
  return {
    name: (compile_seconds[name], statistics.median(runs[name]), outputs[name]) for name in policies
  }


def deepest_nodes(children_index) -> np.ndarray:
  """`[B]`: per game, the largest distance (in edges, along shortest paths) from the
  root to a node reachable through `children_index` `[B, N, A]`."""
  children_index = np.asarray(children_index)
  result = np.zeros(children_index.shape[0], np.int64)
  for game, children in enumerate(children_index):
    seen = np.zeros(children.shape[0], bool)
    seen[0] = True
    frontier, depth = np.array([0]), 0
    while True:
      nodes = np.unique(children[frontier].ravel())
      nodes = nodes[nodes >= 0]
      nodes = nodes[~seen[nodes]]
      if not nodes.size:
        break
      seen[nodes] = True
      frontier, depth = nodes, depth + 1
    result[game] = depth
  return result


def path_statistics(output, run_seconds: float) -> dict:
  """How far the playouts of one search went (see the module doc)."""
  graph = output.search_graph
  steps = float(np.sum(np.asarray(graph.edge_visits), dtype=np.int64))
  playouts = float(np.sum(np.asarray(graph.playouts_started), dtype=np.int64))
  return dict(
    edge_steps=round(steps / max(playouts, 1), 2),
    deepest=round(float(np.mean(deepest_nodes(graph.children_index))), 1),
    ns_per_edge_step=round(run_seconds * 1e9 / max(steps, 1), 1),
  )


def _graph_counters(output) -> dict:
  graph = output.search_graph
  return dict(
    mean_nodes=round(float(np.mean(graph.num_nodes)), 1),
    mean_transposition_hits=round(float(np.mean(graph.transposition_hits)), 2),
    mean_dropped_inserts=round(float(np.mean(graph.dropped_inserts)), 3),
    mean_capacity_overflows=round(float(np.mean(graph.capacity_overflows)), 3),
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

  Raises:
    memory.InsufficientMemoryError: (a `ValueError`) before any work, when a group's
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
  game, params = _network_game(game_id, network_key)
  measure = functools.partial(_measure_group, game, params, search_key, positions_key, repeats)
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
    group = measure(
      "probe_window",
      {w: ("graph", probe_simulations, None, w) for w in probe_windows},
      probe_batch_size,
    )
    for row in group:
      row["time_vs_first"] = round(row["run_s"] / group[0]["run_s"], 2)
    finish(group)
  return rows


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
  """`memory.InsufficientMemoryError` (a `ValueError`) naming the estimate when a
  group's searches cannot fit in the memory available (`memory.check_memory`); a
  warning on stderr for one near it. A group keeps the last result of every search it
  times (one graph each) while one search runs (`memory.GRAPHS_PER_SEARCH` graphs of
  the largest); each graph is sized by `memory.graph_bytes` from the group's batch,
  the search's capacity, the game's actions and its stored state."""
  state = jax.eval_shape(lambda key: game.init(key, 1), jax.random.PRNGKey(0))
  for group in groups:
    graphs = [
      memory.graph_bytes(game, state, capacity, batch_size=group.batch_size)
      for capacity in group.capacities
    ]
    memory.check_memory(
      {
        f"{len(graphs)} results kept": sum(graphs),
        "the running search's copies": (memory.GRAPHS_PER_SEARCH - 1) * max(graphs),
      },
      owner=f"the benchmark's {group.part} part (B {group.batch_size})",
      users="searches",
      held="its searches' graphs",
      advice=f"a smaller {group.flags}",
      available=available,
    )


def _network_game(game_id: str, rng_key):
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


def scaling_table(rows, scaling_simulations):
  """Per-simulation cost at the largest S relative to the smallest, per impl."""
  low, high = min(scaling_simulations), max(scaling_simulations)
  result = {}
  for name in IMPLEMENTATIONS:
    per_sim = {
      r["num_simulations"]: r["run_s"] / r["num_simulations"]
      for r in rows
      if r["kind"] == "scaling" and r["impl"] == name
    }
    if low in per_sim and high in per_sim:
      result[name] = round(per_sim[high] / per_sim[low], 2)
  return result


def environment() -> dict[str, str]:
  """Versions and hardware, for the header of a results section."""
  versions = {"jax": jax.__version__}
  for module in ("mctx", "pgx", "flax"):
    try:
      versions[module] = __import__(module).__version__
    except (ImportError, AttributeError):
      versions[module] = "?"
  device = jax.devices()[0]
  return dict(
    platform=device.platform,
    device=getattr(device, "device_kind", ""),
    cpu=platform.processor() or platform.machine(),
    cpu_count=str(os.cpu_count()),
    **versions,
  )


def markdown(rows, scaling, header: str) -> str:
  """The tables of a run, in RESULTS.md's format."""
  lines = [header]
  lines += _throughput_lines(rows)
  lines += _scaling_lines(rows, scaling)
  lines += _capacity_lines(rows)
  lines += _path_lines(rows)
  lines += _memory_lines(rows)
  lines += _probe_window_lines(rows)
  return "\n".join(lines)


def _throughput_lines(rows) -> list[str]:
  """The throughput table."""
  lines: list[str] = []
  throughput = [r for r in rows if r["kind"] == "throughput"]
  if throughput:
    lines += [
      "",
      "| impl | B | S | compile s | run s | sims/s | speed vs mctx |",
      "|---|---|---|---|---|---|---|",
    ]
    lines += [
      f"| {r['impl']} | {r['batch_size']} | {r['num_simulations']} | "
      f"{r['compile_s']} | {r['run_s']} | {r['sims_per_s']:.0f} | "
      f"{r['speedup_vs_mctx']}x |"
      for r in throughput
    ]
  return lines


def _scaling_lines(rows, scaling) -> list[str]:
  """The S-scaling table (with `scaling`, `scaling_table`'s ratios)."""
  lines: list[str] = []
  scaling_rows = [r for r in rows if r["kind"] == "scaling"]
  if scaling_rows and scaling:
    sims = sorted({r["num_simulations"] for r in scaling_rows})
    low, high = sims[0], sims[-1]
    batch = scaling_rows[0]["batch_size"]
    lines += [
      "",
      f"Per-simulation cost at S={high} relative to S={low} (B={batch}, capacity S + 1):",
      "",
      f"| impl | run s, S={low} | run s, S={high} | cost ratio per simulation | "
      "cost ratio per edge step |",
      "|---|---|---|---|---|",
    ]
    for name, ratio in scaling.items():
      by_s = {r["num_simulations"]: r for r in scaling_rows if r["impl"] == name}
      per_step = (
        "-"
        if "ns_per_edge_step" not in by_s[low]
        else f"{by_s[high]['ns_per_edge_step'] / by_s[low]['ns_per_edge_step']:.2f}x"
      )
      lines.append(
        f"| {name} | {by_s[low]['run_s']} | {by_s[high]['run_s']} | {ratio}x | {per_step} |"
      )
  return lines


def _capacity_lines(rows) -> list[str]:
  """The capacity table."""
  lines: list[str] = []
  capacity_rows = [r for r in rows if r["kind"] == "capacity"]
  if capacity_rows:
    first = capacity_rows[0]
    smallest = min(r["capacity"] for r in capacity_rows)
    lines += [
      "",
      f"Capacity alone (S={first['num_simulations']} fixed, "
      f"B={first['batch_size']}): per-simulation cost relative to capacity "
      f"{smallest}:",
      "",
      f"| impl | tables | capacity | run s | cost vs capacity {smallest} | nodes used (mean) |",
      "|---|---|---|---|---|---|",
    ]
    for impl in ("tree", "graph"):
      for recycle in (False, True):
        same = (r for r in capacity_rows if (r["impl"], r["recycle"]) == (impl, recycle))
        for r in sorted(same, key=lambda r: r["capacity"]):
          nodes = r.get("mean_nodes", "-")
          tables = "recycled" if recycle else "new"
          lines.append(
            f"| {impl} | {tables} | {r['capacity']} | {r['run_s']} | "
            f"{r['cost_vs_smallest']}x | {nodes} |"
          )
  return lines


def _path_lines(rows) -> list[str]:
  """How far the playouts went."""
  lines: list[str] = []
  path_rows = [r for r in rows if "edge_steps" in r]
  if path_rows:
    lines += [
      "",
      "How far the playouts went (ours; `edge steps`: mean edges counted per "
      "playout; `deepest`: mean over games of the deepest node's depth):",
      "",
      "| part | impl | B | S | capacity | edge steps | deepest | ns per edge step |",
      "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
      f"| {r['kind']} | {r['impl']}{' (recycled)' if r.get('recycle') else ''} | "
      f"{r['batch_size']} | {r['num_simulations']} | "
      f"{r['capacity']} | {r['edge_steps']} | {r['deepest']} | "
      f"{r['ns_per_edge_step']} |"
      for r in path_rows
    ]
  return lines


def _memory_lines(rows) -> list[str]:
  """The memory table."""
  lines: list[str] = []
  memory = [r for r in rows if r["kind"] == "memory"]
  if memory:
    budget = memory[0]["budget_gb"]
    lines += [
      "",
      "Memory of a graph-mode search (compiled program's output + temporaries; "
      f"largest B x capacity within {budget:g} GB):",
      "",
      "| game | A | observation stored | bytes per node | of which state | "
      "bytes per game | max B x capacity | capacity at B=1024 |",
      "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
      f"| {r['game']} | {r['num_actions']} | {'yes' if r['store_observation'] else 'no'} | "
      f"{r['bytes_per_node']} | {r['state_bytes']} | {r['bytes_per_game']} | "
      f"{r['max_nodes'] / 1e6:.3g}M | {r['max_nodes'] // 1024} |"
      for r in memory
    ]
  return lines


def _probe_window_lines(rows) -> list[str]:
  """The probe-window table."""
  lines: list[str] = []
  probe_rows = [r for r in rows if r["kind"] == "probe_window"]
  if probe_rows:
    first = probe_rows[0]
    lines += [
      "",
      f"Probe window A/B (graph mode, B={first['batch_size']}, "
      f"S={first['num_simulations']}), time relative to window "
      f"{first['probe_window']}:",
      "",
      f"| probe window | run s | time vs window {first['probe_window']} | "
      "transposition hits (mean) | dropped inserts (mean) |",
      "|---|---|---|---|---|",
    ]
    lines += [
      f"| {r['probe_window']} | {r['run_s']} | {r['time_vs_first']}x | "
      f"{r['mean_transposition_hits']} | {r['mean_dropped_inserts']} |"
      for r in probe_rows
    ]
  return lines


def build_parser():
  """The `mcgs-jax bench` parser."""
  from mcgs_jax.apps.cli_args import (
    OneLineErrorParser,
    int_at_least,
  )

  positive = int_at_least(1, 1_000_000)
  parser = OneLineErrorParser(prog="mcgs-jax bench", description=__doc__.split("\n", maxsplit=1)[0])
  parser.add_argument("--game", default="connect_four")
  parser.add_argument(
    "--batch-sizes",
    default="1024",
    help="comma-separated batch sizes of the throughput part, or 'none' to skip it (default 1024)",
  )
  parser.add_argument("--simulations", default="64", help="comma-separated S (default 64)")
  parser.add_argument("--scaling-batch-size", type=positive, default=64)
  parser.add_argument(
    "--scaling-simulations",
    default="64,1024",
    help="comma-separated S of the S-scaling part, or 'none' (default 64,1024)",
  )
  parser.add_argument(
    "--capacities",
    default="none",
    help="comma-separated graph capacities at fixed S, e.g. "
    "65,1025,4097: per-simulation cost against capacity, with "
    "new tables and with the previous search's recycled (default: none)",
  )
  parser.add_argument(
    "--capacity-simulations", type=positive, default=64, help="S of the capacity part (default 64)"
  )
  parser.add_argument(
    "--capacity-batch-size", type=positive, default=64, help="B of the capacity part (default 64)"
  )
  parser.add_argument(
    "--probe-windows",
    default="none",
    help="comma-separated probe windows to compare in graph mode, e.g. 8,16 (default: none)",
  )
  parser.add_argument(
    "--probe-batch-size",
    type=positive,
    help="B of the probe-window part (default: the first of --batch-sizes, else 1024)",
  )
  parser.add_argument(
    "--probe-simulations",
    type=positive,
    help="S of the probe-window part (default: the first of --simulations)",
  )
  parser.add_argument(
    "--memory",
    default="none",
    help="comma-separated games whose memory per node to report, e.g. "
    "connect_four,chess (default: none)",
  )
  parser.add_argument(
    "--memory-budget-gb",
    type=float,
    default=80.0,
    help="device memory for the largest B x capacity (default 80)",
  )
  parser.add_argument(
    "--one-core",
    action="store_true",
    help="pin this process to one CPU core before JAX starts (Linux): "
    "XLA's CPU runtime then runs the search's small operations "
    "one after another on that core instead of spreading them "
    "over every core",
  )
  parser.add_argument(
    "--repeats",
    type=positive,
    default=3,
    help="timed runs per configuration; the median is reported",
  )
  parser.add_argument("--seed", type=int_at_least(0, 2**32 - 1), default=0)
  parser.add_argument(
    "--quick", action="store_true", help="B=64, S=16, scaling S=16,128: a one-minute smoke run"
  )
  parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
  parser.add_argument("--markdown", metavar="FILE", help="also write the tables here")
  return parser


def _int_list(parser, text: str, flag: str) -> tuple[int, ...]:
  """The comma-separated integers of `flag` (in [1, 1000000]; `none`: no values)."""
  if text.strip().lower() in ("", "none"):
    return ()
  try:
    values = tuple(int(v) for v in text.split(","))
  except ValueError:
    parser.error(f"{flag}: expected comma-separated integers, got {text!r}")
  if any(v < 1 or v > 1_000_000 for v in values):
    parser.error(f"{flag}: expected integers from 1 to 1000000, got {text!r}")
  return values


def _run_arguments(parser, args) -> dict[str, Any]:
  """`run`'s keywords from the parsed flags (bad values: `parser.error`)."""
  batch_sizes = _int_list(parser, args.batch_sizes, "--batch-sizes")
  simulations = _int_list(parser, args.simulations, "--simulations") or (64,)
  scaling_simulations = _int_list(parser, args.scaling_simulations, "--scaling-simulations")
  capacities = _int_list(parser, args.capacities, "--capacities")
  probe_windows = _int_list(parser, args.probe_windows, "--probe-windows")
  scaling_batch_size = args.scaling_batch_size
  if args.quick:
    batch_sizes, simulations, scaling_simulations, scaling_batch_size = (64,), (16,), (16, 128), 16
  if capacities and min(capacities) < args.capacity_simulations + 1:
    parser.error(
      f"--capacities: each must be at least --capacity-simulations + 1 = "
      f"{args.capacity_simulations + 1}"
    )
  return dict(
    game_id=args.game,
    batch_sizes=batch_sizes,
    simulations=simulations,
    scaling_batch_size=scaling_batch_size,
    scaling_simulations=scaling_simulations,
    capacities=capacities,
    capacity_simulations=args.capacity_simulations,
    capacity_batch_size=args.capacity_batch_size,
    probe_windows=probe_windows,
    probe_batch_size=args.probe_batch_size or (batch_sizes or (1024,))[0],
    probe_simulations=args.probe_simulations or simulations[0],
    repeats=args.repeats,
    seed=args.seed,
  )


def _pin_to_one_core(parser) -> None:
  """`--one-core`: this process, and the threads it starts from now on, on one CPU."""
  if not hasattr(os, "sched_setaffinity"):
    parser.error("--one-core needs Linux (os.sched_setaffinity)")
  os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
  # The pin holds for threads started from now on: a CPU client made before it
  # keeps its threads on every core, so the next computation makes a new one.
  jax.extend.backend.clear_backends()


def _check_games_and_paths(parser, args, memory_games: list[str]) -> None:
  """`parser.error` for a game that cannot be timed, an output file in no
  directory, or a missing package of the bench extra; before any work."""
  from mcgs_jax.apps.registry import game_from_spec
  from mcgs_jax.games.adapter import Game, make_game

  try:
    if not isinstance(game_from_spec(args.game), Game):
      parser.error(f"--game {args.game}: a game with chance; time it with mcgs-jax play")
  except (ValueError, ImportError) as error:
    parser.error(f"--game: {' '.join(str(error).split())}")
  for path_flag, path in (("--json", args.json), ("--markdown", args.markdown)):
    try:
      files.check_output_path(path_flag, path)
    except ValueError as error:
      parser.error(str(error))
  for name in memory_games:
    try:
      make_game(name)
    except (ValueError, ImportError) as error:
      parser.error(f"--memory: {error}")
  try:
    import flax  # noqa: F401
    import mctx  # noqa: F401
    import pgx  # noqa: F401
  except ImportError as error:
    parser.exit(
      2, f"mcgs-jax bench: needs the bench extra (pip install 'mcgs-jax[bench]'): {error}\n"
    )


def _write_tables(args, rows: list, scaling: dict) -> None:
  """Prints the tables (and writes `--markdown`, `--json`)."""
  env = environment()
  cores = f"pinned to 1 of {env['cpu_count']} CPUs" if args.one_core else f"{env['cpu_count']} CPUs"
  header = (
    f"### {args.game}, {datetime.date.today()}, {env['platform']} "
    f"({env['device']}), {env['cpu']}, {cores}, jax {env['jax']}, "
    f"mctx {env['mctx']}, pgx {env['pgx']}, flax {env['flax']}; median of "
    f"{args.repeats} interleaved runs"
  )
  text = markdown(rows, scaling, header)
  print(text)
  if args.markdown:
    files.write_atomically(args.markdown, text + "\n")
  if args.json:
    payload = {"rows": rows, "scaling": scaling, "environment": env, "partial": False}
    files.write_atomically(args.json, json.dumps(payload, indent=1))


def _partial_json(args, rows: list, scaling_simulations: Sequence[int]):
  """With `--json FILE`, a `partial.partial_result` block that writes the rows measured
  so far (`rows`, filled as they are measured) to FILE after Ctrl-C; else a block
  that does nothing."""
  if not args.json:
    return contextlib.nullcontext()

  def payload_so_far() -> dict[str, Any]:
    measured = list(rows)
    scaling = scaling_table(measured, scaling_simulations) if scaling_simulations else {}
    return {"rows": measured, "scaling": scaling, "environment": environment()}

  return partial.partial_result(payload_so_far, path=args.json)


def main(argv=None):
  """`mcgs-jax bench [options]`: measures (`run`, `memory_rows`) and prints the
  tables; bad input exits with status 2 and one line, before any work."""
  parser = build_parser()
  args = parser.parse_args(argv)
  run_arguments = _run_arguments(parser, args)
  if args.one_core:
    _pin_to_one_core(parser)
  memory_games = (
    []
    if args.memory.strip().lower() in ("", "none")
    else [name.strip() for name in args.memory.split(",")]
  )
  if not math.isfinite(args.memory_budget_gb) or args.memory_budget_gb <= 0:
    parser.error(f"--memory-budget-gb: expected a positive number, got {args.memory_budget_gb}")
  _check_games_and_paths(parser, args, memory_games)
  scaling_simulations = run_arguments["scaling_simulations"]
  measured: list[dict] = []

  def print_row(row: dict) -> None:
    measured.append(row)
    print(json.dumps(row), flush=True)

  with _partial_json(args, measured, scaling_simulations):
    try:
      rows = run(**run_arguments, progress=print_row)
    except memory.InsufficientMemoryError as error:
      parser.error(str(error))
    if memory_games:
      budget = args.memory_budget_gb * 1e9
      rows += memory_rows(memory_games, budget_bytes=budget, progress=print_row)
  scaling = scaling_table(rows, scaling_simulations) if scaling_simulations else {}
  _write_tables(args, rows, scaling)


if __name__ == "__main__":
  main()
