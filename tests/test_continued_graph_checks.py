"""A continued `graph=` is checked like a recycled one: a graph of another embedding
structure, key width, leaf dtype or policy kind is refused at trace time with an
error naming `graph`, and the `value_bounds` a continuing search is given apply."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax.testing import commuting_game

ROOT, RECURRENT = commuting_game()
BATCH, SIMULATIONS, CAPACITY = 2, 6, 32

search = functools.partial(
  mg.muzero_policy, None, num_simulations=SIMULATIONS, dirichlet_fraction=0.0, capacity=CAPACITY
)


def _searched(root=None, recurrent_fn=RECURRENT, **options):
  out = search(
    jax.random.PRNGKey(0), ROOT(BATCH) if root is None else root, recurrent_fn, **options
  )
  return out.search_graph


def _rerooted(**options):
  graph = _searched(**options)
  return mg.reroot(graph, jnp.zeros((BATCH,), jnp.int32))


def _next_root():
  """The root after action 0 from `ROOT(BATCH)`: where `_rerooted()` graphs belong."""
  output, embedding = RECURRENT(
    None, jax.random.PRNGKey(0), jnp.zeros((BATCH,), jnp.int32), ROOT(BATCH).embedding
  )
  return mg.RootFnOutput(prior_logits=output.prior_logits, value=output.value, embedding=embedding)


def _cast_embedding(root, dtype):
  return root.replace(embedding=jax.tree_util.tree_map(lambda x: x.astype(dtype), root.embedding))


def test_another_embedding_structure_is_refused():
  graph = _rerooted()
  root = _next_root()
  root = root.replace(embedding={**root.embedding, "extra": jnp.zeros((BATCH,), jnp.int32)})

  def recurrent_fn(params, key, action, embedding):
    output, new = RECURRENT(params, key, action, {k: embedding[k] for k in ("total", "steps")})
    return output, {**new, "extra": embedding["extra"]}

  with pytest.raises(ValueError, match=r"^graph holds other tables"):
    search(jax.random.PRNGKey(1), root, recurrent_fn, graph=graph)


def test_another_leaf_dtype_is_refused():
  graph = _rerooted()
  root = _cast_embedding(_next_root(), jnp.int16)

  def recurrent_fn(params, key, action, embedding):
    output, new = RECURRENT(params, key, action, embedding)
    return output, jax.tree_util.tree_map(lambda x: x.astype(jnp.int16), new)

  with pytest.raises(ValueError, match=r"^graph\.embeddings.*dtype int32; this search needs"):
    search(jax.random.PRNGKey(1), root, recurrent_fn, graph=graph)


def test_another_key_width_is_refused():
  one_lane = lambda embedding: jnp.stack([embedding["total"].astype(jnp.uint32)], axis=-1)
  two_lanes = lambda embedding: jnp.stack(
    [embedding["total"].astype(jnp.uint32), embedding["steps"].astype(jnp.uint32)], axis=-1
  )
  graph = _rerooted(hash_fn=two_lanes)
  with pytest.raises(ValueError, match=r"^graph\.node_keys has shape \(2, 32, 2\)"):
    search(jax.random.PRNGKey(1), _next_root(), RECURRENT, graph=graph, hash_fn=one_lane)


def test_a_stochastic_graph_is_refused_by_muzero_policy():
  graph = _rerooted()
  stochastic_kind = type("StochasticLike", (type(graph),), {})
  odd = stochastic_kind(**dict(graph.items()))
  with pytest.raises(ValueError, match=r"^graph holds other tables .*other policy kind"):
    search(jax.random.PRNGKey(1), _next_root(), RECURRENT, graph=odd)


def test_value_bounds_given_with_a_graph_apply():
  graph = _rerooted(solver=True)  # built with the default bounds (-1, 1)
  np.testing.assert_array_equal(graph.value_bounds, np.tile([-1.0, 1.0], (BATCH, 1)))
  out = search(jax.random.PRNGKey(1), _next_root(), RECURRENT, graph=graph, value_bounds=None)
  assert np.all(np.isneginf(out.search_graph.value_bounds[:, 0]))
  assert np.all(np.isposinf(out.search_graph.value_bounds[:, 1]))
  wider = search(
    jax.random.PRNGKey(1), _next_root(), RECURRENT, graph=graph, value_bounds=(-2.0, 2.0)
  )
  np.testing.assert_array_equal(wider.search_graph.value_bounds, np.tile([-2.0, 2.0], (BATCH, 1)))


def test_a_graph_continued_from_another_position_is_refused():
  """Rerooted by a move and continued from the position before it: the stored root
  key differs from the root's (checked outside jit), so it is refused naming
  `graph`; the right root is accepted, and an emptied game is not checked."""
  graph = _rerooted()
  with pytest.raises(ValueError, match=r"^graph: game 0's root holds another state's key"):
    search(jax.random.PRNGKey(1), ROOT(BATCH), RECURRENT, graph=graph)
  search(jax.random.PRNGKey(1), _next_root(), RECURRENT, graph=graph)
  emptied = graph.replace(num_nodes=jnp.zeros_like(graph.num_nodes))
  search(jax.random.PRNGKey(1), ROOT(BATCH), RECURRENT, graph=emptied)


@pytest.mark.parametrize("policy", ["muzero", "gumbel"])
def test_a_compounding_discount_is_counted_not_nan(policy):
  """A finite discount of 1e10 at every step would compound to inf along a path
  (and NaN from inf - inf): it is counted as a non-finite evaluation instead, and
  the root value and `action_weights` stay finite."""

  def compounding(params, key, action, embedding):
    output, new = RECURRENT(params, key, action, embedding)
    return output.replace(discount=jnp.where(output.discount == 0, 0.0, 1e10)), new

  policies = {
    "muzero": search,
    "gumbel": functools.partial(
      mg.gumbel_muzero_policy, None, num_simulations=SIMULATIONS, capacity=CAPACITY
    ),
  }
  out = policies[policy](jax.random.PRNGKey(2), ROOT(BATCH), compounding)
  graph = out.search_graph
  assert np.all(np.asarray(graph.non_finite_evaluations) > 0)
  assert np.all(np.isfinite(np.asarray(graph.node_values[:, 0])))
  assert np.all(np.isfinite(np.asarray(out.action_weights)))
