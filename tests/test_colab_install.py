"""The notebooks' install cell, run as Colab would: in a fresh virtual environment
without mcgs_jax, pointed at this checkout by `MCGS_JAX_REPOSITORY`.

The cell runs unchanged. The fresh environment's dependencies (jax, pgx, flax, ...)
come from the environment running the tests (a `.pth` file adds links to that
environment's packages, mcgs_jax left out, after the new one's), so pip finds them
satisfied and only fetches the
build requirements (setuptools, wheel) from the package index, as Colab would. The
test checks what the cell itself does: pick the install spec, install mcgs_jax with
the `colab` extra, and leave an environment in which `import mcgs_jax` finds the new
copy.
"""

import json
import os
import pathlib
import site
import subprocess
import venv

import pytest

REPOSITORY_ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPOSITORY_ROOT / "notebooks").glob("*.ipynb"))


def install_cell(path):
  """The source of a notebook's first code cell (the install cell)."""
  notebook = json.loads(path.read_text(encoding="utf-8"))
  cell = next(cell for cell in notebook["cells"] if cell["cell_type"] == "code")
  return "".join(cell["source"])


def test_every_notebook_has_the_same_install_cell():
  cells = {path.name: install_cell(path) for path in NOTEBOOKS}
  assert len(cells) >= 3
  assert len(set(cells.values())) == 1, "the notebooks' install cells differ"
  assert "MCGS_JAX_REPOSITORY" in next(iter(cells.values()))


def test_install_spec_names_the_colab_extra(tmp_path):
  namespace = {}
  source = install_cell(NOTEBOOKS[0])
  exec(
    compile(source.split("\nif importlib.util.find_spec")[0], "cell", "exec"),  # noqa: S102
    namespace,
  )
  install_spec = namespace["install_spec"]
  assert install_spec("https://example.org/owner/mcgs_jax") == (
    "mcgs-jax[colab] @ git+https://example.org/owner/mcgs_jax"
  )
  assert install_spec(str(tmp_path)) == f"{tmp_path}[colab]"
  os.chdir(tmp_path)  # no checkout above: the cell must say what to set
  try:
    with pytest.raises(RuntimeError, match="MCGS_JAX_REPOSITORY"):
      install_spec("")
  finally:
    os.chdir(REPOSITORY_ROOT)


@pytest.mark.slow
def test_install_cell_installs_into_a_fresh_environment(tmp_path):
  environment = tmp_path / "venv"
  venv.EnvBuilder(with_pip=True).create(environment)
  python = environment / "bin" / "python"
  new_site = subprocess.run(
    [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
    check=True,
    capture_output=True,
    text=True,
  ).stdout.strip()
  # Dependencies (jax, pgx, flax, ...) from the running environment, after the new
  # environment's own site-packages, through links to every entry of its
  # site-packages but mcgs_jax's own (the running environment may have it installed,
  # as CI's does; then the cell would find it and install nothing).
  shared = tmp_path / "dependencies"
  shared.mkdir()
  for folder in (*site.getsitepackages(), site.getusersitepackages()):
    if not os.path.isdir(folder):
      continue
    for name in os.listdir(folder):
      if "mcgs_jax" in name.lower().replace("-", "_") or (shared / name).exists():
        continue
      (shared / name).symlink_to(os.path.join(folder, name))
  pathlib.Path(new_site, "dependencies.pth").write_text(f"{shared}\n")
  cell = install_cell(NOTEBOOKS[0])
  work = tmp_path / "colab"  # no checkout around it, as in Colab
  work.mkdir()
  script = (
    cell + "\nimport mcgs_jax\nprint('MCGS_JAX_FILE', mcgs_jax.__file__)\n"
    "from mcgs_jax.games import make_game\n"
    "print('GAME', make_game('tic_tac_toe').num_actions)\n"
  )
  env = dict(
    os.environ,
    MCGS_JAX_REPOSITORY=str(REPOSITORY_ROOT),
    PYTHONPATH="",
    MCGS_TEST_INSTALLED="0",
    PIP_DISABLE_PIP_VERSION_CHECK="1",
  )
  result = subprocess.run(
    [python, "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=600
  )
  assert result.returncode == 0, result.stdout + result.stderr
  assert "mcgs_jax installed" in result.stdout
  installed = next(
    line.split(" ", 1)[1] for line in result.stdout.splitlines() if line.startswith("MCGS_JAX_FILE")
  )
  assert pathlib.Path(installed).is_relative_to(environment), installed
  assert "GAME 9" in result.stdout
  # A second run of the cell finds mcgs_jax and installs nothing.
  again = subprocess.run(
    [python, "-c", cell], cwd=work, env=env, capture_output=True, text=True, timeout=600
  )
  assert again.returncode == 0 and "installed" not in again.stdout, again.stdout
