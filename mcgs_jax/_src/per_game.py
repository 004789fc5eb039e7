"""Choosing between two batched pytrees game by game."""

import chex
import jax
import jax.numpy as jnp


def where_per_game(
  mask: chex.Array, on_true: chex.ArrayTree, on_false: chex.ArrayTree
) -> chex.ArrayTree:
  """Per game, the leaves of `on_true` where `mask [B]` is set, else `on_false`'s.

  Both trees have the same structure and leaves of shape `[B, ...]`; the mask is
  broadcast over each leaf's trailing axes.
  """

  def pick(true_leaf: chex.Array, false_leaf: chex.Array) -> chex.Array:
    return jnp.where(
      jnp.reshape(mask, mask.shape + (1,) * (true_leaf.ndim - 1)), true_leaf, false_leaf
    )

  return jax.tree_util.tree_map(pick, on_true, on_false)
