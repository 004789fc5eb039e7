"""Every Python block of README.md runs as written, top to bottom in one namespace
(later blocks use names that earlier ones define, as a reader would), in a fresh
interpreter."""

import pathlib
import re
import subprocess
import sys

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def python_blocks(text: str):
  """The bodies of the ```python fenced blocks, dedented (some sit in list items)."""
  blocks = []
  for match in re.finditer(r"^( *)```python\n(.*?)^\1```", text, re.S | re.M):
    indent = len(match.group(1))
    blocks.append("\n".join(line[indent:] for line in match.group(2).splitlines()))
  return blocks


def test_readme_has_the_two_commands_near_the_top():
  head = README.read_text().split("## ", 3)[:3]
  text = "\n".join(head)
  assert 'pip install -e ".[all]" && mcgs-jax arena' in text
  assert "python -m pytest -n 2 -q" in text


@pytest.mark.slow
def test_every_python_block_runs(tmp_path):
  blocks = python_blocks(README.read_text())
  assert len(blocks) >= 4, "expected the example blocks of the README"
  script = "\n\n".join(f"# --- README block {index}\n{block}" for index, block in enumerate(blocks))
  path = tmp_path / "readme_blocks.py"
  path.write_text("import matplotlib\nmatplotlib.use('Agg')\n" + script)
  result = subprocess.run(
    [sys.executable, str(path)], capture_output=True, text=True, timeout=900, cwd=tmp_path
  )
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
