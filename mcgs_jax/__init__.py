"""mcgs_jax: Monte-Carlo Graph Search in JAX, a drop-in companion to mctx."""

from mcgs_jax.graph import Graph, ROOT_INDEX, UNEXPANDED
from mcgs_jax.gumbel import (GumbelMuZeroExtraData, gumbel_muzero_interior_action_selection,
                             gumbel_muzero_policy, gumbel_muzero_root_action_selection)
from mcgs_jax.hashing import hash_pytree, hash_words
from mcgs_jax.policies import muzero_policy, uct_policy
from mcgs_jax.qtransforms import (qtransform_by_min_max, qtransform_by_parent_and_siblings,
                                  qtransform_completed_by_mix_value)
from mcgs_jax.reuse import reroot
from mcgs_jax.search import Path, backup, expand, search, select
from mcgs_jax.selection import muzero_action_selection, uct_action_selection
from mcgs_jax.types import (PolicyOutput, RecurrentFnOutput, RootFnOutput,
                            SearchSummary)

__version__ = "0.1.0"

__all__ = [
    "Graph", "GumbelMuZeroExtraData", "Path", "PolicyOutput", "ROOT_INDEX", "RecurrentFnOutput", "RootFnOutput",
    "SearchSummary", "UNEXPANDED", "backup", "expand",
    "gumbel_muzero_interior_action_selection", "gumbel_muzero_policy",
    "gumbel_muzero_root_action_selection", "hash_pytree", "hash_words",
    "muzero_action_selection", "muzero_policy", "qtransform_by_min_max",
    "qtransform_by_parent_and_siblings", "qtransform_completed_by_mix_value", "reroot",
    "search",
    "select", "uct_action_selection", "uct_policy",
]
