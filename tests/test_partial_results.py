"""Ctrl-C during `mcgs-jax arena --json` and `mcgs-jax bench --json FILE`: exit status
130, one line on stderr, and the result so far, marked `"partial": true`.

Each command runs in a subprocess started through a small script that holds it at a
known point (some games over but not all; the first group of rows measured) and says
so on stderr; the test then sends SIGINT from outside, as a terminal's Ctrl-C does.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytest.importorskip("pgx")
pytest.importorskip("mctx")

ARENA_GAMES = 8
# `mcgs-jax arena` whose match waits, once some games are over and some are not,
# until it is interrupted.
HOLD_ARENA = textwrap.dedent(
  """
  import sys, time
  from mcgs_jax.apps.arena import match as arena
  from mcgs_jax.apps import cli

  played = arena._MatchProgress.played

  def played_then_hold(self, ply, first_searched, first_ply_seconds, finished):
    played(self, ply, first_searched, first_ply_seconds, finished)
    if 0 < finished.sum() < finished.size:
      print(f"held with {int(finished.sum())} games over", file=sys.stderr, flush=True)
      time.sleep(300)

  arena._MatchProgress.played = played_then_hold
  sys.exit(cli.main(sys.argv[1:]))
  """
)
# `mcgs-jax bench` that waits, before timing its second group, until it is
# interrupted.
HOLD_BENCH = textwrap.dedent(
  """
  import sys, time
  from mcgs_jax.apps.benchmark import speed as benchmark
  from mcgs_jax.apps import cli

  time_group = benchmark.time_group
  groups = []

  def hold_at_the_second_group(*args, **kwargs):
    groups.append(1)
    if len(groups) == 2:
      print("held before the second group", file=sys.stderr, flush=True)
      time.sleep(300)
    return time_group(*args, **kwargs)

  benchmark.time_group = hold_at_the_second_group
  sys.exit(cli.main(sys.argv[1:]))
  """
)
TINY_BENCH = [
  "--game",
  "tic_tac_toe",
  "--simulations",
  "4",
  "--scaling-simulations",
  "none",
  "--repeats",
  "1",
]


def _interrupt_when_held(script: str, argv: list[str], marker: str, cwd) -> tuple[str, str, str]:
  """Runs `script` with `argv`, sends SIGINT once a line of its stderr holds `marker`;
  returns `(held line, stdout, stderr)` after checking the exit status 130."""
  process = subprocess.Popen(
    [sys.executable, "-c", script, "--no-cache", *argv],
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    cwd=cwd,
  )
  started, held = time.monotonic(), ""
  try:
    while marker not in held:
      line = process.stderr.readline()
      assert line, f"ended before {marker!r}: {process.wait()}"
      held = line
      assert time.monotonic() - started < 300, "never held"
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
  finally:
    if process.poll() is None:
      process.kill()
      process.wait()
  assert process.returncode == 130, err
  assert "Traceback" not in err
  return held, out, err


@pytest.mark.slow
def test_ctrl_c_during_an_arena_match_prints_the_games_finished_so_far(tmp_path):
  argv = [
    "arena",
    "--game",
    "tic_tac_toe",
    "--games",
    str(ARENA_GAMES),
    "--openings",
    "1",
    "--simulations",
    "8",
    "--b-engine",  # B as A: one search to compile
    "mcgs",
    "--b-mode",
    "graph",
    "--json",
  ]
  held, out, err = _interrupt_when_held(HOLD_ARENA, argv, "held with", tmp_path)
  assert err.strip().splitlines()[-1] == "mcgs-jax arena: interrupted"
  report = json.loads(out)
  over = int(held.split("held with ")[1].split()[0])
  assert report["partial"] is True
  assert report["games"] == over and 0 < over < ARENA_GAMES
  assert report["games_planned"] == ARENA_GAMES
  assert report["wins"] + report["draws"] + report["losses"] == over
  assert len(report["outcomes"]) == len(report["game_lengths"]) == over
  assert report["verdict"] and report["game"] == "tic_tac_toe"


@pytest.mark.slow  # three searches compiled in a fresh process
def test_ctrl_c_during_bench_writes_the_rows_measured_so_far(tmp_path):
  output = tmp_path / "bench.json"
  argv = ["bench", *TINY_BENCH, "--batch-sizes", "2,4", "--json", str(output)]
  _, out, err = _interrupt_when_held(HOLD_BENCH, argv, "second group", tmp_path)
  assert err.strip().splitlines()[-1] == "mcgs-jax bench: interrupted"
  with open(output) as handle:
    payload = json.load(handle)
  assert payload["partial"] is True
  rows = payload["rows"]
  assert [(row["impl"], row["batch_size"]) for row in rows] == [
    ("mctx", 2),
    ("tree", 2),
    ("graph", 2),
  ]
  assert [json.loads(line) for line in out.splitlines()] == rows  # as printed
  assert payload["environment"]["jax"]


@pytest.mark.slow
def test_a_full_bench_json_says_it_is_not_partial(tmp_path, capsys):
  from mcgs_jax.apps import benchmark

  output = tmp_path / "bench.json"
  benchmark.main([*TINY_BENCH, "--batch-sizes", "2", "--json", str(output)])
  with open(output) as handle:
    payload = json.load(handle)
  assert payload["partial"] is False and len(payload["rows"]) == 3


BROKEN_PARTIAL_RESULT = textwrap.dedent(
  """
  import os, signal, time
  from mcgs_jax.apps import partial
  from mcgs_jax.apps.cli import command_line as cli

  cli._end_on_sigint("arena")

  def no_result():
    raise RuntimeError("no tally\\nyet")

  with partial.partial_result(no_result):
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(60)
  """
)


def test_a_partial_result_that_fails_still_ends_with_one_line_and_130():
  finished = subprocess.run(
    [sys.executable, "-c", BROKEN_PARTIAL_RESULT],
    capture_output=True,
    text=True,
    timeout=60,
    check=False,
  )
  assert finished.returncode == 130
  assert finished.stdout == ""
  assert finished.stderr == (
    "mcgs-jax arena: interrupted (no partial result: RuntimeError: no tally yet)\n"
  )


# `mcgs-jax bench --json FILE` whose rows are all measured (stand-ins, at once) and
# whose write of FILE waits until it is interrupted.
HOLD_BENCH_WRITE = textwrap.dedent(
  """
  import sys, time
  from mcgs_jax.apps import files
  from mcgs_jax.apps.benchmark import speed as benchmark
  from mcgs_jax.apps.cli import bench_command as benchmark_command
  from mcgs_jax.apps import cli

  ROWS = [dict(impl=impl, batch_size=2, run_s=0.5) for impl in ("mctx", "tree", "graph")]

  def measured(*, progress, **arguments):
    for row in ROWS:
      progress(dict(row))
    return [dict(row) for row in ROWS]

  write_atomically, held = files.write_atomically, []

  def held_write(path, data):
    if path.endswith(".json") and not held:
      held.append(path)
      print("held in the write of the result", file=sys.stderr, flush=True)
      time.sleep(300)
    return write_atomically(path, data)

  benchmark.run = measured
  benchmark_command.markdown = lambda rows, scaling, header: "(the tables)"
  files.write_atomically = held_write
  sys.exit(cli.main(sys.argv[1:]))
  """
)


def test_ctrl_c_while_bench_writes_its_result_still_leaves_it_whole(tmp_path):
  output = tmp_path / "bench.json"
  argv = ["bench", *TINY_BENCH, "--batch-sizes", "2", "--json", str(output)]
  _interrupt_when_held(HOLD_BENCH_WRITE, argv, "held in the write", tmp_path)
  with open(output) as handle:
    payload = json.load(handle)
  assert payload["partial"] is False  # every row was measured
  assert [row["impl"] for row in payload["rows"]] == ["mctx", "tree", "graph"]


# `mcgs-jax arena --json --plot` whose plot, drawn once the match is over, waits
# until it is interrupted.
HOLD_ARENA_PLOT = textwrap.dedent(
  """
  import sys, time
  from mcgs_jax.apps.cli import arena_command
  from mcgs_jax.apps import cli

  def held_plot(path, game, result):
    print("held while plotting", file=sys.stderr, flush=True)
    time.sleep(300)

  arena_command.save_plot = held_plot
  sys.exit(cli.main(sys.argv[1:]))
  """
)


@pytest.mark.slow
def test_ctrl_c_while_the_arena_plots_still_prints_the_whole_result(tmp_path):
  plot = tmp_path / "match.png"
  argv = ["arena", "--game", "tic_tac_toe", "--games", "2", "--openings", "1"]
  argv += ["--simulations", "4", "--b-engine", "mcgs", "--b-mode", "graph"]
  _, out, err = _interrupt_when_held(
    HOLD_ARENA_PLOT, [*argv, "--json", "--plot", str(plot)], "held while plotting", tmp_path
  )
  assert err.strip().splitlines()[-1] == "mcgs-jax arena: interrupted"
  report = json.loads(out)
  assert report["partial"] is False and report["games"] == report["games_planned"] == 2
  assert "plot" not in report and not plot.exists()  # the plot was not finished


def _launcher_environment() -> dict[str, str]:
  """The environment of a subprocess that imports `mcgs_jax_cli` from where this
  process does (an editable install made before it existed does not map it)."""
  import mcgs_jax_cli

  root = os.path.dirname(os.path.dirname(os.path.abspath(mcgs_jax_cli.__file__)))
  return dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))


# The `mcgs-jax` entry point whose first import of `mcgs_jax` waits until interrupted.
HOLD_IMPORT = textwrap.dedent(
  """
  import sys, time
  import mcgs_jax_cli

  class HeldImport:
    def find_spec(self, name, path=None, target=None):
      if name == "mcgs_jax":
        print("importing mcgs_jax", file=sys.stderr, flush=True)
        time.sleep(300)
      return None

  sys.meta_path.insert(0, HeldImport())
  sys.argv = ["mcgs-jax", "--no-cache", "search", "--game", "nim:1,2"]
  sys.exit(mcgs_jax_cli.main())
  """
)
# The `mcgs-jax` entry point whose interpreter exit (an atexit callback) waits until
# interrupted, after a command that went through the command's own handler.
HOLD_EXIT = textwrap.dedent(
  """
  import atexit, sys, time
  import mcgs_jax_cli

  def held_exit():
    print("exiting", file=sys.stderr, flush=True)
    time.sleep(300)

  atexit.register(held_exit)
  sys.argv = ["mcgs-jax", "--no-cache", "search", "--game", "no_such_game"]
  sys.exit(mcgs_jax_cli.main())
  """
)


@pytest.mark.parametrize(
  "script, marker, line",
  [
    (HOLD_IMPORT, "importing mcgs_jax", "mcgs-jax search: interrupted"),
    (HOLD_EXIT, "exiting", "mcgs-jax search: interrupted"),
  ],
  ids=["while-importing", "while-exiting"],
)
def test_ctrl_c_before_and_after_the_command_ends_with_one_line_and_130(script, marker, line):
  process = subprocess.Popen(
    [sys.executable, "-c", script],
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    env=_launcher_environment(),
  )
  try:
    for text in process.stderr:
      if text.startswith(marker):
        break
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
  finally:
    if process.poll() is None:
      process.kill()
      process.wait()
  assert process.returncode == 130, err
  assert err.splitlines()[-1] == line, err
  assert "Traceback" not in err and "Exception ignored" not in err


def test_the_command_is_installed_through_its_launcher():
  tomllib = pytest.importorskip("tomllib")
  pyproject = os.path.join(os.path.dirname(os.path.dirname(__file__)), "pyproject.toml")
  if not os.path.exists(pyproject):  # tests run from an installed wheel
    pytest.skip("no pyproject.toml beside the tests")
  with open(pyproject, "rb") as handle:
    scripts = tomllib.load(handle)["project"]["scripts"]
  assert scripts["mcgs-jax"] == "mcgs_jax_cli:main"
