"""Several playouts per game per step (`num_parallel=K`): speed against mctx.

Connect four, the benchmark's flax MLP, random openings. For each B and S: mctx, then
`mcgs_jax.muzero_policy` in graph mode with K = 1, 4, 8, 16 (K must divide S).
Reports the latency of one search (median of repeats), simulations per second, the
ratio to mctx, and the playouts dropped as collisions. Search quality at equal
simulations is measured by `benchmarks/endgame_accuracy.py --num-parallel K`.

Usage: python -m benchmarks speed --part parallel [--batch-sizes 1,64] [--simulations 64,256]
                                     [--parallel 1,4,8,16] [--repeats 3] [--json FILE]
"""

import argparse
import datetime
import json

import jax
import numpy as np

import mcgs_jax as mg
from mcgs_jax.apps.benchmark.timing import make_policy, random_positions, time_policy
from mcgs_jax.games import evaluators, networks, search_game
from mcgs_jax.games.adapter import make_game

COLUMNS = (
  "impl",
  "B",
  "S",
  "K",
  "latency ms",
  "sims/s",
  "speed vs mctx",
  "collisions (mean per game)",
)


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--batch-sizes", default="1,64")
  parser.add_argument("--simulations", default="64,256")
  parser.add_argument("--parallel", default="1,4,8,16")
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--json", metavar="FILE")
  return parser.parse_args(argv)


def setup():
  """`(game, params, positions_key, search_key)`: connect four with the benchmark's
  flax MLP."""
  network_key, positions_key, search_key = jax.random.split(jax.random.PRNGKey(0), 3)
  probe = make_game("connect_four")
  apply_fn, params = networks.init_network(probe.env, network_key, hidden=(64, 64))
  game = make_game("connect_four", evaluators.network_evaluator(apply_fn))
  return game, params, positions_key, search_key


def ours(game, num_simulations, num_parallel):
  """This library's jitted `muzero_policy` search with `num_parallel` playouts."""

  def policy(params, key, state):
    return search_game(
      mg.muzero_policy,
      game,
      state,
      num_simulations,
      key,
      params=params,
      num_parallel=num_parallel,
    )

  return jax.jit(policy)


def row(impl, batch_size, num_simulations, num_parallel, seconds, mctx_seconds, collisions):
  """One measurement as a dict (printed as a JSON line at once)."""
  found = dict(
    impl=impl,
    batch_size=batch_size,
    num_simulations=num_simulations,
    num_parallel=num_parallel,
    latency_ms=1e3 * seconds,
    sims_per_s=batch_size * num_simulations / seconds,
    speed_vs_mctx=mctx_seconds / seconds,
    collisions=collisions,
  )
  print(json.dumps(found), flush=True)
  return found


def measure(game, params, state, search_key, batch_size, num_simulations, args) -> list[dict]:
  """mctx, then this library at every K that divides S, on the positions `state`."""
  _, mctx_seconds = time_policy(
    make_policy(game, "mctx", num_simulations), params, search_key, state, args.repeats
  )
  rows = [row("mctx", batch_size, num_simulations, 1, mctx_seconds, mctx_seconds, 0.0)]
  for num_parallel in ints(args.parallel):
    if num_simulations % num_parallel:
      continue
    policy = ours(game, num_simulations, num_parallel)
    _, seconds = time_policy(policy, params, search_key, state, args.repeats)
    graph = policy(params, search_key, state).search_graph
    collisions = float(np.mean(graph.parallel_collisions))
    rows.append(
      row("graph", batch_size, num_simulations, num_parallel, seconds, mctx_seconds, collisions)
    )
  return rows


def ints(text):
  return [int(v) for v in text.split(",")]


def run(argv=None) -> dict:
  """Measures every B, S and K; returns the table (and writes `--json`'s rows)."""
  args = parse_args(argv)
  game, params, positions_key, search_key = setup()
  rows = []
  for batch_size in ints(args.batch_sizes):
    state = random_positions(game, positions_key, batch_size, max_opening_moves=8)
    for num_simulations in ints(args.simulations):
      rows += measure(game, params, state, search_key, batch_size, num_simulations, args)
  if args.json:
    with open(args.json, "w") as f:
      json.dump(rows, f, indent=1)
  device = jax.devices()[0]
  title = (
    f"num_parallel, connect_four, {datetime.date.today()}, {device.platform} "
    f"({getattr(device, 'device_kind', '')}), jax {jax.__version__}"
  )
  cells = [
    [r["impl"], r["batch_size"], r["num_simulations"], r["num_parallel"]]
    + [round(r["latency_ms"], 1), round(r["sims_per_s"]), f"{r['speed_vs_mctx']:.2f}x"]
    + [round(r["collisions"], 1)]
    for r in rows
  ]
  return dict(tables=[dict(title=title, columns=list(COLUMNS), rows=cells)], notes=[])
