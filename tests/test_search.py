"""The engine: invariants of searched graphs, transpositions, overflow, determinism,
batching, cycles and hash collisions, and bad input."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax._src import action_selection as selection
from mcgs_jax._src import search as search_steps
from mcgs_jax.testing import check_graph, commuting_game, to_numpy

ROOT, RECURRENT = commuting_game()
SIMS = 40


@functools.partial(jax.jit, static_argnames=("num_simulations", "noise", "options"))
def _run(key, root, invalid_actions, *, num_simulations, noise, options):
  # Root noise only where a test needs the key to matter: a known fraction of 0 leaves
  # the Gamma sampler out of the program (a third of a search's compile time). Roots
  # and masks are arguments, so tests that differ only in them share one program.
  return mg.muzero_policy(
    None,
    key,
    root,
    RECURRENT,
    num_simulations,
    invalid_actions=invalid_actions,
    dirichlet_fraction=noise,
    **dict(options),
  )


def run(key, root=None, invalid_actions=None, *, num_simulations=SIMS, noise=0.0, options=()):
  """The muzero policy on `root` (default: 4 games of the commuting game), with
  `noise` as its `dirichlet_fraction`."""
  root = ROOT(4) if root is None else root
  return _run(
    key, root, invalid_actions, num_simulations=num_simulations, noise=noise, options=options
  )


def test_invariants_graph_and_tree():
  for transpositions in (True, False):
    out = run(jax.random.PRNGKey(0), options=(("transpositions", transpositions),))
    check_graph(out.search_graph, SIMS, tree_mode=not transpositions)


def test_graph_mode_merges_transpositions():
  graph = run(jax.random.PRNGKey(1)).search_graph
  tree = run(jax.random.PRNGKey(1), options=(("transpositions", False),)).search_graph
  assert np.all(graph.transposition_hits > 0)
  assert np.all(graph.num_nodes < tree.num_nodes)
  assert np.all(tree.transposition_hits == 0)
  # Every state of this game is (total, steps): no two nodes may hold the same one.
  for game in range(4):
    used = int(graph.num_nodes[game])
    states = set(
      zip(
        np.asarray(graph.embeddings["total"][game, :used]).tolist(),
        np.asarray(graph.embeddings["steps"][game, :used]).tolist(),
      )
    )
    assert len(states) == used


def test_full_probe_window_is_counted_and_sound():
  out = run(jax.random.PRNGKey(3), num_simulations=60, options=(("probe_window", 1),))
  graph = out.search_graph
  assert np.any(graph.dropped_inserts > 0)
  check_graph(graph, 60, tree_mode=False)
  # Every node is either in the table or counted as dropped.
  in_table = np.sum(np.asarray(graph.hash_slots) >= 0, axis=1)
  np.testing.assert_array_equal(in_table + graph.dropped_inserts, graph.num_nodes)


def test_full_capacity_is_counted_and_sound():
  for transpositions in (True, False):
    out = run(jax.random.PRNGKey(4), options=(("capacity", 6), ("transpositions", transpositions)))
    graph = out.search_graph
    assert np.all(graph.num_nodes == 6)
    assert np.all(graph.capacity_overflows > 0)
    check_graph(graph, SIMS, tree_mode=not transpositions, playouts_stop_early=True)
    # Root visits still count every playout that moved through a root edge.
    roots = np.asarray(graph.node_visits[:, 0])
    overflows = np.asarray(graph.capacity_overflows)
    assert np.all(roots <= SIMS + 1) and np.all(roots >= SIMS + 1 - overflows)


def test_same_key_same_graph_and_other_key_differs():
  first = run(jax.random.PRNGKey(5), noise=0.25).search_graph
  second = run(jax.random.PRNGKey(5), noise=0.25).search_graph
  other = run(jax.random.PRNGKey(6), noise=0.25).search_graph
  for a, b in zip(jax.tree_util.tree_leaves(first), jax.tree_util.tree_leaves(second)):
    np.testing.assert_array_equal(a, b)
  assert not np.array_equal(first.edge_visits, other.edge_visits)


def test_game_does_not_depend_on_other_games():
  key = jax.random.PRNGKey(7)
  root = ROOT(4)
  changed = root.replace(
    embedding={
      "total": root.embedding["total"].at[1:].set(jnp.array([5, 9, 2])),
      "steps": root.embedding["steps"],
    },
    value=root.value.at[1:].set(0.9),
  )
  a, b = run(key, root).search_graph, run(key, changed).search_graph
  np.testing.assert_array_equal(a.edge_visits[0], b.edge_visits[0])
  np.testing.assert_array_equal(a.node_values[0], b.node_values[0])
  assert not np.array_equal(a.edge_visits[1:], b.edge_visits[1:])


@pytest.mark.quick_variants("1")
@pytest.mark.parametrize("batch_size", [1, 256])
def test_jit_at_batch_sizes(batch_size):
  out = run(jax.random.PRNGKey(8), ROOT(batch_size), num_simulations=8)
  assert out.action.shape == (batch_size,)
  assert out.action_weights.shape == (batch_size, 3)
  np.testing.assert_allclose(np.asarray(out.action_weights).sum(-1), 1.0, rtol=1e-6)
  check_graph(out.search_graph, 8, tree_mode=False)


@pytest.mark.slow
def test_vmap_over_an_outer_axis_matches_separate_calls():
  keys = jax.random.split(jax.random.PRNGKey(9), 2)
  roots = [ROOT(3, offset=0), ROOT(3, offset=4)]
  stacked = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *roots)
  policy = lambda key, root: mg.muzero_policy(None, key, root, RECURRENT, 12).search_graph
  together = jax.jit(jax.vmap(policy))(keys, stacked)
  for i in range(2):
    alone = jax.jit(policy)(keys[i], roots[i])
    np.testing.assert_array_equal(together.edge_visits[i], alone.edge_visits)
    np.testing.assert_allclose(together.node_values[i], alone.node_values, atol=1e-6)


def test_all_invalid_root_is_defined():
  invalid = jnp.zeros((4, 3), bool).at[1].set(True)
  out = run(jax.random.PRNGKey(0), invalid_actions=invalid)
  weights = np.asarray(out.action_weights)
  assert not np.any(np.isnan(weights))
  np.testing.assert_array_equal(weights[1], 0.0)
  assert int(out.action[1]) == 0
  assert int(out.search_graph.num_nodes[1]) == 1
  assert int(out.search_graph.node_visits[1, 0]) == SIMS + 1
  np.testing.assert_allclose(weights[[0, 2, 3]].sum(-1), 1.0, rtol=1e-6)
  # Invalid actions are never visited at the root.
  partly = invalid.at[0, 1].set(True)
  out = run(jax.random.PRNGKey(0), invalid_actions=partly)
  assert float(out.action_weights[0, 1]) == 0.0
  check_graph(out.search_graph, SIMS, tree_mode=False)


def cyclic_game(modulus=5, num_actions=3):
  """States are `total mod modulus` and nothing ever ends: cycles everywhere."""

  def recurrent_fn(params, rng_key, action, total):
    total = (total + action + 1) % modulus
    logits = jnp.cos(total[:, None] * (1.0 + jnp.arange(num_actions)))
    return mg.RecurrentFnOutput(
      reward=0.1 * jnp.sin(total * 1.0),
      discount=-jnp.ones_like(total, jnp.float32),
      prior_logits=logits,
      value=jnp.sin(total * 2.0),
    ), total

  root = mg.RootFnOutput(
    prior_logits=jnp.zeros((2, num_actions)),
    value=jnp.zeros(2),
    embedding=jnp.array([0, 3], jnp.int32),
  )
  return root, recurrent_fn


@pytest.mark.parametrize("stop", [True, False])
def test_cycles_end_playouts(stop):
  root, recurrent_fn = cyclic_game()
  out = jax.jit(
    lambda k: mg.muzero_policy(
      None, k, root, recurrent_fn, 60, stop_rule="catch_up" if stop else "never"
    )
  )(jax.random.PRNGKey(0))
  graph = out.search_graph
  assert np.all(np.asarray(graph.num_nodes) <= 5)
  check_graph(graph, 60, tree_mode=False)


def test_hash_collisions_cannot_hang_or_corrupt():
  def constant_key(embedding):
    return jnp.zeros((jax.tree_util.tree_leaves(embedding)[0].shape[0], 2), jnp.uint32)

  out = run(jax.random.PRNGKey(10), options=(("hash_fn", constant_key),))
  graph = out.search_graph
  # Every state collides with the root: one node, every edge a self-loop.
  assert np.all(np.asarray(graph.num_nodes) == 1)
  check_graph(graph, SIMS, tree_mode=False, check_values=False)
  assert not np.any(np.isnan(np.asarray(out.action_weights)))


def test_max_depth_bounds_paths():
  out = run(jax.random.PRNGKey(11), options=(("max_depth", 1), ("transpositions", False)))
  graph = out.search_graph
  # Depth 1: only the root's children are ever created.
  assert np.all(np.asarray(graph.num_nodes) <= 4)
  check_graph(graph, SIMS, tree_mode=True, playouts_stop_early=True)


def test_terminal_children_end_playouts_and_count_arrivals():
  _, recurrent_fn = commuting_game(horizon=1)
  out = jax.jit(lambda k: mg.muzero_policy(None, k, ROOT(2), recurrent_fn, 30))(
    jax.random.PRNGKey(0)
  )
  graph = to_numpy(out.search_graph)
  # Only the root and its terminal children exist; nothing below a terminal node.
  assert np.all(graph["num_nodes"] <= 4)
  assert np.all(graph["node_terminal"][:, 1:4][graph["node_visits"][:, 1:4] > 0])
  check_graph(out.search_graph, 30, tree_mode=False)


def test_summary_matches_graph():
  out = run(jax.random.PRNGKey(12))
  graph = out.search_graph
  summary = graph.summary()
  np.testing.assert_array_equal(summary.visit_counts, graph.edge_visits[:, 0])
  np.testing.assert_allclose(summary.visit_probs, out.action_weights)
  np.testing.assert_allclose(summary.value, graph.node_values[:, 0])
  children = np.asarray(graph.children_index[:, 0])
  child_q = np.where(
    children >= 0,
    np.take_along_axis(np.asarray(graph.node_values), np.maximum(children, 0), axis=1),
    0.0,
  )
  expected = np.asarray(graph.edge_rewards[:, 0]) + np.asarray(graph.edge_discounts[:, 0]) * child_q
  np.testing.assert_allclose(summary.qvalues, expected, atol=1e-6)
  assert out.search_tree is graph


def test_public_steps_compose_into_search():
  """A hand-written loop of select / expand / backup equals `search`."""
  root = ROOT(2)
  rules = selection.make_muzero_selection(
    pb_c_init=1.25, pb_c_base=19652.0, qtransform=mg.qtransform_by_parent_and_siblings
  )
  key = jax.random.PRNGKey(13)
  search = jax.jit(
    lambda key, num_simulations: mg.search(
      None,
      key,
      root=root,
      recurrent_fn=RECURRENT,
      root_action_selection_fn=rules[0],
      interior_action_selection_fn=rules[1],
      num_simulations=num_simulations,
      options=mg.GraphOptions(capacity=6),
    ),
    static_argnums=1,
  )
  expected, graph = search(key, 5), search(key, 1)

  @jax.jit  # one program for the loop's body, not one per operation
  def simulate(loop_key, graph):
    loop_key, select_key, expand_key = jax.random.split(loop_key, 3)
    graph, path = search_steps.select(
      select_key,
      graph,
      root_action_selection_fn=rules[0],
      interior_action_selection_fn=rules[1],
      max_depth=5,
    )
    graph, path = search_steps.expand(None, expand_key, graph, path, recurrent_fn=RECURRENT)
    return loop_key, search_steps.backup(graph, path)

  loop_key = jax.random.split(key, 3)[0]
  for _ in range(4):
    loop_key, graph = simulate(loop_key, graph)
  np.testing.assert_array_equal(graph.edge_visits, expected.edge_visits)
  np.testing.assert_allclose(graph.node_values, expected.node_values, atol=1e-6)


def test_search_continues_a_graph():
  key1, key2 = jax.random.split(jax.random.PRNGKey(14))
  root = ROOT(3)
  first = jax.jit(lambda k: mg.muzero_policy(None, k, root, RECURRENT, 10, capacity=40))(key1)
  graph = first.search_graph
  # Game 1 restarts from scratch: an empty graph (num_nodes == 0) takes `root`.
  graph = graph.replace(num_nodes=graph.num_nodes.at[1].set(0))
  more = jax.jit(lambda k, g: mg.muzero_policy(None, k, root, RECURRENT, 15, graph=g))(key2, graph)
  after = more.search_graph
  np.testing.assert_array_equal(after.node_visits[:, 0], [26, 16, 26])
  check_graph(after, None, tree_mode=False)
  # Everything the first search learned is still there (games 0 and 2).
  for game in (0, 2):
    used = int(graph.num_nodes[game])
    kept = np.asarray(after.edge_visits[game, :used]) >= np.asarray(graph.edge_visits[game, :used])
    assert kept.all()
  with pytest.raises(ValueError, match="capacity = 50 differs from the capacity of graph"):
    mg.muzero_policy(None, key2, root, RECURRENT, 5, graph=graph, capacity=50)
  with pytest.raises(ValueError, match="transpositions = False, but graph was built"):
    mg.muzero_policy(None, key2, root, RECURRENT, 5, graph=graph, transpositions=False)


@pytest.mark.quick_variants("True-4", "False-2")
@pytest.mark.parametrize("num_parallel", [2, 4])
@pytest.mark.parametrize("transpositions", [True, False])
def test_parallel_playouts_keep_invariants_and_never_double_count(num_parallel, transpositions):
  out = run(
    jax.random.PRNGKey(15),
    options=(("num_parallel", num_parallel), ("transpositions", transpositions)),
  )
  graph = out.search_graph
  # Collided playouts are dropped and counted; every other one is counted once.
  check_graph(graph, SIMS, tree_mode=not transpositions)
  collisions = np.asarray(graph.parallel_collisions)
  assert np.all(collisions < SIMS // 2)
  np.testing.assert_array_equal(graph.node_visits[:, 0], SIMS + 1 - collisions)
  if transpositions:
    for game in range(4):
      used = int(graph.num_nodes[game])
      states = set(
        zip(
          np.asarray(graph.embeddings["total"][game, :used]).tolist(),
          np.asarray(graph.embeddings["steps"][game, :used]).tolist(),
        )
      )
      assert len(states) == used, "one state held by two nodes"
  assert not np.any(np.isnan(np.asarray(out.action_weights)))


def test_num_parallel_must_divide_num_simulations():
  with pytest.raises(
    ValueError,
    match=r"num_simulations \(40\) must be a multiple of "
    r"num_parallel \(3\)",
  ):
    run(jax.random.PRNGKey(0), options=(("num_parallel", 3),))
  with pytest.raises(ValueError, match="num_parallel must be >= 1"):
    run(jax.random.PRNGKey(0), options=(("num_parallel", 0),))
