"""Gumbel MuZero on a graph (Danihelka et al. 2022, "Policy improvement by planning
with Gumbel"), with the arguments and results of `mctx.gumbel_muzero_policy`.

At the root, Sequential Halving with Gumbel noise decides which action each playout
takes; at every other node a deterministic rule steers the edge visit counts towards
`softmax(prior_logits + completed_qvalues)`. Both rules read edge statistics,
`N(n, a) = graph.edge_visits` and the live `Q(n, a) = graph.qvalues(n)`, so in graph
mode a shared child's current value is seen through every edge into it. With
`transpositions=False` the search is mctx's tree search, and the same inputs and key
give mctx's visit counts, action and action weights (up to float rounding in
near-ties).

The root rule and the winner are in `sequential_halving`, the interior rule in
`action_selection`, the policy in `gumbel_policy`.
"""

from mcgs_jax._src.action_selection import gumbel_muzero_interior_action_selection
from mcgs_jax._src.gumbel.gumbel_policy import gumbel_muzero_policy
from mcgs_jax._src.gumbel.sequential_halving import (
  GumbelMuZeroExtraData,
  considered_visit_sequence,
  considered_visit_table,
  gumbel_muzero_root_action_selection,
  make_gumbel_selection,
)

__all__ = [
  "GumbelMuZeroExtraData",
  "considered_visit_sequence",
  "considered_visit_table",
  "gumbel_muzero_interior_action_selection",
  "gumbel_muzero_policy",
  "gumbel_muzero_root_action_selection",
  "make_gumbel_selection",
]
