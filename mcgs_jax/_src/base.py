"""The values a search takes and returns, named and shaped as in mctx so that code
written for `mctx` runs unchanged against `mcgs_jax`.

The bottom layer of the package: it imports nothing from `mcgs_jax`, so the graph
(`graph.py`) and everything above it can use these types.
"""

from collections.abc import Callable
from typing import Any

import chex

Params = Any
Embedding = Any  # any pytree whose leaves have a leading batch axis `[B, ...]`
# mctx's name of the same thing: the state `recurrent_fn` takes and returns (any
# pytree, `()` included: see `GraphOptions.transpositions`).
RecurrentState = Embedding


@chex.dataclass(frozen=True)
class RootFnOutput:
  """The evaluation of the root state of every game in the batch.

  prior_logits: `[B, A]` float, policy logits at the root.
  value: `[B]` float, value of the root state for the player to move.
  embedding: pytree of `[B, ...]` arrays, the state handed to `recurrent_fn`.
  """

  prior_logits: chex.Array
  value: chex.Array
  embedding: Embedding


@chex.dataclass(frozen=True)
class RecurrentFnOutput:
  """What `recurrent_fn` returns for one transition of every game.

  reward: `[B]` float, reward of the transition for the player who moved.
  discount: `[B]` float, multiplies the value of the next state: `-1` between the two
    players of a zero-sum game, `1` in a one-player game, `0` when the next state is
    terminal (the search then never looks below it).
  prior_logits: `[B, A]` float, policy logits at the next state.
  value: `[B]` float, value of the next state for its player to move.
  """

  reward: chex.Array
  discount: chex.Array
  prior_logits: chex.Array
  value: chex.Array


@chex.dataclass(frozen=True)
class SearchSummary:
  """Statistics at the root of every game, as `mctx.SearchSummary`.

  visit_counts: `[B, A]` float, edge visits `N(root, a)`.
  visit_probs: `[B, A]` float, `visit_counts` normalised to sum to one (all zero when
    the root has no visited edge, e.g. every action invalid).
  value: `[B]` float, `Q(root)`.
  qvalues: `[B, A]` float, `r(root, a) + discount(root, a) * Q(child)`; 0 for an
    unexpanded action.
  """

  visit_counts: chex.Array
  visit_probs: chex.Array
  value: chex.Array
  qvalues: chex.Array


# The functions a search evaluates states with, named as in mctx.
RecurrentFn = Callable[
  [Params, chex.PRNGKey, chex.Array, Embedding], tuple[RecurrentFnOutput, Embedding]
]
HashFn = Callable[[Embedding], chex.Array]
