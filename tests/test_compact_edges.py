"""Compact edges (`max_children=K`): with K covering every node's valid actions the
search is the dense one (same actions, visits and children by action, values to
rounding) under every policy and option; with a smaller K the slots hold the K most
likely valid actions and the rest are counted, never searched or played."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax import testing
from mcgs_jax._src.graph import edges_by_action
from mcgs_jax.apps import registry, viz
from mcgs_jax.games import make_game, search_game

BATCH = 4
ROOT_SEED = 1  # the key of every root evaluation of `_position`'s states

POLICIES = registry.POLICIES | {
  "gumbel": functools.partial(registry.POLICIES["gumbel"], max_num_considered_actions=4),
}
# K at least the most valid actions any node of these searches has.
GAMES = {"connect_four": 7, "othello": 24}
OPTIONS = {
  "default": {},
  "solver": {"solver": True},
  "parallel": {"num_parallel": 2},
  "fold_catch_up": {"fold_evaluations": True, "stop_rule": "catch_up"},
  "tree": {"transpositions": False},
}


@functools.cache
def _position(name, batch_size=BATCH, plies=2):
  """A game and its states `plies` random moves in."""
  game = make_game(name)
  state = game.init(jax.random.PRNGKey(0), batch_size=batch_size)
  for ply in range(plies):
    legal = state.legal_action_mask
    action = jax.random.categorical(
      jax.random.PRNGKey(10 + ply), jnp.where(legal, 0.0, -jnp.inf), axis=-1
    )
    state = game.step(state, action)
  return game, state


def _search(policy, name, max_children, num_simulations=32, **options):
  """One search (`search_game`) of `_position(name)`'s states, their roots keyed by
  `ROOT_SEED`, jitted whole: called eagerly, each operation outside the playout loop
  would compile a program of its own."""
  game, state = _position(name)

  def search(key, state):
    return search_game(
      POLICIES[policy],
      game,
      state,
      num_simulations,
      key,
      root_key=jax.random.PRNGKey(ROOT_SEED),
      max_children=max_children,
      **options,
    )

  return jax.jit(search)(jax.random.PRNGKey(2), state)


def assert_same_search(dense, compact):
  """The compact search's outputs and graph, read by action, are the dense one's."""
  graph, slots = dense.search_graph, compact.search_graph
  np.testing.assert_array_equal(dense.action, compact.action)
  np.testing.assert_allclose(dense.action_weights, compact.action_weights, atol=1e-6)
  np.testing.assert_array_equal(graph.num_nodes, slots.num_nodes)
  np.testing.assert_array_equal(graph.node_visits, slots.node_visits)
  for name, fill in (("edge_visits", 0), ("children_index", -1)):
    by_action = edges_by_action(slots, getattr(slots, name), fill)
    np.testing.assert_array_equal(getattr(graph, name), by_action, err_msg=name)
  np.testing.assert_allclose(graph.node_values, slots.node_values, atol=1e-5)
  summary, compact_summary = graph.summary(), slots.summary()
  np.testing.assert_array_equal(summary.visit_counts, compact_summary.visit_counts)
  np.testing.assert_allclose(summary.qvalues, compact_summary.qvalues, atol=1e-5)
  np.testing.assert_array_equal(slots.dropped_actions, 0)


@pytest.mark.parametrize("option", OPTIONS)
@pytest.mark.parametrize("name", GAMES)
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.quick_variants("gumbel-connect_four-solver")
def test_covering_slots_search_as_dense(policy, name, option):
  dense = _search(policy, name, None, **OPTIONS[option])
  compact = _search(policy, name, GAMES[name], **OPTIONS[option])
  assert compact.search_graph.max_children == GAMES[name]
  assert_same_search(dense, compact)
  testing.check_graph(
    compact.search_graph,
    32,
    tree_mode=option == "tree",
    check_values=True,
    playouts_stop_early=option == "tree",
  )


@pytest.mark.slow
def test_forced_playouts_and_their_pruning_as_dense():
  options = {"forced_playouts": 2.0, "dirichlet_fraction": 0.25}
  dense = _search("muzero", "othello", None, **options)
  compact = _search("muzero", "othello", 24, **options)
  assert_same_search(dense, compact)
  pruned = [
    mg.prune_forced_playouts(out.search_graph, forced_playouts=2.0) for out in (dense, compact)
  ]
  assert pruned[0].shape == pruned[1].shape == (BATCH, 65)
  np.testing.assert_allclose(pruned[0], pruned[1], atol=1e-6)


@pytest.mark.slow
def test_reroot_continue_and_recycle_as_dense():
  """Reroot by the move played (with `max_nodes`), continue the search, and search
  again recycling the old graph: each step the dense graph's, read by action."""
  game, state = _position("othello")
  root = game.root(None, jax.random.PRNGKey(ROOT_SEED), state)
  invalid = game.invalid_actions(state)

  def run(max_children):
    policy = functools.partial(
      mg.muzero_policy,
      None,
      jax.random.PRNGKey(3),
      recurrent_fn=game.recurrent_fn,
      num_simulations=24,
      hash_fn=game.hash_fn,
      capacity=64,
      max_children=max_children,
    )
    first = policy(root=root, invalid_actions=invalid)
    next_state = game.step(state, first.action)
    kept = mg.reroot(first.search_graph, first.action, max_nodes=40)
    next_root = game.root(None, jax.random.PRNGKey(4), next_state)
    later = policy(root=next_root, invalid_actions=game.invalid_actions(next_state), graph=kept)
    recycled = policy(root=root, invalid_actions=invalid, recycle=later.search_graph)
    return first, kept, later, recycled

  dense, compact = run(None), run(24)
  for step in (0, 2, 3):
    assert_same_search(dense[step], compact[step])
  np.testing.assert_array_equal(dense[1].num_nodes, compact[1].num_nodes)
  np.testing.assert_array_equal(
    dense[1].edge_visits, edges_by_action(compact[1], compact[1].edge_visits, 0)
  )
  testing.check_graph(compact[1], None, tree_mode=False, continued=True)
  testing.check_graph(compact[2].search_graph, None, tree_mode=False, continued=True)


def _valid_counts(game, graph, game_index):
  """Valid actions of each used node's state in one game, from pgx's legal masks."""
  used = int(graph.num_nodes[game_index])
  legal = np.asarray(graph.embeddings.legal_action_mask[game_index, :used])
  return legal.sum(axis=-1), np.asarray(graph.node_terminal[game_index, :used])


def test_small_slots_count_what_they_leave_out():
  """K = 3 in othello: every node keeps its 3 most likely valid actions (the
  uniform prior, without root noise, ties them all: the lowest three), the rest are
  counted in `dropped_actions` node by node, and the root never plays or weighs
  them."""
  game, _ = _position("othello")
  out = _search("muzero", "othello", 3, num_simulations=48, dirichlet_fraction=0.0)
  graph = out.search_graph
  for game_index in range(BATCH):
    counts, terminal = _valid_counts(game, graph, game_index)
    expected = np.where(terminal, 0, np.maximum(counts - 3, 0)).sum()
    assert graph.dropped_actions[game_index] == expected
    used = int(graph.num_nodes[game_index])
    legal = np.asarray(graph.embeddings.legal_action_mask[game_index, :used])
    for node in range(used):
      if terminal[node]:
        continue
      kept = np.asarray(graph.children_actions[game_index, node])
      np.testing.assert_array_equal(kept[kept >= 0], np.flatnonzero(legal[node])[:3])
  root_actions = np.asarray(graph.children_actions[:, 0])
  weights = np.asarray(out.action_weights)
  for game_index in range(BATCH):
    outside = np.setdiff1d(np.arange(65), root_actions[game_index])
    assert np.all(weights[game_index, outside] == 0)
    assert int(out.action[game_index]) in root_actions[game_index]
  testing.check_graph(graph, 48, tree_mode=False)


def test_slots_hold_the_highest_priors():
  """With a prior that is not uniform, each node's slots hold the K actions of
  highest prior logit of its state (recomputed from `recurrent_fn`), in action
  order."""
  root_fn, recurrent_fn = testing.commuting_game(num_actions=6)
  root = root_fn(3)
  out = jax.jit(
    lambda key: mg.muzero_policy(
      None, key, root, recurrent_fn, 40, dirichlet_fraction=0.0, max_children=2, capacity=41
    )
  )(jax.random.PRNGKey(0))
  graph = jax.device_get(out.search_graph)
  top = np.sort(np.argsort(-np.asarray(root.prior_logits), axis=-1, kind="stable")[:, :2])
  np.testing.assert_array_equal(graph.children_actions[:, 0], top)
  for game_index in range(3):
    for node in range(int(graph.num_nodes[game_index])):
      for slot, child in enumerate(np.asarray(graph.children_index[game_index, node])):
        if child < 0 or graph.node_terminal[game_index, child]:
          continue
        action = graph.children_actions[game_index, node, slot][None]
        embedding = jax.tree_util.tree_map(
          lambda leaf, n=node, g=game_index: leaf[g, n][None], graph.embeddings
        )
        output, _ = recurrent_fn(None, None, action, embedding)
        best = np.sort(np.argsort(-np.asarray(output.prior_logits[0]), kind="stable")[:2])
        np.testing.assert_array_equal(graph.children_actions[game_index, child], best)
  # Six actions, all with a positive prior: four left out at every non-terminal node.
  non_terminal = [
    int(np.sum(~np.asarray(graph.node_terminal[g, : int(graph.num_nodes[g])]))) for g in range(3)
  ]
  np.testing.assert_array_equal(graph.dropped_actions, 4 * np.asarray(non_terminal))


@pytest.mark.slow
def test_reroot_by_an_action_no_slot_holds_empties_the_game():
  out = _search("muzero", "othello", 3, num_simulations=16)
  graph = out.search_graph
  held = np.asarray(graph.children_actions[:, 0])
  missing = np.array([np.setdiff1d(np.arange(65), row)[0] for row in held], np.int32)
  kept = mg.reroot(graph, missing)
  np.testing.assert_array_equal(kept.num_nodes, 0)
  testing.check_graph(kept, None, tree_mode=False, continued=True)


@pytest.mark.slow
def test_picture_labels_edges_with_actions():
  dense = _search("muzero", "othello", None, num_simulations=16)
  compact = _search("muzero", "othello", 24, num_simulations=16)
  pictures = [viz.subgraph(out.search_graph, 1, max_nodes=8) for out in (dense, compact)]
  assert pictures[0].edges == pictures[1].edges
  assert any(action >= 24 for _, action, _, _ in pictures[1].edges)


def test_bad_max_children_is_refused():
  with pytest.raises(ValueError, match="max_children"):
    mg.GraphOptions(max_children=0)
  with pytest.raises(TypeError, match="max_children"):
    mg.GraphOptions(max_children=2.5)


@pytest.mark.slow
def test_chance_nodes_with_covering_slots_search_as_dense():
  """2048 on a 3x3 board: decision nodes keep their moves, chance nodes their
  possible tiles in slots (18 outcomes, 4 moves); the search is the dense one."""
  game = make_game("2048:3")
  boards = game.init(jax.random.PRNGKey(0), batch_size=2)

  def search(max_children):
    return mg.stochastic_muzero_policy(
      None,
      jax.random.PRNGKey(1),
      game.root(None, jax.random.PRNGKey(2), boards),
      game.decision_recurrent_fn,
      game.chance_recurrent_fn,
      24,
      invalid_actions=game.invalid_actions(boards),
      hash_fn=game.hash_fn,
      afterstate_hash_fn=game.afterstate_hash_fn,
      max_children=max_children,
    )

  dense, compact = search(None), search(18)
  assert_same_search(dense, compact)
  assert compact.search_graph.max_children == 18
  kept = [mg.reroot(out.search_graph, out.action) for out in (dense, compact)]
  np.testing.assert_array_equal(
    kept[0].edge_visits, edges_by_action(kept[1], kept[1].edge_visits, 0)
  )
