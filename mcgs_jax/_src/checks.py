"""Input checks that run at trace time and name the argument at fault."""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def _shape(x):
  return tuple(np.shape(x))


def check_int(name: str, value, *, minimum: int):
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise TypeError(f"{name} must be a Python int, got {type(value).__name__} {value!r}")
  if value < minimum:
    raise ValueError(f"{name} must be >= {minimum}, got {value}")
  return int(value)


def check_root(root):
  """Checks a `RootFnOutput` and returns `(batch_size, num_actions)`."""
  logits_shape = _shape(root.prior_logits)
  if len(logits_shape) != 2:
    raise ValueError(f"root.prior_logits must have shape [B, A], got {logits_shape}")
  batch_size, num_actions = logits_shape
  if num_actions < 1:
    raise ValueError(f"root.prior_logits must have at least one action, got {logits_shape}")
  if not jnp.issubdtype(jnp.result_type(root.prior_logits), jnp.floating):
    raise TypeError(
      f"root.prior_logits must be floating point, got {jnp.result_type(root.prior_logits)}"
    )
  if _shape(root.value) != (batch_size,):
    raise ValueError(
      f"root.value must have shape [B] = ({batch_size},) to match "
      f"root.prior_logits {logits_shape}, got {_shape(root.value)}"
    )
  if not jnp.issubdtype(jnp.result_type(root.value), jnp.floating):
    raise TypeError(f"root.value must be floating point, got {jnp.result_type(root.value)}")
  leaves = jax.tree_util.tree_leaves_with_path(root.embedding)
  if not leaves:
    raise ValueError("root.embedding must hold at least one array")
  for path, leaf in leaves:
    if len(_shape(leaf)) < 1 or _shape(leaf)[0] != batch_size:
      raise ValueError(
        f"root.embedding{jax.tree_util.keystr(path)} must have leading batch "
        f"axis B = {batch_size}, got shape {_shape(leaf)}"
      )
  return batch_size, num_actions


def check_invalid_actions(invalid_actions, batch_size: int, num_actions: int):
  """Returns `invalid_actions` as bool `[B, A]` (all False when None)."""
  if invalid_actions is None:
    return jnp.zeros((batch_size, num_actions), jnp.bool_)
  if _shape(invalid_actions) != (batch_size, num_actions):
    raise ValueError(
      f"invalid_actions must have shape [B, A] = ({batch_size}, {num_actions}), "
      f"got {_shape(invalid_actions)}"
    )
  return jnp.asarray(invalid_actions).astype(jnp.bool_)


def check_recurrent_output(
  output, new_embedding, node_embedding, batch_size: int, num_actions: int
):
  """Checks what `recurrent_fn` returned against the root's shapes."""
  for name, expected in (
    ("reward", (batch_size,)),
    ("discount", (batch_size,)),
    ("prior_logits", (batch_size, num_actions)),
    ("value", (batch_size,)),
  ):
    got = _shape(getattr(output, name))
    if got != expected:
      raise ValueError(f"recurrent_fn returned {name} of shape {got}; expected {expected}")
  # jaxlib ships no type stub for PyTreeDef, so mypy cannot compare two of them.
  expected_struct: Any = jax.tree_util.tree_structure(node_embedding)
  if jax.tree_util.tree_structure(new_embedding) != expected_struct:
    raise ValueError(
      "recurrent_fn returned an embedding whose pytree structure differs "
      f"from root.embedding: {jax.tree_util.tree_structure(new_embedding)} vs "
      f"{expected_struct}"
    )
  for (path, new), old in zip(
    jax.tree_util.tree_leaves_with_path(new_embedding),
    jax.tree_util.tree_leaves(node_embedding),
    strict=True,
  ):
    if _shape(new) != _shape(old):
      raise ValueError(
        f"recurrent_fn returned embedding{jax.tree_util.keystr(path)} of shape "
        f"{_shape(new)}; root.embedding has {_shape(old)}"
      )


def check_key(key, batch_size: int, name: str = "hash_fn"):
  """Checks what a key function (`name`) returned: uint32 `[B, L]` with L >= 1."""
  shape = _shape(key)
  if len(shape) != 2 or shape[0] != batch_size or shape[1] < 1:
    raise ValueError(
      f"{name} must return uint32 [B, L] with B = {batch_size} and L >= 1, got shape {shape}"
    )
  if jnp.result_type(key) != jnp.uint32:
    raise TypeError(f"{name} must return uint32 [B, L], got dtype {jnp.result_type(key)}")
  return key
