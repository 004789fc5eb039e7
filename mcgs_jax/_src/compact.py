"""Compact edges (`GraphOptions.max_children = K`): a node keeps only its valid
actions, the `K` of highest prior, in `K` slots, as KataGo and CrazyAra keep only
the children of legal moves.

A valid action has a positive prior probability (the game adapters give illegal
actions the lowest finite logit, a zero prior) and, at the root, is not invalid.
The slots hold the chosen actions in increasing action order, so that a row of
slots lists its actions in the order a dense row does: ties between equal scores
break alike (the first in action order wins an argmax), and PUCT's tie-break
draws each slot the float its action draws in a dense row. With `K` at least a
node's valid count nothing is left out and a search is the dense one.
"""

import chex
import jax
import jax.numpy as jnp

from mcgs_jax._src import rows


@chex.dataclass(frozen=True)
class Slots:
  """A row of prior logits kept in slots (`K` slots, `A` actions)."""

  logits: chex.Array  # [..., K] float, each slot's prior logit; the lowest float if empty.
  actions: chex.Array  # [..., K] int32, each slot's action, increasing; -1 if empty.
  dropped: chex.Array  # [...] int32, valid actions left out (more than K).


def slot_width(max_children: int | None, num_actions: int) -> int:
  """`W`, the edges per node: `min(max_children, A)`, or `A` for a dense graph."""
  return num_actions if max_children is None else min(max_children, num_actions)


def compact_row(logits: chex.Array, invalid_actions: chex.Array | None, max_children: int) -> Slots:
  """The `max_children` valid actions of highest prior logit of every row of
  `logits [..., A]` (ties: the lower action), in increasing action order, and how
  many valid actions did not fit. `invalid_actions [..., A]` bool (the root's) or
  None."""
  num_actions = logits.shape[-1]
  width = slot_width(max_children, num_actions)
  valid = rows.positive_probability(logits)
  if invalid_actions is not None:
    valid &= ~invalid_actions
  ranked = jnp.where(valid, logits, -jnp.inf)
  best, chosen = jax.lax.top_k(ranked, width)
  # Empty slots sort past every action, then read -1.
  actions = jnp.sort(jnp.where(best > -jnp.inf, chosen, num_actions), axis=-1)
  actions = jnp.where(actions < num_actions, actions, -1).astype(jnp.int32)
  num_valid = jnp.sum(valid, axis=-1, dtype=jnp.int32)
  return Slots(
    logits=gather_from_actions(logits, actions, jnp.finfo(logits.dtype).min),
    actions=actions,
    dropped=jnp.maximum(num_valid - width, 0),
  )


def scatter_to_actions(
  values: chex.Array, actions: chex.Array, num_actions: int, fill: chex.Numeric
) -> chex.Array:
  """`[..., A]`: `values [..., K]` placed at their `actions [..., K]` (-1: none),
  `fill` elsewhere."""
  batch_shape = values.shape[:-1]
  spread = jnp.full((*batch_shape, num_actions), fill, values.dtype)
  flat = spread.reshape(-1, num_actions)
  # An empty slot (-1) writes past the end, where mode="drop" discards it.
  targets = jnp.where(actions < 0, num_actions, actions).reshape(-1, actions.shape[-1])
  rows = jnp.arange(flat.shape[0])[:, None]
  flat = flat.at[rows, targets].set(values.reshape(targets.shape), mode="drop")
  return flat.reshape(spread.shape)


def gather_from_actions(values: chex.Array, actions: chex.Array, fill: chex.Numeric) -> chex.Array:
  """`[..., K]`: `values [..., A]` read at `actions [..., K]`, `fill` where -1."""
  found = jnp.take_along_axis(values, jnp.maximum(actions, 0), axis=-1)
  return jnp.where(actions < 0, jnp.asarray(fill, values.dtype), found)
