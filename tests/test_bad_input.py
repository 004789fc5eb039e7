"""Bad input gets a clear error naming the argument, raised at trace time."""

import jax
import jax.numpy as jnp
import pytest

import mcgs_jax as mg
from mcgs_jax._src.hashing import hash_words
from mcgs_jax.testing import commuting_game

ROOT, RECURRENT = commuting_game()
KEY = jax.random.PRNGKey(0)


def policy(root=None, recurrent_fn=RECURRENT, num_simulations=4, **kwargs):
  root = ROOT(2) if root is None else root
  return jax.jit(
    lambda key: mg.muzero_policy(None, key, root, recurrent_fn, num_simulations, **kwargs)
  )(KEY)


@pytest.mark.parametrize(
  "make_root, message",
  [
    (
      lambda r: r.replace(prior_logits=r.prior_logits[0]),
      r"root.prior_logits must have shape \[B, A\]",
    ),
    (lambda r: r.replace(value=r.value[:, None]), r"root.value must have shape \[B\]"),
    (lambda r: r.replace(value=r.value[:1]), r"root.value must have shape \[B\] = \(2,\)"),
    (
      lambda r: r.replace(
        embedding={"total": r.embedding["total"][:1], "steps": r.embedding["steps"]}
      ),
      r"root.embedding\['total'\] must have leading batch axis B = 2",
    ),
    (lambda r: r.replace(prior_logits=jnp.zeros((2, 3), jnp.int32)), "must be floating point"),
  ],
)
def test_bad_root(make_root, message):
  with pytest.raises((ValueError, TypeError), match=message):
    policy(make_root(ROOT(2)))


@pytest.mark.parametrize(
  "kwargs, message",
  [
    (dict(num_simulations=0), "num_simulations must be >= 1"),
    (dict(num_simulations=2.5), "num_simulations must be a Python int"),
    (dict(capacity=1), "capacity must be >= 2"),
    (dict(max_depth=0), "max_depth must be >= 1"),
    (dict(probe_window=0), "probe_window must be >= 1"),
    (
      dict(invalid_actions=jnp.zeros((2, 4), bool)),
      r"invalid_actions must have shape \[B, A\] = \(2, 3\)",
    ),
    (dict(hash_fn=lambda e: jnp.zeros((2, 2), jnp.int32)), "hash_fn must return uint32"),
    (dict(hash_fn=lambda e: jnp.zeros((2,), jnp.uint32)), r"hash_fn must return uint32 \[B, L\]"),
    (dict(hash_fn=lambda e: jnp.zeros((3, 2), jnp.uint32)), "B = 2"),
    (dict(dirichlet_fraction=1.5), "dirichlet_fraction must be in"),
    (dict(dirichlet_alpha=0.0), "dirichlet_alpha must be > 0"),
  ],
)
def test_bad_arguments(kwargs, message):
  with pytest.raises((ValueError, TypeError), match=message):
    policy(**kwargs)


def test_bad_recurrent_fn_output():
  def wrong_logits(params, key, action, embedding):
    output, embedding = RECURRENT(params, key, action, embedding)
    return output.replace(prior_logits=output.prior_logits[:, :2]), embedding

  def wrong_embedding(params, key, action, embedding):
    output, _ = RECURRENT(params, key, action, embedding)
    return output, embedding["total"]

  with pytest.raises(
    ValueError, match=r"recurrent_fn returned prior_logits of shape \(2, 2\); expected \(2, 3\)"
  ):
    policy(recurrent_fn=wrong_logits)
  with pytest.raises(ValueError, match="recurrent_fn returned an embedding whose pytree structure"):
    policy(recurrent_fn=wrong_embedding)


def test_hash_words_rejects_bad_input():
  with pytest.raises(TypeError, match="uint32"):
    hash_words(jnp.zeros((2, 3), jnp.int32))
  with pytest.raises(ValueError, match="lanes"):
    hash_words(jnp.zeros((2, 3), jnp.uint32), lanes=0)
