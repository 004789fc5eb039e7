"""Decision and chance nodes in one graph: the wrapped `recurrent_fn`, the typed
transposition key and the selection rule of each node type.

The graph is `W = max(A, C)` columns wide. A node's embedding is a
`StochasticRecurrentState`; its `is_decision_node` flag says how to read its
columns (actions or chance outcomes) and which rule selects among them. As in
mctx's Stochastic MuZero, levels alternate: a decision node's children are chance
nodes (edge reward: the move's own reward, 0 in mctx; discount 1), a chance node's
children are decision nodes (reward and discount from `chance_recurrent_fn`).
"""

from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax._src import action_selection, checks, types
from mcgs_jax._src.graph import EDGE_FIELDS, Graph
from mcgs_jax._src.types import (
  ChanceRecurrentFn,
  ChanceRecurrentFnOutput,
  DecisionRecurrentFn,
  DecisionRecurrentFnOutput,
  StochasticRecurrentState,
)

# Last key lane of a decision node's state and of a chance node's afterstate: a state
# and an afterstate never share a key, whatever their embeddings hash to.
DECISION_TAG = 0
CHANCE_TAG = 1


def pad_columns(logits: chex.Array, width: int) -> chex.Array:
  """`[B, K] -> [B, width]` with the lowest finite logit in the new columns (finite:
  a softmax over the whole row never sees -inf - -inf = NaN)."""
  logits = jnp.asarray(logits)
  missing = width - logits.shape[-1]
  if not missing:
    return logits
  filler = jnp.full(logits.shape[:-1] + (missing,), jnp.finfo(logits.dtype).min, logits.dtype)
  return jnp.concatenate([logits, filler], axis=-1)


def check_decision_output(
  output: Any, batch_size: int, num_chance_outcomes: int | None = None
) -> int:
  """Checks what `decision_recurrent_fn` returned; returns `C`."""
  for name in ("chance_logits", "afterstate_value"):
    if not hasattr(output, name):
      raise TypeError(
        f"decision_recurrent_fn must return (DecisionRecurrentFnOutput, "
        f"afterstate_embedding); its output has no {name!r}"
      )
  shape = np.shape(output.chance_logits)
  if len(shape) != 2 or shape[0] != batch_size:
    raise ValueError(
      f"decision_recurrent_fn returned chance_logits of shape {shape}; "
      f"expected [B, C] with B = {batch_size}"
    )
  if shape[1] < 1:
    raise ValueError(
      f"decision_recurrent_fn returned chance_logits of shape {shape}: zero "
      "chance outcomes; a chance node needs at least one (C >= 1)"
    )
  if num_chance_outcomes is not None and shape[1] != num_chance_outcomes:
    raise ValueError(
      f"decision_recurrent_fn returned chance_logits of shape {shape}; "
      f"expected [B, C] = ({batch_size}, {num_chance_outcomes}) as at the root"
    )
  if not jnp.issubdtype(jnp.result_type(output.chance_logits), jnp.floating):
    raise TypeError(
      f"decision_recurrent_fn returned chance_logits of dtype "
      f"{jnp.result_type(output.chance_logits)}; expected floating point"
    )
  if np.shape(output.afterstate_value) != (batch_size,):
    raise ValueError(
      f"decision_recurrent_fn returned afterstate_value of shape "
      f"{np.shape(output.afterstate_value)}; expected [B] = ({batch_size},)"
    )
  reward = getattr(output, "reward", None)
  if reward is not None and np.shape(reward) != (batch_size,):
    raise ValueError(
      f"decision_recurrent_fn returned reward of shape {np.shape(reward)}; "
      f"expected [B] = ({batch_size},) or None"
    )
  return shape[1]


def check_chance_output(output: Any, batch_size: int, num_actions: int) -> None:
  """Checks what `chance_recurrent_fn` returned."""
  for name in ("action_logits", "value", "reward", "discount"):
    if not hasattr(output, name):
      raise TypeError(
        f"chance_recurrent_fn must return (ChanceRecurrentFnOutput, "
        f"state_embedding); its output has no {name!r}"
      )
  expected = {
    "action_logits": (batch_size, num_actions),
    "value": (batch_size,),
    "reward": (batch_size,),
    "discount": (batch_size,),
  }
  for name, shape in expected.items():
    got = np.shape(getattr(output, name))
    if got != shape:
      raise ValueError(f"chance_recurrent_fn returned {name} of shape {got}; expected {shape}")


def check_same_structure(
  what: str,
  new: chex.ArrayTree,
  reference: chex.ArrayTree,
  reference_name: str,
  batch_size: int,
) -> None:
  """`new` must have `reference`'s pytree structure and leaf shapes, with a leading
  batch axis of `batch_size` (the reference's may differ: K playouts per game)."""
  # jaxlib ships no type stub for PyTreeDef, so mypy cannot compare two of them.
  structure: Any = jax.tree_util.tree_structure(new)
  expected = jax.tree_util.tree_structure(reference)
  if structure != expected:
    raise ValueError(f"{what} has pytree structure {structure}; {reference_name} has {expected}")
  for (path, leaf), ref in zip(
    jax.tree_util.tree_leaves_with_path(new), jax.tree_util.tree_leaves(reference), strict=True
  ):
    if np.shape(leaf)[:1] != (batch_size,) or np.shape(leaf)[1:] != np.shape(ref)[1:]:
      raise ValueError(
        f"{what}{jax.tree_util.keystr(path)} has shape {np.shape(leaf)}; "
        f"expected [B = {batch_size}] + {np.shape(ref)[1:]} as "
        f"{reference_name}"
      )


def make_recurrent_fn(
  decision_recurrent_fn: DecisionRecurrentFn,
  chance_recurrent_fn: ChanceRecurrentFn,
  *,
  num_actions: int,
  num_chance_outcomes: int,
  afterstate_template: chex.ArrayTree,
) -> types.RecurrentFn:
  """One `recurrent_fn` over both node types, `W = max(A, C)` logits wide.

  Called on a decision node's edge (an action), it returns the chance node of the
  afterstate: prior = the chance logits, value = the afterstate value, reward = the
  move's reward (0 when None), discount 1. Called on a chance node's edge (an
  outcome), it returns the decision node of the next state with the chance
  function's logits, value, reward and discount. Both functions run on the whole
  batch (the same key for both, as mctx) and each game keeps the result of its
  node type; the other one is computed on a harmless input (action 0 or outcome 0)
  and dropped.
  """
  width = max(num_actions, num_chance_outcomes)

  def recurrent_fn(
    params: types.Params,
    rng_key: chex.PRNGKey,
    action: chex.Array,
    embedding: StochasticRecurrentState,
  ) -> tuple[types.RecurrentFnOutput, StochasticRecurrentState]:
    is_decision = embedding.is_decision_node
    batch_size = is_decision.shape[0]
    move = jnp.where(is_decision, action, 0).astype(jnp.int32)
    outcome = jnp.where(is_decision, 0, action).astype(jnp.int32)

    decision_output, afterstate = decision_recurrent_fn(
      params, rng_key, move, embedding.state_embedding
    )
    check_decision_output(decision_output, batch_size, num_chance_outcomes)
    check_same_structure(
      "decision_recurrent_fn's afterstate embedding",
      afterstate,
      afterstate_template,
      "at the root",
      batch_size,
    )
    chance_output, state = chance_recurrent_fn(
      params, rng_key, outcome, embedding.afterstate_embedding
    )
    check_chance_output(chance_output, batch_size, num_actions)
    check_same_structure(
      "chance_recurrent_fn's state embedding",
      state,
      embedding.state_embedding,
      "root.embedding",
      batch_size,
    )

    output = _output_of_node_type(is_decision, decision_output, chance_output, width)
    new_embedding = StochasticRecurrentState(
      state_embedding=state, afterstate_embedding=afterstate, is_decision_node=~is_decision
    )
    return output, new_embedding

  return recurrent_fn


def _output_of_node_type(
  is_decision: chex.Array,
  decision_output: DecisionRecurrentFnOutput,
  chance_output: ChanceRecurrentFnOutput,
  width: int,
) -> types.RecurrentFnOutput:
  """Each game's output of its node type, `W = width` logits wide: a decision node's
  edge leads to the afterstate (`decision_output`: the chance logits, the afterstate
  value, the move's reward or 0, discount 1), a chance node's edge to the next state
  (`chance_output`). `is_decision`: `[B]` bool, the type of the edge's node."""
  value = jnp.asarray(chance_output.value)
  move_reward = getattr(decision_output, "reward", None)
  move_reward = jnp.zeros_like(value) if move_reward is None else move_reward
  chance_logits = jnp.asarray(decision_output.chance_logits)
  # No possible outcome (every chance logit -inf) cannot be used, but the padding is
  # finite: as NaN the row is counted and dropped (`leaf_evaluation.finite_outputs`).
  impossible = ~jnp.any(chance_logits > -jnp.inf, axis=-1, keepdims=True)
  chance_logits = jnp.where(impossible, jnp.nan, chance_logits)
  return types.RecurrentFnOutput(
    prior_logits=jnp.where(
      is_decision[:, None],
      pad_columns(chance_logits, width),
      pad_columns(chance_output.action_logits, width),
    ),
    value=jnp.where(is_decision, decision_output.afterstate_value, value),
    reward=jnp.where(is_decision, move_reward, chance_output.reward),
    discount=jnp.where(is_decision, 1.0, chance_output.discount).astype(value.dtype),
  )


def make_key_fn(hash_fn: Callable, afterstate_hash_fn: Callable) -> types.HashFn:
  """The key of a `StochasticRecurrentState`: `hash_fn(state)` at a decision node,
  `afterstate_hash_fn(afterstate)` at a chance node (the shorter padded with zero
  lanes), then one lane with the node type. Two states, or two afterstates, share a
  node when their keys agree; a state and an afterstate never do."""

  def key_fn(embedding: StochasticRecurrentState) -> chex.Array:
    is_decision = embedding.is_decision_node
    batch_size = is_decision.shape[0]
    state_key = checks.check_key(hash_fn(embedding.state_embedding), batch_size, "hash_fn")
    afterstate_key = checks.check_key(
      afterstate_hash_fn(embedding.afterstate_embedding), batch_size, "afterstate_hash_fn"
    )
    lanes = max(state_key.shape[1], afterstate_key.shape[1])
    pad = lambda key: jnp.pad(key, ((0, 0), (0, lanes - key.shape[1])))
    key = jnp.where(is_decision[:, None], pad(state_key), pad(afterstate_key))
    tag = jnp.where(is_decision, DECISION_TAG, CHANCE_TAG).astype(jnp.uint32)
    return jnp.concatenate([key, tag[:, None]], axis=1)

  return key_fn


def columns(graph: Graph, width: int) -> Graph:
  """One game's graph seen through its first `width` columns: every edge table,
  the prior logits and the root's invalid actions sliced to `[..., :width]`, node
  tables unchanged (mctx's `_mask_tree`). With compact edges the slots (which hold a
  node's valid actions or outcomes first) are sliced alike, and the root's invalid
  actions, read by action, are kept whole."""
  sliced = {name: getattr(graph, name)[..., :width] for name in EDGE_FIELDS}
  if graph.children_actions is not None:
    return graph.replace(
      **sliced,
      children_prior_logits=graph.children_prior_logits[..., :width],
      children_actions=graph.children_actions[..., :width],
    )
  return graph.replace(
    **sliced,
    children_prior_logits=graph.children_prior_logits[..., :width],
    root_invalid_actions=graph.root_invalid_actions[..., :width],
  )


def make_selection(
  decision_rule: types.InteriorActionSelectionFn, *, num_actions: int, num_chance_outcomes: int
) -> tuple[types.RootActionSelectionFn, types.InteriorActionSelectionFn]:
  """`(root_fn, interior_fn)`: `decision_rule(key, graph, node, depth)` (e.g. PUCT)
  on the `A` action columns of a decision node, `action_selection.chance_selection` on the `C`
  outcome columns of a chance node."""

  def interior_fn(
    rng_key: chex.PRNGKey, graph: Graph, node_index: chex.Array, depth: chex.Array
  ) -> chex.Array:
    is_decision = graph.embeddings.is_decision_node[node_index]
    decision = decision_rule(rng_key, columns(graph, num_actions), node_index, depth)
    chance = action_selection.chance_selection(
      columns(graph, num_chance_outcomes), node_index, depth
    )
    return jnp.where(is_decision, decision, chance).astype(jnp.int32)

  def root_fn(rng_key: chex.PRNGKey, graph: Graph, node_index: chex.Array) -> chex.Array:
    return interior_fn(rng_key, graph, node_index, 0)

  return root_fn, interior_fn
