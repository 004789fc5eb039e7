"""mcgs_jax: Monte-Carlo Graph Search in JAX, a drop-in companion to mctx.

Everything a search needs is here; games, evaluators and exact solvers are in
`mcgs_jax.games`, the arena, training loop, pictures and command line in
`mcgs_jax.apps`, and the invariant checker and toy games for tests in
`mcgs_jax.testing`. Modules under `mcgs_jax._src` are private and may change.
"""

import importlib
import warnings
from typing import Any

from mcgs_jax._src.action_selection import (
  gumbel_muzero_interior_action_selection,
  muzero_action_selection,
  uct_action_selection,
)
from mcgs_jax._src.forced_playouts import prune_forced_playouts
from mcgs_jax._src.graph import ROOT_INDEX, UNEXPANDED, Graph, SearchSummary, edges_by_action
from mcgs_jax._src.gumbel import (
  GumbelMuZeroExtraData,
  gumbel_muzero_policy,
  gumbel_muzero_root_action_selection,
)
from mcgs_jax._src.hashing import hash_pytree
from mcgs_jax._src.options import STOP_RULES, GraphOptions
from mcgs_jax._src.policies import muzero_policy, uct_policy
from mcgs_jax._src.qtransforms import (
  qtransform_by_min_max,
  qtransform_by_parent_and_siblings,
  qtransform_completed_by_mix_value,
)
from mcgs_jax._src.reuse import empty_like, reroot
from mcgs_jax._src.search import search
from mcgs_jax._src.stochastic import stochastic_muzero_policy
from mcgs_jax._src.types import (
  ChanceRecurrentFnOutput,
  DecisionRecurrentFnOutput,
  HashFn,
  InteriorActionSelectionFn,
  LoopFn,
  PolicyOutput,
  QTransform,
  RecurrentFn,
  RecurrentFnOutput,
  RecurrentState,
  RootActionSelectionFn,
  RootFnOutput,
)

Tree = Graph  # mctx's name: code that reads `mctx.Tree` fields reads a `Graph`.
UNVISITED = UNEXPANDED  # mctx's name of the child index of an unexpanded edge

__version__ = "0.2.0"

__all__ = [
  "ChanceRecurrentFnOutput",
  "DecisionRecurrentFnOutput",
  "Graph",
  "GraphOptions",
  "GumbelMuZeroExtraData",
  "HashFn",
  "InteriorActionSelectionFn",
  "LoopFn",
  "PolicyOutput",
  "QTransform",
  "ROOT_INDEX",
  "RecurrentFn",
  "RecurrentFnOutput",
  "RecurrentState",
  "RootActionSelectionFn",
  "RootFnOutput",
  "STOP_RULES",
  "SearchSummary",
  "Tree",
  "UNEXPANDED",
  "UNVISITED",
  "edges_by_action",
  "empty_like",
  "gumbel_muzero_interior_action_selection",
  "gumbel_muzero_policy",
  "gumbel_muzero_root_action_selection",
  "hash_pytree",
  "muzero_action_selection",
  "muzero_policy",
  "prune_forced_playouts",
  "qtransform_by_min_max",
  "qtransform_by_parent_and_siblings",
  "qtransform_completed_by_mix_value",
  "reroot",
  "search",
  "stochastic_muzero_policy",
  "uct_action_selection",
  "uct_policy",
]

# Modules of version 0.1 that moved: `{old name: (the module it still gives, where
# the warning sends users)}`. `from mcgs_jax import evaluators` and the like keep
# working for one release, with a DeprecationWarning.
_MOVED_MODULES = {
  "evaluators": ("mcgs_jax.games.evaluators", "mcgs_jax.games.evaluators"),
  "solvers": ("mcgs_jax.games.solvers", "mcgs_jax.games.solvers"),
  "arena": ("mcgs_jax.apps.arena", "mcgs_jax.apps.arena"),
  "train": ("mcgs_jax.apps.train", "mcgs_jax.apps.train"),
  "viz": ("mcgs_jax.apps.viz", "mcgs_jax.apps.viz"),
  "reuse": ("mcgs_jax._src.reuse", "mcgs_jax.reroot and mcgs_jax.empty_like"),
}


def __getattr__(name: str) -> Any:
  if name in _MOVED_MODULES:
    module, new_home = _MOVED_MODULES[name]
    warnings.warn(
      f"mcgs_jax.{name} moved to {new_home}; the old name goes in version 0.3",
      DeprecationWarning,
      stacklevel=2,
    )
    return importlib.import_module(module)
  raise AttributeError(f"module 'mcgs_jax' has no attribute {name!r}")
