"""The applications apart from the core: importing the package and the command line
pulls in no optional package, and a command that needs a missing extra says which
in one line (exit status 2) before any work.

Missing packages are simulated in a subprocess by an import hook that refuses them.
"""

import json
import os
import subprocess
import sys

import pytest

from mcgs_jax.apps.extras import EXTRA_OF_MODULE, PACKAGES_OF_EXTRA

OPTIONAL = ("flax", "optax", "mctx", "tqdm", "matplotlib", "pgx")

# Runs each command of a JSON list `[[argv...], ...]` under an import hook that refuses
# the packages named first; prints one JSON list of `[exit status, stderr]`. One
# process for every command: each would otherwise pay for importing jax on its own.
_BLOCK = """
import contextlib, io, json, sys
blocked = set(sys.argv[1].split(","))

class Refuse:
  def find_spec(self, name, path=None, target=None):
    if name.partition(".")[0] in blocked:
      raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    return None

sys.meta_path.insert(0, Refuse())
from mcgs_jax.apps import cli
results = []
for argv in json.loads(sys.argv[2]):
  stderr = io.StringIO()
  with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
    try:
      status = cli.main(argv)
    except SystemExit as exit:
      status = exit.code
  results.append([status, stderr.getvalue()])
print(json.dumps(results))
"""


def _run(code: str, *args: str) -> subprocess.CompletedProcess:
  env = dict(os.environ, MCGS_JAX_NO_CACHE="1")
  return subprocess.run(
    [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300
  )


def test_imports_pull_in_no_optional_package():
  modules = (
    "mcgs_jax",
    "mcgs_jax.games",
    "mcgs_jax.apps.cli",
    "mcgs_jax.apps.arena",
    "mcgs_jax.apps.cli.arena_command",
    "mcgs_jax.apps.benchmark",
    "mcgs_jax.apps.cli.play_command",
    "mcgs_jax.apps.registry",
    "mcgs_jax.apps.cli.search_command",
    "mcgs_jax.apps.viz",
  )
  code = (
    "import importlib, sys\n"
    f"for name in {modules!r}: importlib.import_module(name)\n"
    f"print(sorted(name for name in {OPTIONAL!r} if name in sys.modules))\n"
  )
  result = _run(code)
  assert result.returncode == 0, result.stderr
  assert result.stdout.strip() == "[]"


MISSING_EXTRA_CASES = [
  (["train", "--quick"], "train"),
  (["bench", "--quick"], "bench"),
  (["play", "--modes", "mctx"], "bench"),
  (["play", "--evaluator", "network"], "train"),
  (["play", "--plot", "scores.png"], "viz"),
  (["arena", "--game", "tic_tac_toe", "--b-engine", "mcgs", "--plot", "match.png"], "viz"),
  (["arena"], "train"),
  (["search", "--game", "connect_four"], "train"),  # its shipped network
]


@pytest.fixture(scope="module")
def missing_extra_runs(tmp_path_factory):
  """`[(exit status, stderr, output directory)]` of every command of
  `MISSING_EXTRA_CASES` without the optional packages, each writing into a
  directory of its own."""
  directories = [tmp_path_factory.mktemp("extras") for _ in MISSING_EXTRA_CASES]
  commands = [
    [str(directory / arg) if arg.endswith(".png") else arg for arg in argv]
    for (argv, _), directory in zip(MISSING_EXTRA_CASES, directories, strict=True)
  ]
  result = _run(_BLOCK, "flax,optax,mctx,tqdm,matplotlib", json.dumps(commands))
  assert result.returncode == 0, result.stderr
  runs = json.loads(result.stdout.strip().splitlines()[-1])
  return [
    (status, stderr, directory)
    for (status, stderr), directory in zip(runs, directories, strict=True)
  ]


@pytest.mark.parametrize(
  "case", range(len(MISSING_EXTRA_CASES)), ids=[" ".join(argv) for argv, _ in MISSING_EXTRA_CASES]
)
def test_a_missing_extra_is_named_in_one_line(case, missing_extra_runs):
  argv, extra = MISSING_EXTRA_CASES[case]
  status, stderr, directory = missing_extra_runs[case]
  assert status == 2, stderr
  lines = stderr.strip().splitlines()
  assert len(lines) == 1, stderr
  assert lines[0].startswith(f"mcgs-jax {argv[0]}")
  assert f"pip install 'mcgs-jax[{extra}]'" in lines[0]
  # Every package of the extra is named, whichever of them the command imported first.
  for package in PACKAGES_OF_EXTRA[extra]:
    assert package in lines[0], (package, lines[0])
  assert not list(directory.iterdir())  # nothing written


def test_the_extras_named_in_messages_are_those_of_pyproject():
  import pathlib
  import re

  import tomllib

  pyproject = pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml"
  extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
  for extra, packages in PACKAGES_OF_EXTRA.items():
    declared = tuple(re.split(r"[<>=\[ ]", requirement)[0] for requirement in extras[extra])
    assert packages == declared, (extra, packages, declared)
  for module, extra in EXTRA_OF_MODULE.items():
    assert module in PACKAGES_OF_EXTRA[extra], (module, extra)
