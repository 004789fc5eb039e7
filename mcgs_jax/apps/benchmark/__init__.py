"""`mcgs-jax bench`: side-by-side speed of mctx and this library on a pgx game.

`run` (`speed`) measures; the searches and their timing are in `timing`, the memory
checks and the memory part in `memory`, the tables in `tables`. The command, its
parser and `main`, is `mcgs_jax.apps.cli.bench_command` (exported here too, loaded on
first use): run it as `mcgs-jax bench` or `python -m mcgs_jax.apps.benchmark`.
"""

from mcgs_jax._src.lazy import lazy_exports
from mcgs_jax.apps.benchmark.memory import (
  PlannedGroup,
  check_run_memory,
  memory_rows,
  planned_groups,
)
from mcgs_jax.apps.benchmark.speed import network_game, run
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

# The command's names, kept here for the scripts that use them: loaded on first use,
# so that this package imports nothing of the command line (which imports it).
_COMMAND_EXPORTS = {
  "build_parser": "mcgs_jax.apps.cli.bench_command",
  "main": "mcgs_jax.apps.cli.bench_command",
}

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

__getattr__, __dir__ = lazy_exports(__name__, _COMMAND_EXPORTS, globals())
