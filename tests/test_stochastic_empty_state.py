"""A stochastic search whose state embedding is empty (mctx's bandits) but whose
afterstate is not: the default key cannot tell states apart, so it runs as a tree,
as a plain search does (`options.tree_mode_when_unkeyable`), instead of failing in `hash_pytree`."""

import jax
import jax.numpy as jnp
import numpy as np

import mcgs_jax as mg

B, A, C = 2, 3, 2


def _decision_fn(params, rng_key, action, state):
  del params, rng_key, state
  output = mg.DecisionRecurrentFnOutput(
    chance_logits=jnp.zeros((B, C)), afterstate_value=jnp.zeros((B,))
  )
  return output, {"action": action}


def _chance_fn(params, rng_key, outcome, afterstate):
  del params, rng_key, afterstate
  output = mg.ChanceRecurrentFnOutput(
    action_logits=jnp.zeros((B, A)),
    value=outcome.astype(jnp.float32),
    reward=jnp.zeros((B,)),
    discount=jnp.ones((B,)),
  )
  return output, ()


def test_empty_state_embedding_searches_a_tree():
  root = mg.RootFnOutput(prior_logits=jnp.zeros((B, A)), value=jnp.zeros((B,)), embedding=())
  out = jax.jit(
    lambda key: mg.stochastic_muzero_policy(None, key, root, _decision_fn, _chance_fn, 8)
  )(jax.random.PRNGKey(0))
  assert out.search_graph.hash_slots.shape == (B, 0)
  np.testing.assert_array_equal(out.search_graph.num_nodes, [9, 9])
  np.testing.assert_array_equal(out.search_graph.summary().visit_counts.sum(-1), [8, 8])
