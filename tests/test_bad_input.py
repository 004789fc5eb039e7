"""Bad input to the Python API (issue 18): a clear error naming the argument, raised
at trace time, or a counted, legal outcome at run time."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax._src.hashing import hash_words
from mcgs_jax.apps import registry
from mcgs_jax.testing import check_graph, commuting_game

ROOT, RECURRENT = commuting_game()
KEY = jax.random.PRNGKey(0)
B, A = 2, 3


def muzero_search(root=None, recurrent_fn=RECURRENT, num_simulations=4, **kwargs):
  root = ROOT(B) if root is None else root
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
    muzero_search(make_root(ROOT(B)))


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
    (
      dict(hash_fn=lambda e: [e["total"]]),
      r"hash_fn must return a uint32 array \[B, L\], got a list",
    ),
    (dict(dirichlet_fraction=1.5), "dirichlet_fraction must be in"),
    (dict(dirichlet_alpha=0.0), "dirichlet_alpha must be > 0"),
  ],
)
def test_bad_arguments(kwargs, message):
  with pytest.raises((ValueError, TypeError), match=message):
    muzero_search(**kwargs)


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
    muzero_search(recurrent_fn=wrong_logits)
  with pytest.raises(ValueError, match="recurrent_fn returned an embedding whose pytree structure"):
    muzero_search(recurrent_fn=wrong_embedding)


def test_hash_words_rejects_bad_input():
  with pytest.raises(TypeError, match="uint32"):
    hash_words(jnp.zeros((2, 3), jnp.int32))
  with pytest.raises(ValueError, match="lanes"):
    hash_words(jnp.zeros((2, 3), jnp.uint32), lanes=0)


def _nan_recurrent_fn(params, rng_key, action, embedding):
  del params, rng_key, action
  nan = jnp.full((B,), jnp.nan)
  output = mg.RecurrentFnOutput(
    reward=nan, discount=nan, prior_logits=jnp.full((B, A), jnp.nan), value=nan
  )
  return output, embedding


@pytest.mark.quick_variants("muzero_policy")
@pytest.mark.parametrize("policy", list(registry.POLICIES.values()))
def test_all_nan_game_gets_a_legal_action(policy):
  root = mg.RootFnOutput(
    prior_logits=jnp.full((B, A), jnp.nan),
    value=jnp.full((B,), jnp.nan),
    embedding=jnp.zeros((B,), jnp.int32),
  )
  invalid = jnp.array([[True, False, False], [True, True, False]])
  out = jax.jit(lambda key: policy(None, key, root, _nan_recurrent_fn, 8, invalid_actions=invalid))(
    KEY
  )
  action = np.asarray(out.action)
  assert not np.asarray(invalid)[np.arange(B), action].any(), action
  assert action[1] == 2  # the only valid action
  np.testing.assert_array_equal(out.search_graph.non_finite_evaluations, [8, 8])
  np.testing.assert_array_equal(out.search_graph.non_finite_roots, [1, 1])
  assert not np.any(np.isnan(out.action_weights))


def _huge_reward_fn(reward):
  def recurrent_fn(params, rng_key, action, embedding):
    del params, rng_key
    output = mg.RecurrentFnOutput(
      reward=jnp.where(action == 0, reward, 0.5),
      discount=jnp.full((B,), -1.0),
      prior_logits=jnp.zeros((B, A)),
      value=jnp.zeros((B,)),
    )
    return output, embedding * A + action + 1

  return recurrent_fn


@pytest.mark.slow
def test_overflowing_reward_is_counted_as_non_finite():
  # 3e38 is a finite float32, but two visits of it overflow: counted, never stored.
  root = mg.RootFnOutput(
    prior_logits=jnp.zeros((B, A)), value=jnp.zeros((B,)), embedding=jnp.zeros((B,), jnp.int32)
  )
  search = jax.jit(
    lambda root, reward: mg.muzero_policy(
      None, KEY, root, _huge_reward_fn(reward), 16, transpositions=False
    )
  )
  out = search(root, 3e38)
  graph = out.search_graph
  assert np.all(np.isfinite(graph.summary().value))
  assert np.all(np.asarray(graph.non_finite_evaluations) >= 1)
  assert np.all(np.asarray(graph.edge_non_finite[:, 0, 0]))  # action 0 marked
  np.testing.assert_array_equal(graph.summary().visit_counts[:, 0], [0, 0])
  check_graph(graph, 16, tree_mode=True)
  # A large reward that cannot overflow is kept.
  out = search(root, 1e10)
  np.testing.assert_array_equal(out.search_graph.non_finite_evaluations, [0, 0])


def test_overflowing_root_value_is_counted():
  root = mg.RootFnOutput(
    prior_logits=jnp.zeros((B, A)),
    value=jnp.array([3e38, 0.5]),
    embedding=jnp.zeros((B,), jnp.int32),
  )
  out = jax.jit(lambda root: mg.muzero_policy(None, KEY, root, _huge_reward_fn(0.25), 8))(root)
  np.testing.assert_array_equal(out.search_graph.non_finite_roots, [1, 0])
  assert np.all(np.isfinite(out.search_graph.summary().value))


def test_embedding_dtype_change_names_the_leaf():
  def recurrent_fn(params, rng_key, action, embedding):
    output, new = RECURRENT(params, rng_key, action, embedding)
    return output, {"total": new["total"].astype(jnp.float32) + 0.5, "steps": new["steps"]}

  with pytest.raises(TypeError, match=r"embedding\['total'\] of dtype float32.*int32"):
    jax.jit(lambda key: mg.muzero_policy(None, key, ROOT(B), recurrent_fn, 4))(KEY)


@pytest.mark.parametrize("policy", list(registry.POLICIES.values()), ids=lambda p: p.__name__)
@pytest.mark.parametrize(
  "kwargs, error, message",
  [
    (dict(graph={}), TypeError, "graph must be a mcgs_jax.Graph .* got dict"),
    (dict(recycle=[]), TypeError, "recycle must be a mcgs_jax.Graph .* got list"),
    (dict(recurrent_fn=None), TypeError, "recurrent_fn must be callable as .* got None"),
    (
      dict(recurrent_fn=lambda *args: RECURRENT(*args)[0]),
      TypeError,
      r"recurrent_fn must return a pair \(RecurrentFnOutput, embedding\), got one",
    ),
    (
      dict(recurrent_fn=lambda *args: (*RECURRENT(*args), None)),
      TypeError,
      "recurrent_fn must return a pair .* got a tuple of 3",
    ),
    (
      dict(recurrent_fn=lambda *args: RECURRENT(*args)[::-1]),
      TypeError,
      "the first element, a dict, has no 'reward'",
    ),
    (
      dict(root=ROOT(B).replace(prior_logits=np.asarray(ROOT(B).prior_logits).tolist())),
      TypeError,
      r"root.prior_logits must be an array \(\[B, A\]",
    ),
    (
      dict(root=ROOT(B).replace(value=[0.0, 0.0])),
      TypeError,
      r"root.value must be an array \(\[B\]",
    ),
    (
      dict(invalid_actions=jnp.zeros((B, A + 1), bool)),
      ValueError,
      r"invalid_actions must have shape \[B, A\] = \(2, 3\), got \(2, 4\): its A = 4 "
      r"differs from root.prior_logits's A = 3",
    ),
  ],
)
def test_bad_argument_is_named(policy, kwargs, error, message):
  kwargs = dict(kwargs)
  root = kwargs.pop("root", ROOT(B))
  recurrent_fn = kwargs.pop("recurrent_fn", RECURRENT)
  with pytest.raises(error, match=message):
    jax.jit(lambda key: policy(None, key, root, recurrent_fn, 4, **kwargs))(KEY)


@pytest.mark.parametrize("temperature", [-1.0, float("nan")])
def test_negative_temperature_is_refused(temperature):
  with pytest.raises(ValueError, match="temperature must be >= 0"):
    mg.muzero_policy(None, KEY, ROOT(B), RECURRENT, 4, temperature=temperature)


@pytest.mark.parametrize(
  "kwargs, message",
  [
    (dict(pb_c_base=0.0), "pb_c_base must be > 0"),
    (dict(pb_c_init=float("nan")), "pb_c_init must be a real number"),
    (dict(dirichlet_fraction="a"), "dirichlet_fraction must be a real number"),
  ],
)
def test_bad_puct_hyperparameters(kwargs, message):
  with pytest.raises((ValueError, TypeError), match=message):
    mg.muzero_policy(None, KEY, ROOT(B), RECURRENT, 4, **kwargs)


def _search_with_rules(root_rule, interior_rule, invalid_actions=None):
  return jax.jit(
    lambda key: mg.search(
      None,
      key,
      root=ROOT(B),
      recurrent_fn=RECURRENT,
      root_action_selection_fn=root_rule,
      interior_action_selection_fn=interior_rule,
      num_simulations=6,
      invalid_actions=invalid_actions,
    )
  )(KEY)


def test_search_checks_its_functions():
  rule = lambda key, graph, node, depth=0: jnp.int32(0)
  with pytest.raises(TypeError, match="root_action_selection_fn must be callable"):
    _search_with_rules(None, rule)


INF = float("inf")


@pytest.mark.parametrize(
  "policy, kwargs, message",
  [
    (mg.muzero_policy, dict(pb_c_base=INF), "pb_c_base must be finite"),
    (mg.muzero_policy, dict(pb_c_init=-INF), "pb_c_init must be finite"),
    (mg.muzero_policy, dict(temperature=INF), "temperature must be finite"),
    (mg.muzero_policy, dict(dirichlet_fraction=0.25, dirichlet_alpha=INF), "alpha must be finite"),
    (mg.uct_policy, dict(c=INF), "c must be finite"),
    (mg.gumbel_muzero_policy, dict(gumbel_scale=INF), "gumbel_scale must be finite"),
    (mg.muzero_policy, dict(stop_epsilon=INF), "stop_epsilon must be finite"),
    (mg.muzero_policy, dict(qtransform=None), "qtransform must be callable"),
    (mg.gumbel_muzero_policy, dict(qtransform=None), "qtransform must be callable"),
    (
      mg.gumbel_muzero_policy,
      dict(qtransform=functools.partial(mg.qtransform_completed_by_mix_value, value_scale=np.nan)),
      "value_scale must be >= 0",
    ),
    (
      mg.gumbel_muzero_policy,
      dict(qtransform=functools.partial(mg.qtransform_completed_by_mix_value, value_scale=-0.1)),
      "value_scale must be >= 0",
    ),
    (
      mg.muzero_policy,
      dict(qtransform=functools.partial(mg.qtransform_by_min_max, min_value=1.0, max_value=1.0)),
      "min_value must be < max_value",
    ),
    (
      mg.muzero_policy,
      dict(qtransform=functools.partial(mg.qtransform_by_parent_and_siblings, epsilon=0.0)),
      "epsilon must be > 0",
    ),
  ],
)
def test_non_finite_and_unusable_hyperparameters_are_named(policy, kwargs, message):
  """An infinite constant (or a NaN or negative value scale) would give NaN or tied
  scores and a search that silently spends every playout on action 0."""
  with pytest.raises((ValueError, TypeError), match=message):
    jax.jit(lambda key: policy(None, key, ROOT(B), RECURRENT, 4, **kwargs))(KEY)


@pytest.mark.parametrize(
  "kwargs, error, message",
  [
    (dict(stop_leak="a"), TypeError, "stop_leak must be a real number"),
    (dict(stop_leak=None), TypeError, "stop_leak must be a real number"),
    (dict(value_bounds=5), ValueError, r"value_bounds must be None or \(lowest, highest\)"),
    (dict(value_bounds="ab"), ValueError, r"value_bounds must be None or \(lowest, highest\)"),
    (dict(capacity=1 << 30), ValueError, "capacity must be <= 536870912"),
  ],
)
def test_graph_options_name_the_field(kwargs, error, message):
  with pytest.raises(error, match=message):
    mg.GraphOptions(**kwargs)


def test_reroot_and_empty_like_name_their_arguments():
  out = muzero_search()
  action = jnp.zeros((B,), jnp.int32)
  with pytest.raises(TypeError, match=r"reroot: graph must be .* policy_output.search_graph"):
    mg.reroot(out, action)
  with pytest.raises(TypeError, match=r"empty_like: graph must be .* policy_output.search_graph"):
    mg.empty_like(out)
  with pytest.raises(ValueError, match="probe_window must be >= 1"):
    mg.reroot(out.search_graph, action, probe_window=0)


def test_a_graph_of_shapes_is_named():
  shapes = jax.eval_shape(muzero_search)
  with pytest.raises(
    TypeError, match=r"graph holds shapes only \(jax.eval_shape\); pass mcgs_jax.empty_like"
  ):
    muzero_search(graph=shapes.search_graph)
  continued = muzero_search(graph=mg.empty_like(shapes.search_graph))
  assert np.all(np.asarray(continued.search_graph.node_visits)[:, 0] == 5)


def test_an_empty_batch_is_named():
  root = ROOT(B)
  empty = jax.tree.map(lambda leaf: leaf[:0], root)
  with pytest.raises(ValueError, match=r"at least one game \(B >= 1\)"):
    mg.muzero_policy(None, KEY, empty, RECURRENT, 4)


@pytest.mark.parametrize("bad_action", [A, 100, -1])
def test_a_rule_choosing_an_action_out_of_range_gets_a_valid_one(bad_action):
  """A custom rule's action outside [0, A) used to vanish (a playout dropped and not
  counted) or wrap round to A - 1; it is replaced, as a non-finite edge is, by the
  valid action with the highest prior logit, and every playout is counted."""
  root_rule = lambda key, graph, node: jnp.int32(bad_action)
  interior_rule = lambda key, graph, node, depth: jnp.int32(bad_action)
  graph = _search_with_rules(root_rule, interior_rule)
  best_prior = np.argmax(np.asarray(ROOT(B).prior_logits), axis=-1)
  root_visits = np.asarray(graph.edge_visits)[:, 0]
  np.testing.assert_array_equal(root_visits[np.arange(B), best_prior], 6)
  np.testing.assert_array_equal(np.asarray(graph.node_visits)[:, 0], 7)
  check_graph(graph, 6, tree_mode=False)


def test_a_rule_choosing_an_invalid_root_action_gets_a_valid_one():
  invalid = jnp.array([[True, False, True]] * B)
  root_rule = lambda key, graph, node: jnp.int32(0)
  interior_rule = lambda key, graph, node, depth: jnp.int32(0)
  graph = _search_with_rules(root_rule, interior_rule, invalid)
  root_visits = np.asarray(graph.edge_visits)[:, 0]
  np.testing.assert_array_equal(root_visits, [[0, 6, 0]] * B)


@pytest.mark.parametrize(
  "root_rule, interior_rule, name, got",
  [
    (lambda k, g, n: jnp.float32(0), None, "root_action_selection_fn", r"float32 of shape \(\)"),
    (
      lambda k, g, n: jnp.zeros((1,), jnp.int32),
      None,
      "root_action_selection_fn",
      r"int32 of shape \(1,\)",
    ),
    (None, lambda k, g, n, d: jnp.float32(0), "interior_action_selection_fn", "float32"),
  ],
)
def test_a_rule_returning_no_integer_scalar_is_named(root_rule, interior_rule, name, got):
  root_rule = root_rule or (lambda key, graph, node: jnp.int32(0))
  interior_rule = interior_rule or (lambda key, graph, node, depth: jnp.int32(0))
  with pytest.raises(TypeError, match=f"{name} must return one integer scalar .* got {got}"):
    _search_with_rules(root_rule, interior_rule)
