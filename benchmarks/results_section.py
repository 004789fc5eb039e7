"""Printing a benchmark's markdown section and appending it to `benchmarks/RESULTS.md`."""

import os

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")


def append(section: str) -> None:
  """Appends `section` (markdown, newline-terminated) to RESULTS.md after a blank line."""
  with open(RESULTS, "a", encoding="utf-8") as handle:
    handle.write("\n" + section)


def emit(lines: list[str], *, write: bool) -> str:
  """Prints the section made of `lines`; with `write`, appends it to RESULTS.md.

  Returns the section's text (the lines joined, newline-terminated).
  """
  section = "\n".join(lines) + "\n"
  print(section, flush=True)
  if write:
    append(section)
  return section
