"""A continued `graph=` is checked like a recycled one: a graph of another embedding
structure, key width, leaf dtype or policy kind is refused at trace time with an
error naming `graph`, and the `value_bounds` a continuing search is given apply. A
graph whose root belongs to another position is refused outside `jit`; under `jit`
that game starts afresh and is counted in `root_key_mismatches`."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax._src.batched import where_per_game
from mcgs_jax.testing import check_graph, commuting_game

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


@pytest.mark.slow
def test_another_embedding_structure_is_refused():
  graph = _rerooted()
  root = _next_root()
  root = root.replace(embedding={**root.embedding, "extra": jnp.zeros((BATCH,), jnp.int32)})

  def recurrent_fn(params, key, action, embedding):
    output, new = RECURRENT(params, key, action, {k: embedding[k] for k in ("total", "steps")})
    return output, {**new, "extra": embedding["extra"]}

  with pytest.raises(ValueError, match=r"^graph holds other tables"):
    search(jax.random.PRNGKey(1), root, recurrent_fn, graph=graph)


@pytest.mark.slow
def test_another_leaf_dtype_is_refused():
  graph = _rerooted()
  root = _cast_embedding(_next_root(), jnp.int16)

  def recurrent_fn(params, key, action, embedding):
    output, new = RECURRENT(params, key, action, embedding)
    return output, jax.tree_util.tree_map(lambda x: x.astype(jnp.int16), new)

  with pytest.raises(ValueError, match=r"^graph\.embeddings.*dtype int32; this search needs"):
    search(jax.random.PRNGKey(1), root, recurrent_fn, graph=graph)


@pytest.mark.slow
def test_another_key_width_is_refused():
  one_lane = lambda embedding: jnp.stack([embedding["total"].astype(jnp.uint32)], axis=-1)
  two_lanes = lambda embedding: jnp.stack(
    [embedding["total"].astype(jnp.uint32), embedding["steps"].astype(jnp.uint32)], axis=-1
  )
  graph = _rerooted(hash_fn=two_lanes)
  with pytest.raises(ValueError, match=r"^graph\.node_keys has shape \(2, 32, 2\)"):
    search(jax.random.PRNGKey(1), _next_root(), RECURRENT, graph=graph, hash_fn=one_lane)


@pytest.mark.slow
def test_a_stochastic_graph_is_refused_by_muzero_policy():
  graph = _rerooted()
  stochastic_kind = type("StochasticLike", (type(graph),), {})
  odd = stochastic_kind(**dict(graph.items()))
  with pytest.raises(ValueError, match=r"^graph holds other tables .*other policy kind"):
    search(jax.random.PRNGKey(1), _next_root(), RECURRENT, graph=odd)


@pytest.mark.slow
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
@pytest.mark.quick_variants("muzero")
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


jitted_search = jax.jit(search, static_argnums=(2,))


def _assert_same_search(out, expected, games):
  """`out` and `expected` (policy outputs) agree bit for bit in `games`: action,
  weights and every graph field but `root_key_mismatches`."""
  np.testing.assert_array_equal(out.action[games], expected.action[games])
  np.testing.assert_array_equal(out.action_weights[games], expected.action_weights[games])
  found = jax.tree_util.tree_leaves_with_path(out.search_graph)
  wanted = jax.tree_util.tree_leaves_with_path(expected.search_graph)
  for (path, leaf), (_, expected_leaf) in zip(found, wanted, strict=True):
    name = jax.tree_util.keystr(path)
    if name != ".root_key_mismatches":
      np.testing.assert_array_equal(leaf[games], expected_leaf[games], err_msg=name)


@pytest.mark.slow
def test_under_jit_a_graph_from_another_position_starts_afresh_and_is_counted():
  """Rerooted by action 0 and continued, under `jit`, from the position before that
  move: each game is counted once in `root_key_mismatches` and searched as from an
  empty graph, bit for bit; a correctly continued graph counts nothing."""
  graph = _rerooted()
  assert np.all(np.asarray(graph.num_nodes) > 0)
  np.testing.assert_array_equal(graph.root_key_mismatches, 0)
  key = jax.random.PRNGKey(1)
  wrong = jitted_search(key, ROOT(BATCH), RECURRENT, graph=graph)
  np.testing.assert_array_equal(wrong.search_graph.root_key_mismatches, 1)
  fresh = jitted_search(key, ROOT(BATCH), RECURRENT)
  _assert_same_search(wrong, fresh, slice(None))
  np.testing.assert_array_equal(fresh.search_graph.root_key_mismatches, 0)
  check_graph(wrong.search_graph, SIMULATIONS, tree_mode=False)

  right = jitted_search(key, _next_root(), RECURRENT, graph=graph)
  np.testing.assert_array_equal(right.search_graph.root_key_mismatches, 0)
  np.testing.assert_array_equal(
    right.search_graph.node_visits[:, 0], graph.node_visits[:, 0] + SIMULATIONS
  )
  check_graph(right.search_graph, None, tree_mode=False, continued=True)

  # The count is kept from search to search and carried over a reroot.
  again = jitted_search(
    key, ROOT(BATCH), RECURRENT, graph=mg.reroot(wrong.search_graph, jnp.zeros_like(wrong.action))
  )
  np.testing.assert_array_equal(again.search_graph.root_key_mismatches, 2)


def test_under_jit_only_the_mismatched_game_is_counted_and_restarted():
  """Game 0 searched from the position before the move, game 1 from the right one:
  game 0 is counted and equals a fresh search, game 1 equals the continued one; an
  emptied game is not compared, so not counted."""
  graph = _rerooted()
  key = jax.random.PRNGKey(1)
  before_move = jnp.asarray([True, False])
  mixed_root = where_per_game(before_move, ROOT(BATCH), _next_root())
  mixed = jitted_search(key, mixed_root, RECURRENT, graph=graph)
  np.testing.assert_array_equal(mixed.search_graph.root_key_mismatches, [1, 0])
  _assert_same_search(mixed, jitted_search(key, mixed_root, RECURRENT), 0)
  _assert_same_search(mixed, jitted_search(key, _next_root(), RECURRENT, graph=graph), 1)
  check_graph(mixed.search_graph, None, tree_mode=False, continued=True)

  emptied = graph.replace(num_nodes=jnp.asarray([0, graph.num_nodes[1]]))
  out = jitted_search(key, mixed_root, RECURRENT, graph=emptied)
  np.testing.assert_array_equal(out.search_graph.root_key_mismatches, 0)


# A stochastic toy on the commuting game: action a moves the total by a to an
# afterstate, outcome c then plays the commuting game's action c from it.
NUM_OUTCOMES = 2


def _decision_fn(params, key, action, state):
  del params, key
  total = (state["total"] + action) % 11
  output = mg.DecisionRecurrentFnOutput(
    chance_logits=jnp.cos(total[:, None] + jnp.arange(NUM_OUTCOMES, dtype=jnp.float32)),
    afterstate_value=0.2 * jnp.sin(total.astype(jnp.float32)),
  )
  return output, {"total": total, "steps": state["steps"]}


def _chance_fn(params, key, outcome, afterstate):
  output, state = RECURRENT(params, key, outcome, afterstate)
  return mg.ChanceRecurrentFnOutput(
    action_logits=output.prior_logits,
    value=output.value,
    reward=output.reward,
    discount=output.discount,
  ), state


@functools.partial(jax.jit, static_argnames=("transpositions",))
def _stochastic_search(key, root, graph=None, *, transpositions=True):
  return mg.stochastic_muzero_policy(
    None,
    key,
    root,
    _decision_fn,
    _chance_fn,
    2 * SIMULATIONS,
    dirichlet_fraction=0.0,
    capacity=CAPACITY,
    transpositions=transpositions,
    graph=graph,
  )


@pytest.mark.parametrize("transpositions", [True, False], ids=["graph", "tree"])
@pytest.mark.slow
def test_a_stochastic_graph_rerooted_by_an_action_only_starts_afresh_and_is_counted(
  transpositions,
):
  """Rerooted by the action played but not by the chance outcome that followed, the
  root is a chance node (an afterstate): the game starts afresh, as a fresh search
  from the searched root, and is counted in `root_key_mismatches`, in tree mode too.
  Rerooted by both, nothing is counted; a decision root of another position is
  counted in graph mode (its key differs)."""
  key = jax.random.PRNGKey(0)
  first = _stochastic_search(key, ROOT(BATCH), transpositions=transpositions)
  action = jnp.zeros((BATCH,), jnp.int32)
  outcome = jnp.ones((BATCH,), jnp.int32)
  graph = first.search_graph
  halfway = mg.reroot(graph, action)
  assert np.all(np.asarray(halfway.num_nodes) > 0)
  assert not np.any(np.asarray(halfway.embeddings.is_decision_node[:, 0]))
  _, afterstate = _decision_fn(None, None, action, ROOT(BATCH).embedding)
  output, state = _chance_fn(None, None, outcome, afterstate)
  next_root = mg.RootFnOutput(
    prior_logits=output.action_logits, value=output.value, embedding=state
  )

  key = jax.random.PRNGKey(1)
  restarted = _stochastic_search(key, next_root, halfway, transpositions=transpositions)
  np.testing.assert_array_equal(restarted.search_graph.root_key_mismatches, 1)
  fresh = _stochastic_search(key, next_root, transpositions=transpositions)
  _assert_same_search(restarted, fresh, slice(None))
  check_graph(restarted.search_graph, 2 * SIMULATIONS, tree_mode=not transpositions)

  rerooted = mg.reroot(halfway, outcome)
  assert np.all(np.asarray(rerooted.num_nodes) > 0)
  continued = _stochastic_search(key, next_root, rerooted, transpositions=transpositions)
  np.testing.assert_array_equal(continued.search_graph.root_key_mismatches, 0)
  check_graph(continued.search_graph, None, tree_mode=not transpositions, continued=True)

  elsewhere = _stochastic_search(key, ROOT(BATCH), rerooted, transpositions=transpositions)
  np.testing.assert_array_equal(elsewhere.search_graph.root_key_mismatches, int(transpositions))
  check_graph(elsewhere.search_graph, None, tree_mode=not transpositions, continued=True)
