"""Runs every `notebooks/*.ipynb` top to bottom in quick mode and checks no cell fails.

Each notebook reads `MCGS_NOTEBOOK_QUICK=1` from the environment and shrinks its sizes
(a few seconds to a minute on two CPU cores). The kernel is this interpreter: the test
writes a kernel spec whose command is `sys.executable -m ipykernel_launcher` into a
temporary Jupyter data directory, so neither a user-level `python3` kernel nor a
missing `jupyter kernelspec install` step can send the notebook to another Python.
"""

import json
import pathlib
import sys
import time

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK_DIR = pathlib.Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
KERNEL_NAME = "mcgs-jax-test"


@pytest.fixture
def kernel_name(tmp_path, monkeypatch):
  """A kernel spec for the running interpreter, found first on `JUPYTER_PATH`."""
  spec_dir = tmp_path / "jupyter" / "kernels" / KERNEL_NAME
  spec_dir.mkdir(parents=True)
  spec = {
    "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
    "display_name": "mcgs_jax test kernel",
    "language": "python",
  }
  (spec_dir / "kernel.json").write_text(json.dumps(spec))
  monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
  monkeypatch.setenv("MCGS_NOTEBOOK_QUICK", "1")
  monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
  return KERNEL_NAME


def test_notebooks_exist():
  assert {"01_quickstart.ipynb", "02_mcgs_vs_mcts.ipynb"} <= {p.name for p in NOTEBOOKS}


# Every notebook runs with the slow checks (a step of .ci/run): the quickstart's
# calls are the API the suite tests, and a kernel start costs 15-30 s.
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, kernel_name):
  notebook = nbformat.read(path, as_version=4)
  client = nbclient.NotebookClient(
    notebook,
    kernel_name=kernel_name,
    timeout=600,
    allow_errors=False,
    resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
  )
  start = time.perf_counter()
  client.execute()  # raises CellExecutionError naming the cell when one fails
  seconds = time.perf_counter() - start
  errors = [
    output
    for cell in notebook.cells
    if cell.cell_type == "code"
    for output in cell.get("outputs", [])
    if output.get("output_type") == "error"
  ]
  assert not errors, errors
  print(f"{path.name}: {seconds:.1f} s")
