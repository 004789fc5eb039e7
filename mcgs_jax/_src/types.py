"""The callables a search takes and the output of a policy, named as in mctx: the
layer above the graph.

The values that need no graph (`RootFnOutput`, `RecurrentFnOutput`,
`SearchSummary`, ...) are declared in `base.py`, below the graph, and re-exported
here, so that `types.X` names every type of a search's signature.
"""

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import chex

from mcgs_jax._src.base import (
  Embedding,
  HashFn,
  Params,
  RecurrentFn,
  RecurrentFnOutput,
  RecurrentState,
  RootFnOutput,
  SearchSummary,
)
from mcgs_jax._src.graph import Graph

__all__ = [
  "Embedding",
  "HashFn",
  "InteriorActionSelectionFn",
  "LoopFn",
  "Params",
  "PolicyOutput",
  "QTransform",
  "RecurrentFn",
  "RecurrentFnOutput",
  "RecurrentState",
  "RootActionSelectionFn",
  "RootFnOutput",
  "SearchSummary",
]

# Selection rules and q-transforms see one game's graph (unbatched, under `jax.vmap`).
RootActionSelectionFn = Callable[[chex.PRNGKey, Graph, chex.Array], chex.Array]
InteriorActionSelectionFn = Callable[[chex.PRNGKey, Graph, chex.Array, chex.Array], chex.Array]
# `(graph, node_index) -> [A]` scores, hyperparameters bound (`functools.partial`).
QTransform = Callable[[Graph, chex.Array], chex.Array]

_Carry = TypeVar("_Carry")


class LoopFn(Protocol):
  """The loop over simulations, with `jax.lax.fori_loop`'s signature (`hk.fori_loop`
  has it too): `body_fun(i, carry)` for `i` from `lower` to `upper - 1`, starting
  from `init_val`; returns the last carry."""

  def __call__(
    self, lower: int, upper: int, body_fun: Callable[[Any, _Carry], _Carry], init_val: _Carry, /
  ) -> _Carry: ...


@chex.dataclass(frozen=True)
class PolicyOutput:
  """What a policy returns.

  action: `[B]` int32, the action to play; with the solver never a proven loss while
    a valid action is not one.
  action_weights: `[B, A]` float, the policy target (for `muzero_policy` and
    `uct_policy` the visit distribution over the root's valid edges, edges the solver
    has proven lost included: the playouts they took before their proof); never NaN.
  search_graph: the `Graph` the search built; `search_tree` is an alias of it so that
    code written for mctx keeps working.
  """

  action: chex.Array
  action_weights: chex.Array
  search_graph: Graph

  @property
  def search_tree(self) -> Graph:
    return self.search_graph
