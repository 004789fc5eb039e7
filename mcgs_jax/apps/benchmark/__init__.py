"""`mcgs-jax bench`: side-by-side speed of mctx and this library on a pgx game.

`run` and `main` (`speed`) measure and report; the searches and their timing are in
`timing`, the memory checks and the memory part in `memory`, the tables in `tables`
and the parser in `command`. Run it as `mcgs-jax bench` or `python -m
mcgs_jax.apps.benchmark`.
"""

from mcgs_jax.apps.benchmark.command import build_parser
from mcgs_jax.apps.benchmark.memory import (
  PlannedGroup,
  check_run_memory,
  memory_rows,
  planned_groups,
)
from mcgs_jax.apps.benchmark.speed import main, network_game, run
from mcgs_jax.apps.benchmark.tables import environment, markdown, scaling_table
from mcgs_jax.apps.benchmark.timing import (
  IMPLEMENTATIONS,
  deepest_nodes,
  make_policy,
  path_statistics,
  random_positions,
  time_group,
  time_policy,
)

__all__ = [
  "IMPLEMENTATIONS",
  "PlannedGroup",
  "build_parser",
  "check_run_memory",
  "deepest_nodes",
  "environment",
  "main",
  "make_policy",
  "markdown",
  "memory_rows",
  "network_game",
  "path_statistics",
  "planned_groups",
  "random_positions",
  "run",
  "scaling_table",
  "time_group",
  "time_policy",
]
