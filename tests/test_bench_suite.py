"""The benchmark suite (`python -m benchmarks CASE`, benchmarks/__main__.py): every
case and part runs at `--tiny` size and writes one JSON record in the schema that
benchmarks/report.py renders (keys, question, tables whose rows have their columns'
length). Most parts compile several searches, so all but the fastest are slow tests;
a part whose dependency is absent here (pgx's example source, libtpu, jumanji's
training extras) is skipped with the reason."""

import importlib.util
import json
import os

import pytest
from helpers import REPO, load_benchmark, run_in_checkout

KEYS = {
  "case",
  "part",
  "question",
  "title",
  "date",
  "hardware",
  "load_average",
  "command",
  "commit",
  "jax_version",
  "mctx_version",
  "tiny",
  "tables",
  "notes",
}
QUESTIONS = {"speed", "strength", "memory", "compile", "training", "scale"}

# (case, part): the suite's every part, as benchmarks/__main__.py's CASES lists them.
QUICK = [("training", "training_tables")]
SLOW = [
  ("fingerprint", "fingerprint"),
  ("speed", "parallel"),
  ("speed", "profile_ply"),
  ("speed", "selfplay_time"),
  ("speed", "cpu_gather"),
  ("memory", "compact_edges"),
  ("compile", "compile_time"),
  ("compile", "xla_flags"),
  ("scale", "tpu_compile"),
  ("strength", "switching"),
  ("strength", "endgame_accuracy"),
  ("solver", "solver_accuracy"),
  ("solver", "solver_nim"),
  ("solver", "solver_nim_trace"),
  ("transpositions", "key_history"),
  ("transpositions", "learned_latents"),
  ("training", "training_race"),
  ("training", "checkpoint_matches"),
  ("training", "tic_tac_toe_accuracy"),
  ("pgx_example", "pgx_example"),
  ("pgx_example", "pgx_example_race"),
  ("planning", "planning_table"),
  ("planning", "planning_race"),
  ("planning", "jumanji_a2c"),
]
PGX_EXAMPLE = os.environ.get("MCGS_PGX_EXAMPLE", "")  # pgx's examples/alphazero folder


def missing(part) -> str | None:
  """Why `part` cannot run here, or None."""
  if part in ("pgx_example", "pgx_example_race") and not os.path.isdir(PGX_EXAMPLE):
    return "MCGS_PGX_EXAMPLE is not pgx's examples/alphazero folder (fetched from GitHub)"
  if part == "tpu_compile" and importlib.util.find_spec("libtpu") is None:
    return "libtpu is not installed: pip install 'jax[tpu]==<jax's version>'"
  if part in ("jumanji_a2c", "planning_race") and not importlib.util.find_spec("jumanji"):
    return "jumanji is not installed"
  if part == "jumanji_a2c" and not importable("jumanji.training.setup_train"):
    return "jumanji's training extras (dm-haiku, distrax, rlax, ...) are not installed"
  return None


def importable(module: str) -> bool:
  """Whether `module` imports (its package present is not enough: jumanji ships
  `jumanji.training` without the libraries it imports)."""
  try:
    importlib.import_module(module)
  except ImportError:
    return False
  return True


def extra_flags(part, tmp_path) -> list[str]:
  """Flags a part needs beyond `--tiny`: a folder for a race, pgx's example, a
  tic-tac-toe checkpoint."""
  flags = []
  if part in ("training_race", "planning_race", "pgx_example_race"):
    flags += ["--out-dir", str(tmp_path / "race")]
  if part in ("pgx_example", "pgx_example_race"):
    flags += ["--example", PGX_EXAMPLE]
  if part == "tic_tac_toe_accuracy":
    flags += ["--checkpoint", f"untrained={untrained_tic_tac_toe(tmp_path)}"]
  return flags


def untrained_tic_tac_toe(tmp_path) -> str:
  """An untrained tic-tac-toe network saved as `mcgs-jax train` saves one."""
  import jax

  from mcgs_jax.apps.train import checkpoint_files
  from mcgs_jax.games import make_game, networks

  _, params = networks.init_network(make_game("tic_tac_toe").env, jax.random.PRNGKey(0))
  return checkpoint_files.save_checkpoint(str(tmp_path / "ttt.msgpack"), params)


def check_record(record, case, part):
  """`record` has the schema of benchmarks/record.py, and at least one table."""
  assert set(record) == KEYS, sorted(set(record) ^ KEYS)
  assert record["case"] == case and record["part"] in (part, None)
  assert record["question"] in QUESTIONS and record["tiny"] is True
  assert len(record["load_average"]) == 3 and record["date"].count("-") == 2
  assert record["command"].startswith(f"python -m benchmarks {case}")
  assert all(isinstance(note, str) for note in record["notes"])
  assert any(table["rows"] for table in record["tables"]), "no table with rows recorded"
  for table in record["tables"]:
    assert set(table) == {"title", "columns", "rows"} and table["columns"]
    assert all(len(row) == len(table["columns"]) for row in table["rows"]), table


def run_tiny(case, part, tmp_path):
  reason = missing(part)
  if reason:
    pytest.skip(reason)
  out = tmp_path / "x.json"
  argv = ["-m", "benchmarks", case, "--part", part, "--tiny", "--out", str(out)]
  done = run_in_checkout([*argv, *extra_flags(part, tmp_path)], timeout=1200)
  assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
  check_record(json.loads(out.read_text()), case, part)


@pytest.mark.parametrize("case, part", QUICK)
def test_a_tiny_run_records_its_tables(case, part, tmp_path):
  run_tiny(case, part, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("case, part", SLOW)
def test_a_slow_tiny_run_records_its_tables(case, part, tmp_path):
  run_tiny(case, part, tmp_path)


def test_the_lists_cover_every_part_of_the_runner():
  listed = run_in_checkout(
    [
      "-c",
      "from benchmarks.__main__ import CASES; "
      "print(' '.join(f'{c}:{p}' for c in CASES for p in CASES[c].parts))",
    ],
    check=True,
  )
  assert sorted(listed.stdout.split()) == sorted(f"{c}:{p}" for c, p in QUICK + SLOW)


def test_a_bad_part_exits_2():
  done = run_in_checkout(["-m", "benchmarks", "speed", "--part", "nothing"])
  assert done.returncode == 2 and "--part" in done.stderr


def test_no_benchmark_module_is_an_entry_point_of_its_own():
  """The runner is the only entry point, but the documented ones of fingerprint and
  report (the tools beside the suite)."""
  for path in (REPO / "benchmarks").glob("*.py"):
    if path.name in ("__main__.py", "fingerprint.py", "report.py"):
      continue
    assert 'if __name__ == "__main__"' not in path.read_text(), path.name


def test_printed_markdown_reads_back_as_tables_and_notes():
  """What a part printed becomes its record: each table titled by the line above it
  (or the last heading), progress lines and header-less rows left out."""
  record = load_benchmark("record")
  text = "\n".join(
    [
      "| 1 | progress |",
      '{"row": 1}',
      "## Heading",
      "A paragraph",
      "of two lines.",
      "",
      "| S | share |",
      "|---|---|",
      "| 8 | 50.0% |",
      "",
      "Short title:",
      "",
      "| x |",
      "|---|",
      "| 2.5 |",
    ]
  )
  tables, notes = record.parse_markdown(text)
  assert tables == [
    dict(title="Heading", columns=["S", "share"], rows=[[8, "50.0%"]]),
    dict(title="Short title", columns=["x"], rows=[[2.5]]),
  ]
  assert notes == ["A paragraph\nof two lines."]
  assert record.parse_markdown(record.markdown(tables[0]))[0] == [tables[0]]
