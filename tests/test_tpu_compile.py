"""`benchmarks/tpu_compile.py`: the search compiled ahead of time for a TPU slice
(v5e:2x2, 4 chips, games sharded), on this machine without a TPU. The sharded
programs of this library must hold no all-gather: the engine reads and writes its
tables game by game, so no chip needs another's rows. Needs `libtpu` (`pip install
"jax[tpu]==<jax's version>"`, as .ci/run's `all` environment has it)."""

import importlib.util
import json

import pytest
from helpers import run_benchmark, run_in_checkout

pytest.importorskip("mctx")
pytest.importorskip("optax")
needs_libtpu = pytest.mark.skipif(
  importlib.util.find_spec("libtpu") is None,
  reason="libtpu is not installed: pip install 'jax[tpu]==<jax's version>' compiles for TPU",
)


@pytest.mark.parametrize(
  "flag, value", [("--max-children", "-4"), ("--simulations", "0"), ("--batch-per-chip", "-1")]
)
def test_bad_arguments_exit_2_with_one_line(flag, value):
  """A bad number is refused by argparse (exit status 2, one line naming the flag) before
  anything is compiled; `--max-children -4` ended in a ValueError traceback (issue 60,
  defect 4)."""
  done = run_benchmark("tpu_compile", flag, value, "--programs", "none", timeout=300)
  assert done.returncode == 2, done.stderr
  assert "Traceback" not in done.stderr
  assert f"argument {flag}: expected" in done.stderr.splitlines()[-1]


def test_max_children_0_means_dense_edges():
  """`--max-children 0` is accepted (dense edge tables, as in `mcgs-jax search`): the
  run goes on to the next check, here the unknown program."""
  done = run_benchmark("tpu_compile", "--max-children", "0", "--programs", "none", timeout=300)
  assert done.returncode == 2 and "--programs: unknown ['none']" in done.stderr, done.stderr


# A table of 8 games x 65 rows sharded over the slice's 4 chips, read back whole
# (an all-gather of the table) or game by game (no collective).
_CONTROL = """
from benchmarks import tpu_compile
import jax, jax.numpy as jnp
from mcgs_jax.apps.train import data_parallel

mesh = tpu_compile.topology_mesh("v5e:2x2")
table = jax.ShapeDtypeStruct((8, 65, 7), jnp.float32, sharding=data_parallel.batch_sharded(mesh))
whole = jax.jit(lambda t: t * 2, out_shardings=data_parallel.replicated(mesh))
by_game = jax.jit(lambda t: t[:, 3] * 2)
for program in (whole, by_game):
  counts = tpu_compile.collectives(program.lower(table).compile().as_text(), {65})
  print(counts["all-gather"], counts["graph_all_gathers"])
"""


@needs_libtpu
@pytest.mark.slow
def test_the_detector_finds_an_all_gather_of_a_table():
  done = run_in_checkout(["-c", _CONTROL], timeout=600, check=True)
  assert done.stdout.split() == ["1", "1", "0", "0"], done.stdout + done.stderr


@needs_libtpu
@pytest.mark.slow
def test_sharded_search_reroot_and_self_play_gather_no_graph_table(tmp_path):
  output = tmp_path / "tpu.jsonl"
  done = run_benchmark(
    "tpu_compile",
    "--topology",
    "v5e:2x2",
    "--game",
    "connect_four",
    "--batch-per-chip",
    "4",
    "--simulations",
    "4",
    "--programs",
    "graph,tree,reroot,self_play,mctx",
    "--json",
    str(output),
    timeout=900,
    check=True,
  )
  reports = {r["program"]: r for r in map(json.loads, output.read_text().splitlines())}
  assert list(reports) == ["graph", "tree", "reroot", "self_play", "mctx"], done.stdout
  for name, report in reports.items():
    assert "error" not in report, (name, report)
    assert report["chip"] == "TPU v5 lite" and report["temp_bytes"] + report["output_bytes"] > 0
    if name != "mctx":
      assert report["all-gather"] == 0 and report["graph_all_gathers"] == 0, (name, report)
