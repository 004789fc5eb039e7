"""The values and callables a search takes and returns, named and shaped as in
mctx so that code written for mctx runs unchanged: the root and recurrent outputs,
the callables of a search's signature, the output of a policy (its `SearchSummary`
is declared beside the graph it summarizes, in `graph`), and the inputs, node
embeddings and graph of a search with chance nodes.

A search with chance nodes (mctx's Stochastic MuZero, whose names these are, so
that code written for `mctx.stochastic_muzero_policy` runs unchanged) splits a move
in two: `decision_recurrent_fn` maps (state, action) to an *afterstate* (what the
move decided: in 2048 the board after sliding), and `chance_recurrent_fn` maps
(afterstate, chance outcome) to the next state (where the new tile lands). Decision
nodes hold states, chance nodes hold afterstates.
"""

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import chex

from mcgs_jax._src.graph import Graph, SearchSummary

__all__ = [
  "ChanceData",
  "ChanceRecurrentFn",
  "ChanceRecurrentFnOutput",
  "DecisionRecurrentFn",
  "DecisionRecurrentFnOutput",
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
  "StochasticGraph",
  "StochasticRecurrentState",
]

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


# The functions a search evaluates states with, named as in mctx.
RecurrentFn = Callable[
  [Params, chex.PRNGKey, chex.Array, Embedding], tuple[RecurrentFnOutput, Embedding]
]
HashFn = Callable[[Embedding], chex.Array]


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


@chex.dataclass(frozen=True)
class DecisionRecurrentFnOutput:
  """What `decision_recurrent_fn` returns for one move of every game.

  chance_logits: `[B, C]` float, logits of the `C` chance outcomes at the
    afterstate (`-inf` or the lowest finite logit for an impossible outcome; at
    least one must be possible).
  afterstate_value: `[B]` float, value of the afterstate for the player who moved.
  reward: `[B]` float or None, reward of the move itself, on the edge from the
    state to its afterstate. None (mctx's only choice) means 0. Put a reward that
    the move alone decides here (2048's merges): the afterstate key then need not
    hold it, and moves from different states that reach the same afterstate with
    different rewards still share one chance node.
  """

  chance_logits: chex.Array
  afterstate_value: chex.Array
  reward: chex.Array | None = None


@chex.dataclass(frozen=True)
class ChanceRecurrentFnOutput:
  """What `chance_recurrent_fn` returns for one chance outcome of every game.

  action_logits: `[B, A]` float, policy logits at the next state.
  value: `[B]` float, value of the next state for its player to move.
  reward: `[B]` float, reward of the transition from the afterstate.
  discount: `[B]` float, multiplies the next state's value: 1 in a one-player
    game, -1 when the other player moves next, 0 when the next state is terminal.
  """

  action_logits: chex.Array
  value: chex.Array
  reward: chex.Array
  discount: chex.Array


@chex.dataclass(frozen=True)
class StochasticRecurrentState:
  """The embedding every node of a stochastic search holds (as mctx's).

  state_embedding: pytree of `[B, ...]`, the state (meaningful at decision nodes).
  afterstate_embedding: pytree of `[B, ...]`, the afterstate (meaningful at chance
    nodes).
  is_decision_node: `[B]` bool, True for a decision node (a state), False for a
    chance node (an afterstate).
  """

  state_embedding: Any
  afterstate_embedding: Any
  is_decision_node: chex.Array


@chex.dataclass(frozen=True)
class ChanceData:
  """`extra_data` of a stochastic search graph.

  root_invalid_actions: `[B, A]` bool, the root's invalid actions over the `A`
    decision actions (the graph's own field spans all `W` columns). Its width tells
    decision columns (`[0, A)`) from the rest.
  """

  root_invalid_actions: chex.Array


@chex.dataclass(frozen=True)
class StochasticGraph(Graph):
  """A `Graph` with decision and chance nodes, `W = max(A, C)` columns wide.

  At a decision node column `a < A` is action `a`; at a chance node column `c < C`
  is outcome `c`; the other columns are never expanded. `embeddings` is a
  `StochasticRecurrentState`; `extra_data` a `ChanceData`. Every field is the
  `Graph`'s; only `summary()` differs: it keeps the root's `A` decision columns,
  as `mctx.stochastic_muzero_policy`'s tree (sliced to the actions) does.
  """

  @classmethod
  def from_graph(cls, graph: Graph) -> "StochasticGraph":
    """`graph`, every field as it is, as a `StochasticGraph`."""
    return cls(**{field.name: getattr(graph, field.name) for field in dataclasses.fields(Graph)})

  @property
  def num_decision_actions(self) -> int:
    """`A`, the number of actions at a decision node."""
    return self.extra_data.root_invalid_actions.shape[-1]

  def summary(self) -> SearchSummary:
    """Root statistics of every game over the `A` actions, as mctx's summary of a
    stochastic search."""
    full = Graph.summary(self)
    actions = self.num_decision_actions
    # The root is a decision node: its columns past A are never visited, so the
    # visit probabilities over A columns sum to what they summed to over W.
    return full.replace(
      visit_counts=full.visit_counts[:, :actions],
      visit_probs=full.visit_probs[:, :actions],
      qvalues=full.qvalues[:, :actions],
    )


# What the two functions look like, as mctx's DecisionRecurrentFn / ChanceRecurrentFn.
DecisionRecurrentFn = Callable[
  [Params, chex.PRNGKey, chex.Array, Embedding],
  tuple[DecisionRecurrentFnOutput, Embedding],
]
ChanceRecurrentFn = Callable[
  [Params, chex.PRNGKey, chex.Array, Embedding],
  tuple[ChanceRecurrentFnOutput, Embedding],
]
