"""Compile time of searches under the XLA flags the test suite considers, and what
each flag set computes.

The README's test command is bound by compile time, so `tests/conftest.py` asks XLA's
CPU backend for fast-compiling code. This measures, for each flag set in a fresh
process (XLA reads `XLA_FLAGS` once), XLA's compile time of four searches (muzero in
graph mode, tree mode, graph mode with the solver, graph mode with root noise) and of
mctx's `muzero_policy`, B = 4 on the commuting test game, and a fingerprint of each
search's result (the first 10 hex digits of a SHA-256 of its action weights and node
values), so that one sees which flag sets round differently.

Rounds alternate between the flag sets; each round compiles new programs (the
simulation count differs by one per round). Figures are medians over the rounds;
ratios are to the first flag set in the same round.

Usage: python -m benchmarks compile --part xla_flags [--repeats 3] [--simulations 40]
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys

from benchmarks import record

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FLAG_SETS = {
  "level 0 (the suite before)": "--xla_backend_optimization_level=0",
  "level 0, older emitters": "--xla_backend_optimization_level=0 "
  "--xla_cpu_use_fusion_emitters=false",
  "level 0, older emitters, AVX (the suite now)": "--xla_backend_optimization_level=0 "
  "--xla_cpu_use_fusion_emitters=false --xla_cpu_max_isa=AVX",
  "XLA defaults (what users run)": "",
}
# Search name -> keywords of this library's muzero_policy besides its defaults.
OPTIONS = {
  "graph": {},
  "tree": {"transpositions": False},
  "graph + solver": {"solver": True},
  "graph + noise": {"dirichlet_fraction": 0.25},
}
SEARCHES = (*OPTIONS, "mctx")


def child(simulations: int) -> None:
  """Prints `{search: [compile seconds, fingerprint]}` as JSON, under this process's
  XLA_FLAGS."""
  import time

  import jax
  import mctx
  import numpy as np

  import mcgs_jax as mg
  from mcgs_jax.testing import commuting_game

  root_fn, recurrent_fn = commuting_game()
  root = root_fn(4)
  found = {}
  for name in SEARCHES:

    def search(key, name=name):
      if name == "mctx":
        out = mctx.muzero_policy(None, key, root, recurrent_fn, simulations)
        return out.action_weights, out.search_tree.node_values
      keywords = {"dirichlet_fraction": 0.0, **OPTIONS[name]}
      out = mg.muzero_policy(None, key, root, recurrent_fn, simulations, **keywords)
      return out.action_weights, out.search_graph.node_values

    lowered = jax.jit(search).lower(jax.random.PRNGKey(0))
    start = time.perf_counter()
    compiled = lowered.compile()
    seconds = time.perf_counter() - start
    weights, values = jax.block_until_ready(compiled(jax.random.PRNGKey(1)))
    digest = hashlib.sha256(np.asarray(weights).tobytes() + np.asarray(values).tobytes())
    found[name] = [seconds, digest.hexdigest()[:10]]
  print(json.dumps(found))


def measure(flags: str, simulations: int) -> dict:
  env = {**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"}
  env.pop("JAX_COMPILATION_CACHE_DIR", None)
  command = record.module_command("xla_flags", ["--child", str(simulations)])
  result = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, check=True)
  return json.loads(result.stdout.splitlines()[-1])


def run(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--simulations", type=int, default=40)
  parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child is not None:
    child(args.child)
    return
  load = os.getloadavg()
  seconds = {(f, s): [] for f in FLAG_SETS for s in SEARCHES}
  ratios = {(f, s): [] for f in FLAG_SETS for s in SEARCHES}
  fingerprints = {}
  first = next(iter(FLAG_SETS))
  for round_index in range(args.repeats):
    this_round = {
      name: measure(flags, args.simulations + round_index) for name, flags in FLAG_SETS.items()
    }
    for name in FLAG_SETS:
      for search in SEARCHES:
        compile_seconds, fingerprint = this_round[name][search]
        seconds[name, search].append(compile_seconds)
        ratios[name, search].append(compile_seconds / this_round[first][search][0])
        if round_index == 0:
          fingerprints[name, search] = fingerprint
    print(f"round {round_index + 1}/{args.repeats} done", file=sys.stderr, flush=True)
  import jax

  lines = [
    f"## Compile time of a search under the suite's XLA flags (date "
    f"{datetime.date.today().isoformat()}, {platform.machine()}, {os.cpu_count()} cores, "
    f"load average {load[0]:.1f} before, jax {jax.__version__})",
    "",
    f"`python -m benchmarks compile --part xla_flags --repeats {args.repeats} --simulations "
    f"{args.simulations}`: XLA's `compile()` of one lowered search, B = 4, S = "
    f"{args.simulations} (+1 per round), each flag set in a fresh process, medians over "
    f'the rounds; in brackets the median ratio to "{first}" in the same round; then '
    "the result's fingerprint in round 1 (equal fingerprints: the same bits).",
    "",
    "| flags | " + " | ".join(SEARCHES) + " |",
    "|---|" + "---|" * len(SEARCHES),
  ]
  for name in FLAG_SETS:
    cells = [
      f"{statistics.median(seconds[name, s]):.2f} s ({statistics.median(ratios[name, s]):.2f}x)"
      f" `{fingerprints[name, s]}`"
      for s in SEARCHES
    ]
    lines.append(f"| {name} | " + " | ".join(cells) + " |")
  return record.section(lines)
