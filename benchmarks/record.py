"""What every case of the suite shares: a table as data and as markdown, the run's
metadata, the markdown an experiment printed read back as tables and notes, and the
JSON file of one run (the schema `benchmarks/report.py` renders into RESULTS.md)."""

import contextlib
import datetime
import importlib.metadata
import io
import json
import os
import platform
import re
import subprocess
import sys

QUESTIONS = ("speed", "strength", "memory", "compile", "training", "scale")
HERE = os.path.dirname(os.path.abspath(__file__))


def table(title, columns, rows) -> dict:
  """One table as data: a title, its column names and its rows (lists of cells)."""
  return dict(title=title, columns=list(columns), rows=[list(row) for row in rows])


def markdown(one: dict) -> str:
  """`one` (a `table`) as a markdown table under its title in bold."""
  lines = [f"**{one['title']}**", ""] if one["title"] else []
  lines.append("| " + " | ".join(map(str, one["columns"])) + " |")
  lines.append("|" + "---|" * len(one["columns"]))
  lines += ["| " + " | ".join(map(str, row)) + " |" for row in one["rows"]]
  return "\n".join(lines)


def _cell(text: str):
  """A markdown cell's value: an int or a float when it reads as one, else the text."""
  for kind in (int, float):
    try:
      return kind(text)
    except ValueError:
      pass
  return text


def _cells(line: str) -> list:
  """The cells of one markdown table row (`| a | b |`)."""
  inner = line.strip()[1:]
  inner = inner[:-1] if inner.endswith("|") else inner
  return [_cell(cell.strip()) for cell in inner.replace("\\|", "\0").split("|")]


def _is_separator(line: str) -> bool:
  return line.startswith("|") and set(line.replace("|", "").strip()) <= set("-: ")


def _blocks(text: str) -> list[list[str]]:
  """`text`'s paragraphs: runs of non-blank lines, a table's rows split from the rest."""
  blocks, current = [], []
  for line in text.splitlines() + [""]:
    line = line.rstrip()
    if line[:1] + line[-1:] in ("{}", "()") or line.startswith("<!--"):
      continue  # a progress line (JSON, a tuple) or an HTML comment
    if line.startswith("#"):  # a heading is a block of its own
      blocks += [current, [line]] if current else [[line]]
      current = []
      continue
    if not line.strip() or (current and line.startswith("|") != current[-1].startswith("|")):
      if current:
        blocks.append(current)
      current = [line] if line.strip() else []
    else:
      current.append(line)
  return blocks


def _title(above, heading) -> str:
  """A table's title: the one-line paragraph just above it, else that paragraph's
  first clause (up to a colon or full stop) when short, else the last heading."""
  if above is not None and "\n" not in above and len(above) <= 160:
    return above.lstrip("#* ").rstrip("*: ")
  first = re.split(r"(?<=[.:])\s", above or "", maxsplit=1)[0]
  if 0 < len(first) <= 100 and "\n" not in first and not first.startswith("`"):
    return first.rstrip(".:")
  return (heading or "").lstrip("#* ").rstrip("*: ")


def parse_markdown(text: str) -> tuple[list, list]:
  """`(tables, notes)` of the markdown an experiment printed: each table titled by
  the one-line paragraph just above it (or else the last heading), the other
  paragraphs as notes; headings, progress lines of JSON and rows printed as progress
  (no header) are left out."""
  tables, notes, above, heading = [], [], None, None
  for block in _blocks(text):
    if len(block) > 1 and block[0].startswith("|") and _is_separator(block[1]):
      title = _title(above, heading)
      if above is not None and notes and title == above.lstrip("#* ").rstrip("*: "):
        notes.pop()  # the paragraph became the title
      columns = _cells(block[0])
      rows = [_cells(line) for line in block[2:]]
      tables.append(table(title, columns, [row for row in rows if len(row) == len(columns)]))
      above = None
    elif block[0].startswith("#") and len(block) == 1:
      heading, above = block[0], None
    elif not block[0].startswith("|"):
      above = "\n".join(block)
      notes.append(above)
  return tables, notes


class _Tee(io.TextIOBase):
  """A stream that writes to the terminal and keeps a copy."""

  def __init__(self, stream):
    self.stream, self.copy = stream, io.StringIO()

  def write(self, text):
    self.copy.write(text)
    return self.stream.write(text)

  def flush(self):
    self.stream.flush()


@contextlib.contextmanager
def captured():
  """Tees `sys.stdout` while the block runs; yields the copy (an `io.StringIO`)."""
  tee = _Tee(sys.stdout)
  with contextlib.redirect_stdout(tee):
    yield tee.copy


def _commit():
  try:
    done = subprocess.run(
      ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True, timeout=10
    )
  except (OSError, subprocess.TimeoutExpired):
    return None
  return done.stdout.strip() or None


def _version(package):
  try:
    return importlib.metadata.version(package)
  except importlib.metadata.PackageNotFoundError:
    return None


def hardware() -> str:
  """The machine in words: CPU cores and processor, and JAX's devices."""
  import jax

  processor = platform.processor() or platform.machine()
  devices = ", ".join(sorted({str(getattr(d, "device_kind", d.platform)) for d in jax.devices()}))
  return f"{os.cpu_count()}-core CPU ({processor}); jax devices: {len(jax.devices())} x {devices}"


def metadata(*, case, part, question, title, command, tiny) -> dict:
  """Every field of a run's JSON but its tables and notes."""
  if question not in QUESTIONS:
    raise ValueError(f"question {question!r} is not one of {QUESTIONS}")
  return dict(
    case=case,
    part=part,
    question=question,
    title=title,
    date=datetime.date.today().isoformat(),
    hardware=None,
    load_average=list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    command=command,
    commit=_commit(),
    jax_version=_version("jax"),
    mctx_version=_version("mctx"),
    tiny=bool(tiny),
  )


def write(record: dict, path: str) -> None:
  """Writes `record` as JSON to `path` (its folder made if missing)."""
  folder = os.path.dirname(path)
  if folder:
    os.makedirs(folder, exist_ok=True)
  with open(path, "w", encoding="utf-8") as handle:
    json.dump(record, handle, indent=1, default=str)
    handle.write("\n")


def section(lines) -> dict:
  """Prints the markdown section made of `lines` (as the scripts printed it) and
  returns it as the suite's record: its tables as data, its paragraphs as notes."""
  text = "\n".join(lines) + "\n"
  print(text, flush=True)
  tables, notes = parse_markdown(text)
  return dict(tables=tables, notes=notes, printed=True)


def module_command(module: str, argv) -> list[str]:
  """The command line that runs `benchmarks.MODULE`'s `run(ARGV)` in a new Python
  process from the checkout's root (a race's worker), exiting with its status."""
  code = (
    f"import sys; from benchmarks import {module} as m; s = m.run(sys.argv[1:]); "
    "sys.exit(s if isinstance(s, int) else 0)"
  )
  return [sys.executable, "-c", code, *argv]
