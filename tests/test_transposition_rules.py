"""What a playout does at a transposition: the stop rules (`stop_rule`, `stop_leak`,
`stop_epsilon`), the stored edge values they read, folded evaluations
(`fold_evaluations`) and the stamps of the cycle guard (`playouts_started`)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import select_and_expand

import mcgs_jax as mg
from mcgs_jax._src import action_selection as selection
from mcgs_jax._src import search as search_steps
from mcgs_jax.games import make_game
from mcgs_jax.testing import check_graph, commuting_game, to_numpy

ROOT, RECURRENT = commuting_game()
SIMS = 48
BATCH = 4


@functools.partial(jax.jit, static_argnames=("num_simulations", "options"))
def run(key, *, num_simulations=SIMS, options=()):
  # No root noise: the rules here do not depend on it, and a known fraction of 0
  # leaves the Gamma sampler out of the program (a third of a search's compile time).
  return mg.muzero_policy(
    None, key, ROOT(BATCH), RECURRENT, num_simulations, dirichlet_fraction=0.0, **dict(options)
  ).search_graph


def assert_same_graph(first, second):
  for a, b in zip(jax.tree_util.tree_leaves(first), jax.tree_util.tree_leaves(second)):
    np.testing.assert_array_equal(a, b)


def extra_passes(graph):
  """Per game, `[num_nodes]`: edge visits into each non-root, non-terminal node
  beyond `N(n) - k(n)` (the passes that went on below it) and one per edge into it
  (the playout that created the node or linked the edge to it ended there). A
  playout that stops at an existing child adds one; with `stop_rule="never"`, no
  cycles and no `max_depth` cut, nothing else can."""
  g = to_numpy(graph)
  result = []
  for game in range(len(g["num_nodes"])):
    used = int(g["num_nodes"][game])
    children = g["children_index"][game, :used]
    visits = g["edge_visits"][game, :used]
    incoming = np.zeros(used, np.int64)
    np.add.at(incoming, children[children >= 0], visits[children >= 0])
    parents = np.bincount(children[children >= 0], minlength=used)
    passes_below = g["node_visits"][game, :used] - g["node_evaluations"][game, :used]
    extra = incoming - passes_below - parents
    extra[0] = 0
    extra[g["node_terminal"][game, :used]] = 0
    result.append(extra)
  return result


@pytest.mark.quick_variants("options0", "options2", "options4")
@pytest.mark.parametrize(
  "options",
  [
    (("stop_rule", "catch_up"),),
    (("stop_rule", "catch_up"), ("stop_leak", 0.5)),
    (("stop_rule", "value_lag"), ("stop_epsilon", 0.0)),
    (("stop_rule", "value_lag"), ("stop_epsilon", 0.05)),
    (("stop_rule", "never"),),
  ],
)
def test_every_stop_rule_keeps_the_invariants(options):
  graph = run(jax.random.PRNGKey(0), options=options)
  check_graph(graph, SIMS, tree_mode=False)
  assert np.all(graph.transposition_hits > 0)


@pytest.mark.slow
def test_leak_one_and_a_huge_epsilon_are_never_stopping():
  """The leak coin uses its own stream of the selection keys, so a leak that always
  continues gives exactly the search of `never`, as does a lag nothing exceeds."""
  key = jax.random.PRNGKey(1)
  never = run(key, options=(("stop_rule", "never"),))
  assert_same_graph(run(key, options=(("stop_rule", "catch_up"), ("stop_leak", 1.0))), never)
  assert_same_graph(run(key, options=(("stop_rule", "value_lag"), ("stop_epsilon", 1e9))), never)
  catch_up = run(key, options=(("stop_rule", "catch_up"),))
  leaky = run(key, options=(("stop_rule", "catch_up"), ("stop_leak", 0.5)))
  assert_same_graph(run(key, options=(("stop_rule", "catch_up"), ("stop_leak", 0.5))), leaky)
  assert not np.array_equal(leaky.edge_visits, catch_up.edge_visits)
  assert not np.array_equal(leaky.edge_visits, never.edge_visits)
  # Stopping leaves more stops at existing children than never stopping (none).
  assert sum(e.sum() for e in extra_passes(never)) == 0
  assert (
    sum(e.sum() for e in extra_passes(catch_up)) > sum(e.sum() for e in extra_passes(leaky)) > 0
  )


RULES = selection.make_muzero_selection(
  pb_c_init=1.25, pb_c_base=19652.0, qtransform=mg.qtransform_by_parent_and_siblings
)


@pytest.mark.quick_variants("catch_up-0.0-False", "value_lag-0.02-True")
@pytest.mark.parametrize(
  "stop_rule,epsilon,fold",
  [
    ("catch_up", 0.0, False),
    ("catch_up", 0.0, True),
    ("value_lag", 0.0, False),
    ("value_lag", 0.02, False),
    ("value_lag", 0.02, True),
  ],
)
def test_select_stops_exactly_where_the_rule_says(stop_rule, epsilon, fold):
  """A search continued step by step under the rule, from a graph searched with
  `never` (many caught-up edges): every edge a playout passes through is one the
  rule lets through, and where it ends at an existing child that is neither
  terminal nor on its path, the rule stopped it. `N(child)` leaves the child's
  folded evaluations out."""
  options = mg.GraphOptions(stop_rule=stop_rule, stop_epsilon=epsilon, fold_evaluations=fold)
  graph = run(
    jax.random.PRNGKey(2), num_simulations=40, options=(("stop_rule", "never"), ("capacity", 80))
  )
  step = jax.jit(lambda key, graph: _one_simulation(key, graph, options))
  stops = passes = 0
  for index in range(30):
    g = to_numpy(graph)
    graph, path = step(jax.random.PRNGKey(100 + index), graph)
    nodes, actions = np.asarray(path.nodes), np.asarray(path.actions)
    for game in range(BATCH):
      length = int(path.length[game])
      for depth in range(length):
        node, action = nodes[game, depth], actions[game, depth]
        child = g["children_index"][game, node, action]
        if child < 0 or g["node_terminal"][game, child]:
          assert depth == length - 1
          continue
        live = (
          g["edge_rewards"][game, node, action]
          + g["edge_discounts"][game, node, action] * g["node_values"][game, child]
        )
        caught_up = (
          1 + g["node_visits"][game, child] - g["node_evaluations"][game, child]
          > g["edge_visits"][game, node, action]
        )
        lagging = abs(g["edge_values"][game, node, action] - live) > epsilon
        rule_stops = caught_up and (stop_rule == "catch_up" or lagging)
        on_path = child in nodes[game, : depth + 1]
        if depth < length - 1:
          assert not rule_stops, (index, game, depth)
          passes += caught_up
        elif not on_path and length < 40:
          assert rule_stops, (index, game, depth)
          stops += 1
  check_graph(graph, 70, tree_mode=False)
  assert stops > 0
  if stop_rule == "value_lag":
    assert passes > 0, "no caught-up edge within epsilon was passed"


def _one_simulation(key, graph, options):
  graph, path, linked = select_and_expand(
    key, graph, rules=RULES, recurrent_fn=RECURRENT, max_depth=40, options=options
  )
  return search_steps.backup(graph, linked, options=options), path


def test_stored_edge_values_are_what_each_node_used():
  """`Q(n)` is the formula over `edge_values` at every node (`check_graph`); at a node
  just recomputed they equal the live `Q(n, a)`, at a stale one some differ."""
  graph = run(jax.random.PRNGKey(3), options=(("stop_rule", "never"),))
  check_graph(graph, SIMS, tree_mode=False)
  g = to_numpy(graph)
  stale = 0
  for game in range(BATCH):
    np.testing.assert_allclose(
      g["edge_values"][game, 0],
      np.asarray(graph.qvalues(jnp.zeros(BATCH, jnp.int32)))[game],
      atol=1e-6,
    )
    for node in range(int(g["num_nodes"][game])):
      visited = g["edge_visits"][game, node] > 0
      live = np.asarray(graph.qvalues(jnp.full(BATCH, node, jnp.int32)))[game]
      stale += np.any(np.abs(live - g["edge_values"][game, node])[visited] > 1e-6)
  assert stale > 0, "a transposition-rich search left no node stale"
  tree = run(jax.random.PRNGKey(3), options=(("transpositions", False),))
  for game in range(BATCH):
    for node in range(int(tree.num_nodes[game])):
      visited = np.asarray(tree.edge_visits[game, node]) > 0
      live = np.asarray(tree.qvalues(jnp.full(BATCH, node, jnp.int32)))[game]
      np.testing.assert_allclose(
        np.asarray(tree.edge_values[game, node])[visited], live[visited], atol=1e-6
      )


@pytest.mark.parametrize("game_name", ["commuting", "dag"])
@pytest.mark.slow
def test_dropped_parallel_playouts_do_not_reuse_stamps(game_name):
  """With `num_parallel`, collided playouts are dropped; a stamp taken from the root
  visits would then repeat in the next step and stop playouts at nodes falsely
  marked as on their path. With `never` and no cycles nothing may stop early."""
  if game_name == "commuting":
    root, recurrent_fn, hash_fn, invalid = ROOT(BATCH), RECURRENT, None, None
  else:
    game = make_game("dag:actions=4,depth=8,width=6,seed=2")
    state = game.init(jax.random.PRNGKey(0), BATCH)
    root = game.root(None, jax.random.PRNGKey(0), state)
    recurrent_fn, hash_fn, invalid = game.recurrent_fn, game.hash_fn, game.invalid_actions(state)
  graph = jax.jit(
    lambda key: (
      mg.muzero_policy(
        None,
        key,
        root,
        recurrent_fn,
        64,
        invalid_actions=invalid,
        hash_fn=hash_fn,
        stop_rule="never",
        num_parallel=8,
      ).search_graph
    )
  )(jax.random.PRNGKey(4))
  assert np.all(np.asarray(graph.parallel_collisions) > 0)
  check_graph(graph, 64, tree_mode=False)
  np.testing.assert_array_equal(graph.playouts_started, 64)
  for game, extra in enumerate(extra_passes(graph)):
    assert np.all(extra == 0), f"game {game}: playouts stopped early at {np.flatnonzero(extra)}"


def test_fold_off_keeps_one_evaluation_per_node():
  graph = run(jax.random.PRNGKey(5))
  g = to_numpy(graph)
  for game in range(BATCH):
    assert np.all(g["node_evaluations"][game, : int(g["num_nodes"][game])] == 1)
  np.testing.assert_array_equal(graph.folded_evaluations, 0)


@pytest.mark.quick_variants("never")
@pytest.mark.parametrize("stop_rule", ["catch_up", "never"])
def test_folded_evaluations_are_counted_samples(stop_rule):
  """The commuting game's value is a function of the state, so every fold adds the
  same value: U stays the state's value while k(n) and N(n) grow."""
  off = run(jax.random.PRNGKey(6), options=(("stop_rule", stop_rule),))
  graph = run(jax.random.PRNGKey(6), options=(("stop_rule", stop_rule), ("fold_evaluations", True)))
  check_graph(graph, SIMS, tree_mode=False)
  g = to_numpy(graph)
  folded = np.asarray(graph.folded_evaluations)
  assert np.all(folded > 0)
  for game in range(BATCH):
    used = int(g["num_nodes"][game])
    k = g["node_evaluations"][game, :used]
    assert np.sum(k - 1) == folded[game]
    total = np.asarray(graph.embeddings["total"][game, :used])
    steps = np.asarray(graph.embeddings["steps"][game, :used])
    angle = total.astype(np.float32) * 1.7 + steps.astype(np.float32) * 0.3
    own = np.where(g["node_terminal"][game, :used], 0.0, 0.5 * np.cos(angle))
    np.testing.assert_allclose(g["raw_values"][game, :used], own, atol=1e-5)
  # Without folding, those evaluations were dropped: every k is 1.
  np.testing.assert_array_equal(off.folded_evaluations, 0)


def test_a_fold_is_the_mean_of_the_evaluations():
  """A hand-made playout that stops at an existing child folds its evaluation in:
  `k` 1 -> 2, `U` the mean, `N(child)` and `Q(child)` recomputed by backup."""
  options = mg.GraphOptions(fold_evaluations=True, capacity=20)
  graph = jax.jit(
    lambda key: mg.search(
      None,
      key,
      root=ROOT(2),
      recurrent_fn=RECURRENT,
      root_action_selection_fn=RULES[0],
      interior_action_selection_fn=RULES[1],
      num_simulations=3,
      options=options,
    )
  )(jax.random.PRNGKey(7))
  action = jnp.argmax(graph.edge_visits[:, 0], axis=-1).astype(jnp.int32)
  child = graph.children_index[jnp.arange(2), 0, action]
  assert np.all(np.asarray(child) > 0)
  before = to_numpy(graph)
  path = search_steps.Path(
    nodes=jnp.zeros((2, 3), jnp.int32),
    actions=jnp.zeros((2, 3), jnp.int32).at[:, 0].set(action),
    length=jnp.ones(2, jnp.int32),
    leaf=jnp.full(2, -1, jnp.int32),
    leaf_is_new=jnp.zeros(2, bool),
    last_edge_unexpanded=jnp.zeros(2, bool),
    leaf_folded=jnp.zeros(2, bool),
  )
  output = mg.RecurrentFnOutput(
    reward=jnp.zeros(2),
    discount=-jnp.ones(2),
    prior_logits=jnp.zeros((2, 3)),
    value=jnp.array([0.9, -0.7]),
  )
  embedding = jax.tree_util.tree_map(lambda x: x[jnp.arange(2), child], graph.embeddings)

  @jax.jit  # one program, not one per operation
  def link_and_backup(graph, path, output, embedding):
    graph, path = search_steps.link(graph, path, output, embedding, options=options)
    return search_steps.backup(graph, path, options=options), path

  graph, path = link_and_backup(graph, path, output, embedding)
  np.testing.assert_array_equal(path.leaf, child)
  assert np.all(np.asarray(path.leaf_folded))
  after = to_numpy(graph)
  for game in range(2):
    c = int(child[game])
    assert after["node_evaluations"][game, c] == 2
    np.testing.assert_allclose(
      after["raw_values"][game, c],
      (before["raw_values"][game, c] + [0.9, -0.7][game]) / 2,
      rtol=1e-6,
    )
    assert after["node_visits"][game, c] == before["node_visits"][game, c] + 1
  np.testing.assert_array_equal(graph.folded_evaluations, 1)
  check_graph(graph, 4, tree_mode=False)


def test_terminal_children_take_no_fold():
  _, recurrent_fn = commuting_game(horizon=1)
  graph = jax.jit(
    lambda k: (
      mg.muzero_policy(None, k, ROOT(2), recurrent_fn, 20, fold_evaluations=True).search_graph
    )
  )(jax.random.PRNGKey(8))
  np.testing.assert_array_equal(graph.folded_evaluations, 0)
  check_graph(graph, 20, tree_mode=False)


def test_tree_mode_with_fold_off_is_unchanged_by_the_new_fields():
  """Tree mode ignores the stop rule, and without folding every k is 1."""
  key = jax.random.PRNGKey(9)
  plain = run(key, options=(("transpositions", False),))
  for options in (
    (("stop_rule", "never"),),
    (("stop_rule", "value_lag"),),
    (("stop_rule", "catch_up"), ("stop_leak", 0.3)),
  ):
    assert_same_graph(run(key, options=(("transpositions", False),) + options), plain)
  check_graph(plain, SIMS, tree_mode=True)
