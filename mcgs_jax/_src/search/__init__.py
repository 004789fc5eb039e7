"""The search: one simulation is `select`, `expand`, `backup`; `search` runs many.

All three work on the whole batch. Per-game work (the selection rules, the hash
probe) is written for one game and lifted with `jax.vmap`; the loops over depth run
at batch level with a scalar trip condition, so XLA never selects over the graph
arrays per game, and the cost of one simulation does not grow with capacity. Every
read and write of a table at a row that differs per game goes through `batched`
(game by game), so a batch sharded over devices on its games axis searches with no
gather of the tables between devices.

One module per step, with `Path` (`path`) the record they pass on: `descent`
(`select`, and the stop rule), `expand` (`expand`, `link`; what an evaluation is to
the graph in `leaf_evaluation`), `backup`, `parallel` (several playouts per game per
step, `num_parallel`), and `simulations` (`simulate`, `search`).
"""

from mcgs_jax._src.search.backup import backup
from mcgs_jax._src.search.descent import select
from mcgs_jax._src.search.expand import expand, link
from mcgs_jax._src.search.path import Path, last_edge
from mcgs_jax._src.search.simulations import search, search_with_checked_inputs, simulate

__all__ = [
  "Path",
  "backup",
  "expand",
  "last_edge",
  "link",
  "search",
  "search_with_checked_inputs",
  "select",
  "simulate",
]
