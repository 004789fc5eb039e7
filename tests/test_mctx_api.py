"""mctx's public API as mctx allows it: an empty embedding, traced hyperparameters,
every name of `mctx.__all__`."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax import testing
from mcgs_jax.apps import registry

KEY = jax.random.PRNGKey(3)
B, A = 2, 4
REWARDS = jnp.array([[0.5, -0.25, 1.0, 0.0], [0.0, 0.75, -1.0, 0.25]])


def _bandit_recurrent_fn(params, rng_key, action, embedding):
  """mctx's bandit of policies_test.py: one step, an empty embedding."""
  del params, rng_key
  reward = REWARDS[jnp.arange(B), action]
  output = mg.RecurrentFnOutput(
    reward=reward,
    discount=jnp.full((B,), 0.5),
    prior_logits=jnp.zeros((B, A)),
    value=jnp.zeros((B,)),
  )
  return output, embedding


def _bandit_decision_fn(params, rng_key, action, embedding):
  """A stochastic bandit: the afterstate of an action is worth its reward."""
  del params, rng_key
  output = mg.DecisionRecurrentFnOutput(
    chance_logits=jnp.zeros((B, 2)), afterstate_value=REWARDS[jnp.arange(B), action]
  )
  return output, embedding


def _bandit_chance_fn(params, rng_key, outcome, embedding):
  """The bandit's chance step: outcome k is worth k."""
  del params, rng_key
  output = mg.ChanceRecurrentFnOutput(
    action_logits=jnp.zeros((B, A)),
    value=outcome.astype(jnp.float32),
    reward=jnp.zeros((B,)),
    discount=jnp.ones((B,)),
  )
  return output, embedding


EMPTY_ROOT = mg.RootFnOutput(
  prior_logits=jnp.array([[-1.0, 0.0, 2.0, 1.0], [0.0, 0.5, 0.0, -0.5]]),
  value=jnp.zeros((B,)),
  embedding=(),
)
POLICIES = registry.POLICIES


@pytest.mark.parametrize("name", sorted(POLICIES))
@pytest.mark.slow
def test_empty_embedding_runs_as_a_tree(name):
  policy = POLICIES[name]
  run = lambda **kw: jax.jit(
    lambda key: policy(None, key, EMPTY_ROOT, _bandit_recurrent_fn, 12, **kw)
  )(KEY)
  out, tree = run(), run(transpositions=False)
  # The default key could not tell the states apart: no hash table, one node per edge.
  assert out.search_graph.hash_slots.shape == (B, 0)
  testing.check_graph(out.search_graph, 12, tree_mode=True)
  for got, want in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(tree)):
    np.testing.assert_array_equal(got, want)
  np.testing.assert_array_equal(out.search_graph.num_nodes, [13, 13])


def test_empty_embedding_with_a_user_hash_fn_is_a_graph():
  # A key that calls every state the same: the graph keeps only the root.
  hash_fn = lambda embedding: jnp.zeros((B, 2), jnp.uint32)
  out = jax.jit(
    lambda key: mg.muzero_policy(None, key, EMPTY_ROOT, _bandit_recurrent_fn, 6, hash_fn=hash_fn)
  )(KEY)
  graph = out.search_graph
  assert graph.hash_slots.shape[1] > 0
  np.testing.assert_array_equal(graph.num_nodes, [1, 1])
  assert np.all(np.asarray(graph.transposition_hits) >= 1)


@pytest.mark.slow
def test_empty_embedding_in_search_and_stochastic_policy():
  rule = functools.partial(mg.muzero_action_selection, depth=0)
  graph = jax.jit(
    lambda key: mg.search(
      None,
      key,
      root=EMPTY_ROOT,
      recurrent_fn=_bandit_recurrent_fn,
      root_action_selection_fn=lambda key, graph, node: rule(key, graph, node),
      interior_action_selection_fn=mg.muzero_action_selection,
      num_simulations=5,
    )
  )(KEY)
  np.testing.assert_array_equal(graph.num_nodes, [6, 6])

  out = jax.jit(
    lambda key: mg.stochastic_muzero_policy(
      None, key, EMPTY_ROOT, _bandit_decision_fn, _bandit_chance_fn, 8
    )
  )(KEY)
  assert out.search_graph.hash_slots.shape == (B, 0)
  np.testing.assert_array_equal(out.search_graph.num_nodes, [9, 9])
  np.testing.assert_array_equal(out.search_graph.summary().visit_counts.sum(-1), [8, 8])


def _commuting():
  root, recurrent_fn = testing.commuting_game(num_actions=A)
  return root(B), recurrent_fn


@pytest.mark.slow
def test_traced_muzero_hyperparameters_equal_concrete_ones():
  root, recurrent_fn = _commuting()
  values = dict(
    dirichlet_fraction=0.3, dirichlet_alpha=0.5, pb_c_init=1.5, pb_c_base=500.0, temperature=0.7
  )
  traced = jax.jit(lambda kw: mg.muzero_policy(None, KEY, root, recurrent_fn, 16, **kw))(values)
  concrete = mg.muzero_policy(None, KEY, root, recurrent_fn, 16, **values)
  np.testing.assert_array_equal(traced.action, concrete.action)
  np.testing.assert_allclose(traced.action_weights, concrete.action_weights, atol=1e-6)
  np.testing.assert_array_equal(traced.search_graph.edge_visits, concrete.search_graph.edge_visits)


@pytest.mark.slow
def test_a_dirichlet_fraction_known_to_be_zero_draws_no_noise():
  """A fraction of 0 known at trace time skips the Gamma sampler (its program has
  none), and the search is the same to the bit as with a traced 0, which samples the
  noise and weighs it by 0."""
  root, recurrent_fn = _commuting()
  known = jax.jit(
    lambda key: mg.muzero_policy(None, key, root, recurrent_fn, 16, dirichlet_fraction=0.0)
  )
  traced = jax.jit(
    lambda key, fraction: mg.muzero_policy(
      None, key, root, recurrent_fn, 16, dirichlet_fraction=fraction
    )
  )
  for first, second in zip(
    jax.tree_util.tree_leaves(known(KEY)), jax.tree_util.tree_leaves(traced(KEY, 0.0))
  ):
    np.testing.assert_array_equal(first, second)
  assert "@_gamma" not in known.lower(KEY).as_text()
  assert "@_gamma" in traced.lower(KEY, 0.0).as_text()
  assert "@_gamma" in traced.lower(KEY, 0.25).as_text()

  def stochastic(fraction):
    return jax.jit(
      lambda key: mg.stochastic_muzero_policy(
        None,
        key,
        EMPTY_ROOT,
        _bandit_decision_fn,
        _bandit_chance_fn,
        8,
        dirichlet_fraction=fraction,
      )
    ).lower(KEY)

  assert "@_gamma" not in stochastic(0.0).as_text()
  assert "@_gamma" in stochastic(0.25).as_text()


@pytest.mark.slow  # the muzero case runs in the suite
def test_traced_gumbel_uct_stochastic_and_qtransform_arguments():
  root, recurrent_fn = _commuting()

  def gumbel(scale, value_scale, maxvisit_init):
    qtransform = functools.partial(
      mg.qtransform_completed_by_mix_value, value_scale=value_scale, maxvisit_init=maxvisit_init
    )
    return mg.gumbel_muzero_policy(
      None, KEY, root, recurrent_fn, 8, gumbel_scale=scale, qtransform=qtransform
    )

  traced = jax.jit(gumbel)(1.0, 0.2, 30.0)
  concrete = gumbel(1.0, 0.2, 30.0)
  np.testing.assert_array_equal(traced.action, concrete.action)
  np.testing.assert_allclose(traced.action_weights, concrete.action_weights, atol=1e-6)

  uct = lambda c: mg.uct_policy(None, KEY, root, recurrent_fn, 8, c=c)
  np.testing.assert_array_equal(jax.jit(uct)(0.5).action, uct(0.5).action)

  def min_max(low, high):
    qtransform = functools.partial(mg.qtransform_by_min_max, min_value=low, max_value=high)
    return mg.muzero_policy(None, KEY, root, recurrent_fn, 8, qtransform=qtransform)

  np.testing.assert_array_equal(
    jax.jit(min_max)(-1.0, 1.0).search_graph.edge_visits,
    min_max(-1.0, 1.0).search_graph.edge_visits,
  )


def test_every_name_of_mctx_is_exported():
  mctx = pytest.importorskip("mctx")
  missing = sorted(name for name in mctx.__all__ if not hasattr(mg, name))
  assert not missing, missing
  assert not sorted(set(mctx.__all__) - set(mg.__all__))
