"""The benchmark suite's runner: `python -m benchmarks CASE [--part PART] [--tiny]
[--out FILE] [the part's own flags]`, from the repository's root (the checkout's
`mcgs_jax` is imported).

Each case answers one question; a case of several experiments picks one with
`--part`. Each experiment keeps its own module, `benchmarks/MODULE.py`, whose
`run(argv)` parses the part's flags (as the script's `main` did) and prints its
markdown tables; the runner records them, with the run's metadata, as one JSON file
(`benchmarks/results/CASE[-PART].json` unless `--out`). `--tiny` puts flags that shrink
every size before the part's flags, so the run takes seconds (CI runs every part so).
"""

import argparse
import dataclasses
import importlib
import os
import shlex
import sys
import tempfile

from benchmarks import record


@dataclasses.dataclass(frozen=True)
class Part:
  """One experiment: its module, its question, a one-line title and the tiny flags."""

  module: str
  question: str
  title: str
  tiny: tuple = ()


@dataclasses.dataclass(frozen=True)
class Case:
  """A named case: what it answers and its parts (the first one is the default)."""

  help: str
  parts: dict


# A tiny race keeps its runs out of the checkout.
TINY_RACES = os.path.join(tempfile.gettempdir(), "mcgs-jax-tiny-races")

SPEED = dict(
  parallel=Part(
    "num_parallel",
    "speed",
    "Several playouts per game per step (num_parallel=K): speed against mctx",
    ("--batch-sizes", "2", "--simulations", "8", "--parallel", "1,4", "--repeats", "1"),
  ),
  profile_ply=Part(
    "profile_ply",
    "speed",
    "The default agent's time per ply, part by part, beside mctx",
    ("--games", "2", "--plies", "1", "--repeats", "1"),
  ),
  selfplay_time=Part(
    "selfplay_time",
    "speed",
    "One self-play iteration of mcgs-jax train's defaults against mctx's search",
    ("--games", "2", "--simulations", "4", "--repeats", "1"),
  ),
  cpu_gather=Part(
    "cpu_gather",
    "speed",
    "Why a CPU search step costs more as the tables grow (gathers split into tasks)",
    ("--capacities", "65,129", "--steps", "5", "--batch-size", "2"),
  ),
)

CASES = dict(
  speed=Case("search time against mctx", SPEED),
  memory=Case(
    "bytes per node and search time of compact edges",
    dict(
      compact_edges=Part(
        "compact_edges",
        "memory",
        "Compact edges against dense edge tables and mctx: bytes per node and search time",
        (
          "--games",
          "connect_four:4",
          "--batch-size",
          "2",
          "--simulations",
          "4",
          "--move-batch",
          "0",
          "--parts",
          "memory",
          "time",
          "--time-sizes",
          "2x4",
        ),
      )
    ),
  ),
  compile=Case(
    "compile time",
    dict(
      compile_time=Part(
        "compile_time",
        "compile",
        "Compile time of a search, this library against mctx",
        ("--repeats", "1", "--batch", "2", "--simulations", "4"),
      ),
      xla_flags=Part(
        "xla_flags",
        "compile",
        "Compile time and result bits of searches under the test suite's XLA flags",
        ("--repeats", "1", "--simulations", "4"),
      ),
    ),
  ),
  scale=Case(
    "ahead-of-time compile for a TPU slice",
    dict(
      tpu_compile=Part(
        "tpu_compile",
        "scale",
        "Search, reroot, self-play and training compiled ahead of time for a TPU slice",
        ("--batch-per-chip", "2", "--simulations", "2", "--programs", "graph"),
      )
    ),
  ),
  strength=Case(
    "play and move accuracy",
    dict(
      switching=Part(
        "switching",
        "strength",
        "The default agent against the real mctx.muzero_policy in play",
        ("--games", "2", "--simulations", "4", "--openings", "1"),
      ),
      endgame_accuracy=Part(
        "endgame_accuracy",
        "strength",
        "Connect-four end-game accuracy, graph against tree, against an exact solver",
        ("--positions", "2", "--simulations", "8"),
      ),
    ),
  ),
  solver=Case(
    "the MCTS-solver",
    dict(
      solver_accuracy=Part(
        "solver_accuracy",
        "strength",
        "The MCTS-solver's moves against exact solvers, with and without proof_first",
        (
          "--games",
          "tic_tac_toe",
          "--positions",
          "2",
          "--simulations",
          "8",
          "--policies",
          "muzero",
        ),
      ),
      solver_nim=Part(
        "solver_nim",
        "strength",
        "Simulations the MCTS-solver needs to prove Nim 3-4-5, graph against tree",
        ("--simulations", "40"),
      ),
      solver_nim_trace=Part(
        "solver_nim_trace",
        "strength",
        "Where the MCTS-solver's playouts go on Nim",
        ("--heaps", "1,2", "--simulations", "20", "--policies", "muzero", "--seeds", "1"),
      ),
    ),
  ),
  transpositions=Case(
    "what the transposition key merges",
    dict(
      key_history=Part(
        "key_history",
        "speed",
        "Transposition hits and nodes per simulation by history mode of the key",
        ("--games", "connect_four", "--simulations", "8", "--plies", "2", "--batch", "2")
        + ("--repeats", "1", "--key-batch", "2"),
      ),
      learned_latents=Part(
        "learned_latents",
        "strength",
        "What the default key merges with a learned MuZero latent, and the search against the tree",
        ("--designs", "plain,binary", "--simulations", "4", "--batch", "2")
        + ("--train-steps", "2", "--train-batch", "4", "--unroll", "2", "--width", "8")
        + ("--latent-size", "4"),
      ),
    ),
  ),
  training=Case(
    "AlphaZero training with this library's search",
    dict(
      training_race=Part(
        "training_race",
        "training",
        "AlphaZero trained with mctx's search against this library's defaults, equal time",
        ("--out-dir", os.path.join(TINY_RACES, "training"))
        + ("--seeds", "0", "--variants", "mctx,default", "--budget", "30", "--fractions", "0.5")
        + ("--games", "2", "--eval-simulations", "2", "--positions", "2", "--simulations", "4")
        + ("--train-steps", "2", "--replay-openings", "0"),
      ),
      training_tables=Part(
        "training_tables",
        "training",
        "The training tables of a mcgs-jax train --history file",
        (os.path.join(record.HERE, "checkpoints", "connect_four_az40_history.json"),),
      ),
      checkpoint_matches=Part(
        "checkpoint_matches",
        "training",
        "Arena matches between training checkpoints and uniform MCTS",
        (
          "--matches",
          "uniform:" + os.path.join(record.HERE, "checkpoints", "connect_four_az40.msgpack"),
          "--games",
          "2",
          "--simulations",
          "4",
        ),
      ),
      tic_tac_toe_accuracy=Part(
        "tic_tac_toe_accuracy",
        "training",
        "How often a tic-tac-toe network's own top move is optimal",
        (),
      ),
    ),
  ),
  pgx_example=Case(
    "pgx's AlphaZero example with import mcgs_jax as mctx",
    dict(
      pgx_example=Part(
        "pgx_example",
        "speed",
        "pgx's AlphaZero example: self-play timed against the real mctx",
        ("--games", "2", "--simulations", "4", "--steps", "2", "--channels", "4")
        + ("--blocks", "1", "--repeats", "1"),
      ),
      pgx_example_race=Part(
        "pgx_example_race",
        "training",
        "pgx's AlphaZero example trained three ways at equal wall time",
        ("--out-dir", os.path.join(TINY_RACES, "pgx_example"))
        + ("--seeds", "0", "--ways", "mctx,graph", "--budget", "60", "--selfplay-games", "2")
        + ("--simulations", "2", "--steps", "4", "--train-batch", "4", "--channels", "4")
        + ("--blocks", "1", "--games", "2", "--eval-simulations", "2"),
      ),
    ),
  ),
  planning=Case(
    "jumanji's planning problems",
    dict(
      planning_table=Part(
        "planning_table",
        "strength",
        "Graph, tree and mctx on jumanji's planning problems against exact optima",
        ("--cases", "knapsack-network", "--instances", "2"),
      ),
      planning_race=Part(
        "planning_race",
        "training",
        "mcgs-jax train on jumanji against mctx's search and jumanji's A2C, equal time",
        ("--out-dir", os.path.join(TINY_RACES, "planning"))
        + ("--seeds", "0", "--pipelines", "mcgs", "--budget", "30", "--fractions", "0.5")
        + ("--games", "2", "--simulations", "4", "--train-steps", "2", "--instances", "2")
        + ("--eval-simulations", "2"),
      ),
      jumanji_a2c=Part(
        "jumanji_a2c",
        "training",
        "jumanji's own A2C trained for a wall-clock budget, its greedy policy played",
        ("--seconds", "1", "--total-batch-size", "4", "--n-steps", "5", "--instances", "4"),
      ),
    ),
  ),
  fingerprint=Case(
    "SHA-256 of search outputs, to compare an engine change before and after",
    dict(
      fingerprint=Part(
        "fingerprint",
        "strength",
        "Fingerprints of the search's results (one SHA-256 per jitted search)",
        ("--only", "muzero_graph"),
      )
    ),
  ),
)


def parser() -> argparse.ArgumentParser:
  """The runner's parser: one subparser per case, with `--part`, `--tiny`, `--out`;
  the part's own flags are left to the part's parser."""
  top = argparse.ArgumentParser(
    prog="python -m benchmarks",
    description="The benchmark suite: one case per question, one JSON record per run.",
  )
  cases = top.add_subparsers(dest="case", required=True, metavar="CASE")
  for name, case in CASES.items():
    parts = f"{case.help} (parts: {', '.join(case.parts)})"
    sub = cases.add_parser(name, help=parts, description=parts, add_help=False, allow_abbrev=False)
    sub.add_argument("--part", choices=tuple(case.parts), default=next(iter(case.parts)))
    sub.add_argument("--tiny", action="store_true", help="every size shrunk: runs in seconds")
    sub.add_argument("--out", help="the JSON file (default benchmarks/results/CASE[-PART].json)")
    sub.add_argument("--runner-help", action="help", help="this help (--help: the part's)")
  return top


def default_out(case: str, part: str) -> str:
  """`benchmarks/results/CASE.json` for a case of one part, else `CASE-PART.json`."""
  name = case if len(CASES[case].parts) == 1 else f"{case}-{part}"
  return os.path.join(record.HERE, "results", f"{name}.json")


def case_of(part: Part) -> str:
  """The name of the case that holds `part`."""
  return next(name for name, case in CASES.items() if part in case.parts.values())


def command_line(argv) -> str:
  """The run's command as a user types it (the JSON's `command`)."""
  return shlex.join(["python", "-m", "benchmarks", *argv])


def run_part(part: Part, argv) -> tuple:
  """Runs the part's module on `argv`; `(status, tables, notes)`: the tables it returned,
  or else those it printed (`None` when it exited before recording anything)."""
  module = importlib.import_module(f"benchmarks.{part.module}")
  sys.argv[0] = f"python -m benchmarks {case_of(part)} --part {part.module}"  # argparse's prog
  with record.captured() as printed:
    try:
      returned = module.run(list(argv))
    except SystemExit as stop:  # argparse's errors and --help: nothing to record
      return (stop.code if isinstance(stop.code, int) else 1), None, None
  if isinstance(returned, int) and returned:
    return returned, None, None
  if isinstance(returned, dict):
    for one in [] if returned.get("printed") else returned["tables"]:
      print(record.markdown(one) + "\n")
    return 0, returned["tables"], returned.get("notes", [])
  return (0, *record.parse_markdown(printed.getvalue()))


def main(argv=None) -> int:
  """Runs one part (with `--tiny`'s flags first, so the part's own flags win), prints
  its tables and writes its JSON record; the exit status."""
  argv = sys.argv[1:] if argv is None else list(argv)
  args, rest = parser().parse_known_args(argv)
  part = CASES[args.case].parts[args.part]
  flags = [*(part.tiny if args.tiny else ()), *rest]
  fields = dict(case=args.case, part=args.part if len(CASES[args.case].parts) > 1 else None)
  run = record.metadata(
    **fields, question=part.question, title=part.title, command=command_line(argv), tiny=args.tiny
  )
  status, tables, notes = run_part(part, flags)
  if status or tables is None:
    return status
  if not tables:
    print(f"{args.case} --part {args.part}: no table to record", file=sys.stderr)
  for one in tables:
    one["title"] = one["title"] or part.title
  run.update(hardware=record.hardware(), tables=tables, notes=notes)
  out = args.out or default_out(args.case, args.part)
  record.write(run, out)
  print(f"recorded in {out}", file=sys.stderr)
  return 0


if __name__ == "__main__":
  sys.exit(main())
