"""A self-play iteration of `mcgs-jax train`'s defaults against the same with mctx's
search, timed side by side in one process.

Connect four, the shipped network (`builtin_checkpoint("connect_four")`), the
training race's settings: `--games` games (256), `--simulations` (32) per move. The
default self-play (graph kept between moves, capacity `4 S + 1`, no solver) and
`--engine mctx` (a tree from scratch every move) each play one iteration
(`mcgs_jax.apps.train.make_self_play`, one jitted `lax.scan` over the moves) after a
compiling one; runs interleaved, median of `--repeats`.

`--parts` adds ablations of the default to the same interleaved rounds, each printed
against mctx: `no-reuse` (a graph from scratch every move), `tree+reuse` (no
transpositions), `tree` (both off: this library's search where mctx's runs),
`solver` (the default plus the MCTS-solver), `capacity-8S+1` (twice the default
capacity) and `make-room` (`Config.make_room`: `reroot` keeps the `3 S + 1` most
visited nodes; `--parts make-room,solver` times only those). Each line also gives
the share of playouts dropped on a full graph.
`--network untrained` times a freshly initialised network (the training race's first
iterations) instead of the shipped one.

    python -m benchmarks speed --part selfplay_time [--games 256] [--simulations 32] [--repeats 3]
      [--parts [NAMES]] [--network shipped|untrained]
"""

import argparse
import dataclasses
import datetime
import os
import platform
import statistics
import time
from collections.abc import Sequence

import jax
import numpy as np

from mcgs_jax.apps import train
from mcgs_jax.apps.cli.arena_parser import builtin_checkpoint
from mcgs_jax.games import evaluators, make_game, networks


def part_flags(simulations: int) -> dict[str, dict]:
  """The ablations of the default self-play `Config` (`--parts`), in the order they
  are printed: name -> the fields it changes. `capacity-8S+1` doubles the default
  capacity with reuse (`4 S + 1`); `make-room` keeps it and reroots to its `3 S + 1`
  most visited nodes, so that no playout finds the graph full."""
  return {
    "no-reuse": dict(reuse=False),
    "tree+reuse": dict(transpositions=False),
    "tree": dict(transpositions=False, reuse=False),
    "solver": dict(solver=True),
    "capacity-8S+1": dict(capacity=8 * simulations + 1),
    "make-room": dict(make_room=True),
  }


def iteration_seconds(
  games: int,
  simulations: int,
  repeats: int,
  *,
  parts: Sequence[str] = (),
  network: str = "shipped",
) -> tuple[dict[str, float], dict[str, float]]:
  """Per engine (`"mcgs"`, `"mctx"`, and each of `parts`, names of `part_flags`): the
  median seconds of one self-play iteration, and the share of its playouts that
  found the graph full (`capacity_overflows`; dropped, their evaluation unused)."""
  base = make_game("connect_four")
  if network == "shipped":
    apply_fn, params, _ = train.load_network(builtin_checkpoint("connect_four"), base.env)
  else:
    apply_fn, params = networks.init_network(base.env, jax.random.PRNGKey(1), hidden=(256, 256))
  game = dataclasses.replace(base, evaluator=evaluators.network_evaluator(apply_fn))
  config = train.Config(num_games=games, num_simulations=simulations, progress=False)
  configs = {
    "mcgs": config,
    "mctx": dataclasses.replace(config, engine="mctx", transpositions=False, reuse=False),
  }
  if parts:
    configs.update(
      {
        name: dataclasses.replace(config, **flags)
        for name, flags in part_flags(simulations).items()
        if name in parts
      }
    )
  plays = {name: train.make_self_play(game, c) for name, c in configs.items()}
  key = jax.random.PRNGKey(0)
  for play in plays.values():
    jax.block_until_ready(play(params, key))  # compile
  times: dict[str, list[float]] = {name: [] for name in plays}
  dropped: dict[str, float] = {}
  for repeat in range(repeats):
    for name, play in plays.items():
      started = time.perf_counter()
      trajectory = jax.block_until_ready(play(params, jax.random.fold_in(key, repeat + 1)))
      times[name].append(time.perf_counter() - started)
      searches = np.asarray(trajectory["valid"]).sum() * simulations
      dropped[name] = float(np.asarray(trajectory["capacity_overflows"]).sum() / searches)
  return {name: statistics.median(values) for name, values in times.items()}, dropped


def run(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--games", type=int, default=256)
  parser.add_argument("--simulations", type=int, default=32)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument(
    "--parts",
    nargs="?",
    const="all",
    help="also time the ablations: all, or a comma-separated list of their names",
  )
  parser.add_argument("--network", choices=("shipped", "untrained"), default="shipped")
  args = parser.parse_args(argv)
  names = list(part_flags(args.simulations)) if args.parts == "all" else []
  if args.parts and args.parts != "all":
    names = [name for name in args.parts.split(",") if name]
    unknown = sorted(set(names) - set(part_flags(args.simulations)))
    if unknown:
      parser.error(
        f"--parts: unknown {unknown}; expected all or some of {tuple(part_flags(args.simulations))}"
      )
  load = os.getloadavg()[0]
  seconds, dropped = iteration_seconds(
    args.games, args.simulations, args.repeats, parts=names, network=args.network
  )
  print(
    f"{datetime.date.today()}, {os.cpu_count()} cores {platform.machine()}, jax "
    f"{jax.__version__}, load average before {load:.2f}; B={args.games}, S={args.simulations}, "
    f"{args.network} network, median of {args.repeats}"
  )
  for name in names:
    print(
      f"part {name}: {seconds[name]:.2f} s, / mctx {seconds[name] / seconds['mctx']:.2f}, "
      f"/ default {seconds[name] / seconds['mcgs']:.2f}, playouts dropped on a full graph "
      f"{100 * dropped[name]:.1f}%"
    )
  print(f"default: playouts dropped on a full graph {100 * dropped['mcgs']:.1f}%")
  print(
    f"self-play iteration: mcgs (default) {seconds['mcgs']:.2f} s, mctx {seconds['mctx']:.2f} s, "
    f"mcgs / mctx {seconds['mcgs'] / seconds['mctx']:.2f}"
  )
  return record(args, seconds, dropped, names)


def record(args, seconds, dropped, names) -> dict:
  """The printed figures as one table: seconds per self-play iteration of each search,
  its ratios to mctx and to the default, and the playouts dropped on a full graph."""
  rows = []
  for name in ["mcgs", "mctx", *names]:
    share = f"{100 * dropped[name]:.1f}%" if name in dropped else ""
    ratios = [round(seconds[name] / seconds["mctx"], 2), round(seconds[name] / seconds["mcgs"], 2)]
    rows.append([name, round(seconds[name], 2), *ratios, share])
  title = (
    f"One self-play iteration, B={args.games}, S={args.simulations}, {args.network} network, "
    f"median of {args.repeats}"
  )
  columns = ["search", "seconds", "/ mctx", "/ default", "playouts dropped on a full graph"]
  return dict(tables=[dict(title=title, columns=columns, rows=rows)], notes=[])
