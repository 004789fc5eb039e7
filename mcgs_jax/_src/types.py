"""Inputs and outputs of a search, named and shaped as in mctx so that code written
for `mctx` runs unchanged against `mcgs_jax`."""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import chex

if TYPE_CHECKING:
  from mcgs_jax._src.graph import Graph

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


# The callables a search takes, named as in mctx. Selection rules and q-transforms
# see one game's graph (unbatched, under `jax.vmap`).
RecurrentFn = Callable[
  [Params, chex.PRNGKey, chex.Array, Embedding], tuple[RecurrentFnOutput, Embedding]
]
HashFn = Callable[[Embedding], chex.Array]
RootActionSelectionFn = Callable[[chex.PRNGKey, "Graph", chex.Array], chex.Array]
InteriorActionSelectionFn = Callable[[chex.PRNGKey, "Graph", chex.Array, chex.Array], chex.Array]
QTransform = Callable[..., chex.Array]  # (graph, node_index, **hyperparameters) -> [A]
LoopFn = Callable[..., Any]  # jax.lax.fori_loop's signature


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


@chex.dataclass(frozen=True)
class PolicyOutput:
  """What a policy returns.

  action: `[B]` int32, the action to play.
  action_weights: `[B, A]` float, the policy target (visit distribution for
    `muzero_policy`); never NaN.
  search_graph: the `Graph` the search built; `search_tree` is an alias of it so that
    code written for mctx keeps working.
  """

  action: chex.Array
  action_weights: chex.Array
  search_graph: "Graph"

  @property
  def search_tree(self) -> "Graph":
    return self.search_graph
