"""Data-parallel training on this machine's CPU split into host devices: what a
sharded self-play iteration and training step cost against one device, and how many
collectives XLA put into the sharded programs.

Connect four, the shipped network, `--games` games and `--simulations` per move with
`mcgs-jax train`'s defaults (graph kept between moves). One process with
`--devices` host devices (`--xla_force_host_platform_device_count`, set here before
JAX starts): the one-device programs (`devices=1`) and the sharded ones (every
device), each run once to compile and then `--repeats` times interleaved; medians.
On a CPU the host devices share the same cores, so the ratio measures the cost of
the partitioning and its collectives, not a speed-up.

    python -m benchmarks.data_parallel [--devices 2] [--games 64] [--simulations 16]
"""

import argparse
import os
import sys

if __name__ == "__main__":
  _devices = next((a.split("=")[1] for a in sys.argv if a.startswith("--devices=")), None)
  if _devices is None and "--devices" in sys.argv:
    _devices = sys.argv[sys.argv.index("--devices") + 1]
  os.environ["XLA_FLAGS"] = (
    f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={_devices or 2}"
  )

import dataclasses
import datetime
import platform
import statistics
import time

import jax
import numpy as np
import optax

from mcgs_jax.apps.cli import arena as arena_command
from mcgs_jax.apps.train import data_parallel
from mcgs_jax.apps.train import loop as train
from mcgs_jax.games import evaluators, make_game


def collectives(compiled_text: str) -> dict[str, int]:
  """How many all-gathers and all-reduces a compiled program holds (each runs once
  per pass over its place in the program: inside the search's loop, per simulation)."""
  return {name: compiled_text.count(f"{name}(") for name in ("all-gather", "all-reduce")}


def measure(games: int, simulations: int, repeats: int) -> dict:
  base = make_game("connect_four")
  apply_fn, params, _ = train.load_network(
    arena_command.builtin_checkpoint("connect_four"), base.env
  )
  game = dataclasses.replace(base, evaluator=evaluators.network_evaluator(apply_fn))
  config = train.Config(num_games=games, num_simulations=simulations, progress=False)
  mesh = data_parallel.training_mesh(None, num_games=games, train_batch_size=256)
  optimizer = optax.adam(1e-3)
  opt_state = optimizer.init(params)
  key = jax.random.PRNGKey(0)
  batch = dict(
    observation=np.zeros((256,) + base.init(key, 1).observation.shape[1:], np.float32),
    policy=np.full((256, 7), 1 / 7, np.float32),
    value=np.zeros((256,), np.float32),
  )
  replicated = data_parallel.replicated(mesh)
  programs = {
    "one device": (
      train.make_self_play(game, config).lower(params, key).compile(),
      train.make_train_step(apply_fn, optimizer, 1e-4).lower(params, opt_state, batch).compile(),
      (params, opt_state, key, batch),
    ),
    "sharded": (
      train.make_self_play(game, config, mesh).lower(params, key).compile(),
      train.make_train_step(apply_fn, optimizer, 1e-4, mesh)
      .lower(params, opt_state, batch)
      .compile(),
      (
        *data_parallel.put((params, opt_state, key), replicated),
        data_parallel.put(batch, data_parallel.batch_sharded(mesh)),
      ),
    ),
  }
  times: dict[str, dict[str, list[float]]] = {
    name: {"self_play": [], "train_step": []} for name in programs
  }
  for _ in range(repeats + 1):  # the first round warms up
    for name, (self_play, train_step, (p, o, k, b)) in programs.items():
      start = time.perf_counter()
      jax.block_until_ready(self_play(p, k))
      times[name]["self_play"].append(time.perf_counter() - start)
      start = time.perf_counter()
      for _ in range(10):
        p2, o2, _ = train_step(p, o, b)
      jax.block_until_ready(p2)
      times[name]["train_step"].append((time.perf_counter() - start) / 10)
  return dict(
    medians={
      name: {part: statistics.median(values[1:]) for part, values in parts.items()}
      for name, parts in times.items()
    },
    collectives={
      "self_play": collectives(programs["sharded"][0].as_text()),
      "train_step": collectives(programs["sharded"][1].as_text()),
    },
  )


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--devices", type=int, default=2)
  parser.add_argument("--games", type=int, default=64)
  parser.add_argument("--simulations", type=int, default=16)
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args()
  result = measure(args.games, args.simulations, args.repeats)
  load = os.getloadavg()[0]
  print(
    f"{datetime.date.today()}, {platform.machine()} CPU, {os.cpu_count()} cores as "
    f"{jax.device_count()} host devices, jax {jax.__version__}, load average {load:.1f}; "
    f"connect four, {args.games} games, {args.simulations} simulations, median of "
    f"{args.repeats}"
  )
  print("| program | one device (s) | sharded (s) | sharded / one | collectives sharded |")
  print("|---|---|---|---|---|")
  one, sharded = result["medians"]["one device"], result["medians"]["sharded"]
  for part in ("self_play", "train_step"):
    counts = result["collectives"][part]
    print(
      f"| {part} | {one[part]:.4f} | {sharded[part]:.4f} | {sharded[part] / one[part]:.2f} "
      f"| {counts['all-gather']} all-gather, {counts['all-reduce']} all-reduce |"
    )


if __name__ == "__main__":
  main()
