"""`mcgs-jax bench` (`main`, or `python -m mcgs_jax.apps.benchmark`): its parser, the
keywords of `mcgs_jax.apps.benchmark.run` from the parsed flags, the checks before any
work, and the files it writes (`--markdown`, `--json`, and after Ctrl-C the partial
`--json`)."""

import contextlib
import datetime
import json
import math
import os
from collections.abc import Sequence
from typing import Any

import jax
import jax.extend.backend

from mcgs_jax.apps import files, memory_estimates, partial
from mcgs_jax.apps.benchmark import speed
from mcgs_jax.apps.benchmark.memory import memory_rows
from mcgs_jax.apps.benchmark.tables import environment, markdown, scaling_table
from mcgs_jax.apps.cli.args import OneLineErrorParser, add_seed_argument, int_at_least
from mcgs_jax.apps.extras import needs_extra

# `--help`'s description: the first line of `mcgs_jax.apps.benchmark`'s doc.
DESCRIPTION = "Side-by-side speed of `mctx.muzero_policy` and `mcgs_jax.muzero_policy`."
_positive = int_at_least(1, 1_000_000)


def build_parser():
  """The `mcgs-jax bench` parser."""
  parser = OneLineErrorParser(prog="mcgs-jax bench", description=DESCRIPTION)
  parser.add_argument("--game", default="connect_four")
  _add_measured_parts(parser)
  _add_run_settings(parser)
  return parser


def main(argv=None):
  """`mcgs-jax bench [options]`: measures (`speed.run`, `memory_rows`) and prints the
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

  result: dict[str, Any] = dict(rows=measured, partial=True)  # what Ctrl-C writes
  with _partial_json(args, result, scaling_simulations):
    try:
      rows = speed.run(**run_arguments, progress=print_row)
    except memory_estimates.InsufficientMemoryError as error:
      parser.error(str(error))
    if memory_games:
      budget = args.memory_budget_gb * 1e9
      rows += memory_rows(memory_games, budget_bytes=budget, progress=print_row)
    result.update(rows=rows, partial=False)  # Ctrl-C from now on writes them all
    scaling = scaling_table(rows, scaling_simulations) if scaling_simulations else {}
    _write_tables(args, rows, scaling)


def _add_measured_parts(parser) -> None:
  """The parts measured: throughput, S-scaling, capacity, probe window, memory."""
  parser.add_argument(
    "--batch-sizes",
    default="1024",
    help="comma-separated batch sizes of the throughput part, or 'none' to skip it (default 1024)",
  )
  parser.add_argument("--simulations", default="64", help="comma-separated S (default 64)")
  parser.add_argument("--scaling-batch-size", type=_positive, default=64)
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
    "--capacity-simulations", type=_positive, default=64, help="S of the capacity part (default 64)"
  )
  parser.add_argument(
    "--capacity-batch-size", type=_positive, default=64, help="B of the capacity part (default 64)"
  )
  parser.add_argument(
    "--probe-windows",
    default="none",
    help="comma-separated probe windows to compare in graph mode, e.g. 8,16 (default: none)",
  )
  parser.add_argument(
    "--probe-batch-size",
    type=_positive,
    help="B of the probe-window part (default: the first of --batch-sizes, else 1024)",
  )
  parser.add_argument(
    "--probe-simulations",
    type=_positive,
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


def _add_run_settings(parser) -> None:
  """How the run goes and what it writes: one core, repeats, seed, edges, --quick, files."""
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
    type=_positive,
    default=3,
    help="timed runs per configuration; the median is reported",
  )
  add_seed_argument(parser)
  parser.add_argument(
    "--max-children",
    type=_positive,
    default=None,
    help="compact edges: K slots per node in every search of ours (default: dense tables)",
  )
  parser.add_argument(
    "--quick", action="store_true", help="B=64, S=16, scaling S=16,128: a short smoke run"
  )
  parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
  parser.add_argument("--markdown", metavar="FILE", help="also write the tables here")


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
    max_children=args.max_children,
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
    parser.exit(2, f"mcgs-jax bench: {needs_extra('mctx')}: {error}\n")


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


def _partial_json(args, result: dict[str, Any], scaling_simulations: Sequence[int]):
  """With `--json FILE`, a `partial.partial_result` block that writes after Ctrl-C the
  rows measured so far to FILE: `result["rows"]` (filled as they are measured) with
  `result["partial"]` (False once every row is measured, while the files are
  written); else a block that does nothing."""
  if not args.json:
    return contextlib.nullcontext()

  def payload_so_far() -> dict[str, Any]:
    measured = list(result["rows"])
    scaling = scaling_table(measured, scaling_simulations) if scaling_simulations else {}
    return {
      "rows": measured,
      "scaling": scaling,
      "environment": environment(),
      "partial": result["partial"],
    }

  return partial.partial_result(payload_so_far, path=args.json)
