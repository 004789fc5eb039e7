"""Compile time of a search, mcgs_jax against mctx, side by side in one process.

A notebook's or a test's first search waits for XLA to compile it; on the CPU that
takes seconds. This measures, for `muzero_policy` with and without root noise
(`dirichlet_fraction` 0.25 and 0), XLA's compile time of one search program
(`jax.jit(...).lower(...).compile()`, lowering left out) and the seconds per search
once compiled, for mctx, this library in tree mode and in graph mode. A known
fraction of 0 draws no noise in this library (the same numbers to the bit, without
the Gamma sampler); mctx samples the noise and weighs it by 0.

Rows alternate between the searches, `--repeats` rounds; each round compiles new
programs (the simulation count differs by one per round, so no cache serves them).
The figures are medians, and the ratios are to mctx in the same round.

Usage: python -m benchmarks compile --part compile_time [--repeats 5] [--batch 64]
         [--simulations 32]

"""

import argparse
import datetime
import os
import platform
import statistics
import sys
import time

import jax
import mctx

import mcgs_jax as mg
from benchmarks import record
from mcgs_jax.testing import commuting_game

# name -> (policy, its extra keywords)
ENGINES = {
  "mctx": (mctx.muzero_policy, {}),
  "mcgs_jax tree": (mg.muzero_policy, {"transpositions": False}),
  "mcgs_jax graph": (mg.muzero_policy, {}),
}


def measure(engine, fraction, *, batch, simulations, calls=5):
  """`(compile seconds, seconds per search)` of one new program."""
  policy, options = ENGINES[engine]
  root_fn, recurrent_fn = commuting_game()
  root = root_fn(batch)

  def search(key):
    return policy(
      None, key, root, recurrent_fn, simulations, dirichlet_fraction=fraction, **options
    ).action_weights

  lowered = jax.jit(search).lower(jax.random.PRNGKey(0))
  start = time.perf_counter()
  compiled = lowered.compile()
  compile_seconds = time.perf_counter() - start
  jax.block_until_ready(compiled(jax.random.PRNGKey(1)))
  start = time.perf_counter()
  for call in range(calls):
    jax.block_until_ready(compiled(jax.random.PRNGKey(2 + call)))
  return compile_seconds, (time.perf_counter() - start) / calls


def run(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--batch", type=int, default=64)
  parser.add_argument("--simulations", type=int, default=32)
  args = parser.parse_args(argv)
  load = os.getloadavg()
  fractions = (0.25, 0.0)
  compile_times = {(e, f): [] for e in ENGINES for f in fractions}
  run_times = {(e, f): [] for e in ENGINES for f in fractions}
  ratios = {(e, f): [] for e in ENGINES for f in fractions}
  for round_index in range(args.repeats):
    simulations = args.simulations + round_index
    for fraction in fractions:
      this_round = {}
      for engine in ENGINES:
        compile_seconds, run_seconds = measure(
          engine, fraction, batch=args.batch, simulations=simulations
        )
        this_round[engine] = compile_seconds
        compile_times[engine, fraction].append(compile_seconds)
        run_times[engine, fraction].append(run_seconds)
      for engine in ENGINES:
        ratios[engine, fraction].append(this_round[engine] / this_round["mctx"])
    print(f"round {round_index + 1}/{args.repeats} done", file=sys.stderr, flush=True)
  lines = [
    f"## Compile time of a search against mctx (date {datetime.date.today().isoformat()}, "
    f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
    f"{load[0]:.1f} before, jax {jax.__version__}, XLA_FLAGS="
    f"{os.environ.get('XLA_FLAGS', '') or '(none)'})",
    "",
    "`python -m benchmarks compile --part compile_time "
    f"--repeats {args.repeats} --batch {args.batch} "
    f"--simulations {args.simulations}`: `muzero_policy` on the commuting test game, "
    f"B = {args.batch}, S = {args.simulations} (+1 per round, so that every round compiles "
    "new programs); medians over the rounds. Compile: XLA's `compile()` of the lowered "
    "search. Ratio: to mctx's compile in the same round (median of the per-round "
    "ratios). Search: seconds per call after compiling.",
    "",
    "| dirichlet_fraction | search | compile (s) | compile / mctx | search (ms) |",
    "|---|---|---|---|---|",
  ]
  for fraction in fractions:
    for engine in ENGINES:
      lines.append(
        f"| {fraction} | {engine} | {statistics.median(compile_times[engine, fraction]):.2f} | "
        f"{statistics.median(ratios[engine, fraction]):.2f}x "
        f"({min(ratios[engine, fraction]):.2f}-{max(ratios[engine, fraction]):.2f}) | "
        f"{1e3 * statistics.median(run_times[engine, fraction]):.1f} |"
      )
  ours = [
    statistics.median(compile_times[e, 0.0]) / statistics.median(compile_times[e, 0.25])
    for e in ENGINES
    if e != "mctx"
  ]
  lines += [
    "",
    f"Without noise this library's compile takes {min(ours):.2f}-{max(ours):.2f} of its "
    "compile with noise (tree and graph mode).",
  ]
  return record.section(lines)
