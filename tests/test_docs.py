"""The README and the `docs/` pages: the README stays one screen per question and
links every page, every relative link and anchor resolves, and every Python block of
each page runs as written (each page top to bottom in a fresh interpreter, as a
reader would follow it)."""

import pathlib
import re
import subprocess
import sys

import pytest
from test_readme import python_blocks

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
  """GitHub's anchor of a markdown heading."""
  text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
  text = text.replace("`", "").strip().lower()
  text = re.sub(r"[^\w\- ]", "", text)
  return text.replace(" ", "-")


def anchors(path: pathlib.Path) -> set[str]:
  text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
  return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def test_the_readme_is_about_one_screen_per_question():
  lines = README.read_text().splitlines()
  assert len(lines) <= 250, f"README.md has {len(lines)} lines; move detail to docs/"


def test_the_readme_links_every_docs_page():
  text = README.read_text()
  missing = [page.name for page in PAGES if f"](docs/{page.name}" not in text]
  assert not missing, f"docs pages the README does not link: {missing}"


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: p.name)
def test_every_relative_link_and_anchor_resolves(path):
  broken = []
  for target in LINK.findall(path.read_text()):
    if target.startswith(("http://", "https://", "mailto:")):
      continue
    file_part, _, anchor = target.partition("#")
    linked = (path.parent / file_part).resolve() if file_part else path
    if not linked.exists() or anchor and linked.suffix == ".md" and anchor not in anchors(linked):
      broken.append(target)
  assert not broken, f"{path.name}: links to nothing: {broken}"


PAGES_WITH_CODE = [page for page in PAGES if python_blocks(page.read_text())]


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=lambda p: p.name)
def test_every_python_block_of_a_page_runs(page, tmp_path):
  blocks = python_blocks(page.read_text())
  script = "\n\n".join(f"# --- {page.name} block {index}\n{b}" for index, b in enumerate(blocks))
  path = tmp_path / "page_blocks.py"
  path.write_text("import matplotlib\nmatplotlib.use('Agg')\n" + script)
  result = subprocess.run(
    [sys.executable, str(path)], capture_output=True, text=True, timeout=900, cwd=tmp_path
  )
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
