"""Two versions of the engine side by side in one process: `reroot` and the default
agent's search (solver on and off) of an older checkout against this one, on the same
states and graphs, interleaved with mctx's search of the same roots; and whether
every output array is the same.

The older package is copied from `--before` (a checkout, e.g. `git worktree add
/tmp/before HEAD~1`) into a temporary folder as `mcgs_jax_before`, its imports
renamed, so both live in one process. States and graphs come from
`benchmarks/profile_ply.py`'s set-up (connect four, the shipped network, `B` games
from 3-ply openings played `P` more plies by the default agent).

    python -m benchmarks.engine_ab --before /tmp/before [--games 128] [--plies 16] [--repeats 9]
"""

import argparse
import importlib
import os
import pathlib
import re
import shutil
import statistics
import sys
import tempfile
import time

import jax
import jax.numpy as jnp

import mcgs_jax as mg
from benchmarks import profile_ply
from mcgs_jax.apps import registry


def import_before(checkout: str, into: str):
  """The `mcgs_jax` package of `checkout`, imported as `mcgs_jax_before`."""
  target = pathlib.Path(into) / "mcgs_jax_before"
  shutil.copytree(pathlib.Path(checkout) / "mcgs_jax", target)
  for path in target.rglob("*.py"):
    path.write_text(re.sub(r"\bmcgs_jax\b", "mcgs_jax_before", path.read_text()))
  sys.path.insert(0, into)
  return importlib.import_module("mcgs_jax_before")


def identical(first, second) -> bool:
  """Every leaf of two pytrees is the same array, bit for bit."""
  leaves, other = jax.tree.leaves(first), jax.tree.leaves(second)
  return len(leaves) == len(other) and all(
    bool(jnp.array_equal(a, b, equal_nan=True)) for a, b in zip(leaves, other)
  )


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--before", required=True, help="checkout of the older version")
  parser.add_argument("--games", type=int, default=128)
  parser.add_argument("--plies", type=int, default=16)
  parser.add_argument("--repeats", type=int, default=9)
  args = parser.parse_args()
  with tempfile.TemporaryDirectory() as folder:
    before = import_before(args.before, folder)
    from mcgs_jax_before.apps import registry as before_registry  # noqa: PLC0415

    parts, _ = profile_ply._parts(args.games, args.plies, 0)
    params, key, root, invalid, rerooted = parts["search"][1]
    graph, played = parts["reroot"][1]
    game, agent, _ = profile_ply.default_agent()

    def policy(policies, solver):
      return profile_ply.agent_policy(policies, game, agent, solver=solver)

    old_root = before.RootFnOutput(
      prior_logits=root.prior_logits, value=root.value, embedding=root.embedding
    )
    old_graph, old_rerooted = (
      before.Graph(**dict(graph.items())),
      before.Graph(**dict(rerooted.items())),
    )
    fns = {
      "reroot before": (jax.jit(before.reroot), (old_graph, played)),
      "reroot after": (jax.jit(mg.reroot), (graph, played)),
      "search before": (
        policy(before_registry, True),
        (params, key, old_root, invalid, old_rerooted),
      ),
      "search after": (policy(registry, True), (params, key, root, invalid, rerooted)),
      "no solver before": (
        policy(before_registry, False),
        (params, key, old_root, invalid, old_rerooted),
      ),
      "no solver after": (policy(registry, False), (params, key, root, invalid, rerooted)),
      "mctx": parts["mctx"],
    }
    outputs = {name: jax.block_until_ready(fn(*inputs)) for name, (fn, inputs) in fns.items()}
    load = os.getloadavg()[0]
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(args.repeats):
      for name, (fn, inputs) in fns.items():
        started = time.perf_counter()
        jax.block_until_ready(fn(*inputs))
        times[name].append(time.perf_counter() - started)
  medians = {name: statistics.median(values) for name, values in times.items()}
  print(
    f"B={args.games}, {args.plies + profile_ply.OPENING_PLIES} plies in; load average "
    f"{load:.2f} before, {os.getloadavg()[0]:.2f} after; median of {args.repeats}"
  )
  for part in ("reroot", "search", "no solver"):
    same = identical(outputs[f"{part} before"], outputs[f"{part} after"])
    print(f"{part}: identical outputs {same}")
  for name, seconds in medians.items():
    print(f"  {name:18s} {seconds * 1000:8.1f} ms  ({seconds / medians['mctx']:.2f} of mctx's)")


if __name__ == "__main__":
  main()
