"""`reroot(..., max_nodes=)` and self-play's `make_room`: a kept graph that leaves room
for the next search keeps its most visited nodes, the definitions of Monte-Carlo Graph
Search (KataGo's "Monte-Carlo Graph Search from First Principles") on every node, and
in tree mode the exact tree; and no playout of the next search finds the graph full."""

import dataclasses

import jax
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax.apps import registry, train
from mcgs_jax.games import networks, search_game
from mcgs_jax.games.adapter import make_game
from mcgs_jax.testing import check_graph, to_numpy

pytest.importorskip("pgx")

SIMULATIONS = 16
BATCH = 8
CAPACITY = 2 * SIMULATIONS + 1  # small: a kept graph fills it within a few plies


def searched_graphs(transpositions, *, max_nodes, plies=5, solver=False):
  """Plies of tic-tac-toe, each search continuing the previous one's graph rerooted
  with `max_nodes`; yields `(searched, rerooted, rerooted without max_nodes)`."""
  # Random-rollout values make the searches go deep: kept graphs fill the capacity.
  game = make_game("tic_tac_toe")
  game = dataclasses.replace(
    game, evaluator=registry.make_evaluator("rollout", game.env, num_rollouts=1)
  )
  options = dict(temperature=1.0, dirichlet_fraction=0.0, solver=solver)

  @jax.jit
  def step(key, state, graph):
    out = search_game(
      mg.muzero_policy,
      game,
      state,
      SIMULATIONS,
      key,
      transpositions=transpositions,
      capacity=CAPACITY,
      graph=graph,
      **options,
    )
    pruned = mg.reroot(out.search_graph, out.action, max_nodes=max_nodes)
    whole = mg.reroot(out.search_graph, out.action)
    return game.step(state, out.action), out.search_graph, pruned, whole

  key = jax.random.PRNGKey(3)
  state = game.init(key, BATCH)
  graph = mg.empty_like(jax.eval_shape(step, key, state, None)[1])
  for ply in range(plies):
    state, searched, graph, whole = step(jax.random.fold_in(key, ply), state, graph)
    yield searched, graph, whole


def _game(graph, game):
  """Game `game` of a numpy graph: every `[B, ...]` table's row."""
  return {name: table[game] for name, table in graph.items()}


# Tree mode's room is checked again, exactly, by test_tree_mode_stays_an_exact_tree.
@pytest.mark.quick_variants("True")
@pytest.mark.parametrize("transpositions", [True, False])
def test_room_is_left_and_the_invariants_hold(transpositions):
  room = CAPACITY - SIMULATIONS
  pruned_games = 0
  for ply, (searched, rerooted, whole) in enumerate(
    searched_graphs(transpositions, max_nodes=room)
  ):
    if ply:  # the search continued a graph with room for every playout
      assert int(np.sum(np.asarray(searched.capacity_overflows))) == 0
    check_graph(searched, None, tree_mode=not transpositions, continued=ply > 0)
    check_graph(rerooted, None, tree_mode=not transpositions, continued=True)
    kept, every = np.asarray(rerooted.num_nodes), np.asarray(whole.num_nodes)
    assert np.all(kept <= room) and np.all(kept <= every)
    pruned_games += int(np.sum(every > room))
  assert pruned_games > 0, "no graph outgrew the room: the test checks nothing"


@pytest.mark.slow
def test_without_room_the_same_plies_overflow():
  """The control: the same plies with every node kept lose playouts to a full graph."""
  overflows = 0
  for searched, _, _ in searched_graphs(True, max_nodes=None):
    overflows += int(np.sum(np.asarray(searched.capacity_overflows)))
  assert overflows > 0


def test_a_game_within_the_room_is_rerooted_bit_for_bit():
  for _, rerooted, whole in searched_graphs(True, max_nodes=CAPACITY - SIMULATIONS, plies=4):
    pruned, every = to_numpy(rerooted), to_numpy(whole)
    for game in np.flatnonzero(every["num_nodes"] <= CAPACITY - SIMULATIONS):
      for name in pruned:
        np.testing.assert_array_equal(pruned[name][game], every[name][game], err_msg=name)


@pytest.mark.slow
def test_graph_mode_keeps_edges_to_kept_nodes_and_drops_the_least_visited():
  """Checked against the whole rerooted graph node by node (a graph's nodes are
  matched by their keys): a kept node keeps every edge whose child is kept, with
  its visits, and loses the others; no dropped node has more visits than the
  kept ones except where no kept path leads to it."""
  max_nodes = 6
  checked = 0
  for _, rerooted, whole in searched_graphs(True, max_nodes=max_nodes, plies=4):
    check_graph(rerooted, None, tree_mode=False, continued=True)
    pruned, every = to_numpy(rerooted), to_numpy(whole)
    for game in range(BATCH):
      small, large = _game(pruned, game), _game(every, game)
      used, all_used = int(small["num_nodes"]), int(large["num_nodes"])
      assert used <= max_nodes
      if all_used <= max_nodes:
        continue
      checked += 1
      index_of = {tuple(large["node_keys"][node]): node for node in range(all_used)}
      old = [index_of[tuple(small["node_keys"][node])] for node in range(used)]
      assert old[0] == 0
      kept_keys = {tuple(small["node_keys"][node]) for node in range(used)}
      # The t-th largest visit count of the whole graph: every kept node but the
      # root has more.
      threshold = np.sort(large["node_visits"][:all_used])[::-1][max_nodes - 1]
      assert np.all(large["node_visits"][old[1:]] > threshold)
      for node, old_node in enumerate(old):
        for action in range(small["children_index"].shape[-1]):
          child = large["children_index"][old_node, action]
          if child < 0:
            assert small["children_index"][node, action] == -1
            continue
          if tuple(large["node_keys"][child]) in kept_keys:
            new_child = small["children_index"][node, action]
            assert tuple(small["node_keys"][new_child]) == tuple(large["node_keys"][child])
            assert small["edge_visits"][node, action] == large["edge_visits"][old_node, action]
          else:
            assert small["children_index"][node, action] == -1
            assert small["edge_visits"][node, action] == 0
        # N(n) loses exactly the visits of the edges it lost.
        lost = large["edge_visits"][old_node].sum() - small["edge_visits"][node].sum()
        assert small["node_visits"][node] == large["node_visits"][old_node] - lost
  assert checked > 0


@pytest.mark.parametrize("solver", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_tree_mode_stays_an_exact_tree(solver):
  """In tree mode the visits a dropped subtree took are taken from every edge above
  it and every value above is recomputed: `check_graph`'s tree mode asserts
  `N(child) = N(parent, a)` and the exact formula at every node."""
  max_nodes = 5
  checked = 0
  for _, rerooted, whole in searched_graphs(False, max_nodes=max_nodes, plies=4, solver=solver):
    # With the solver a playout may count an edge without entering its child (as a
    # playout cut short does; the unpruned trees show it too), so `N(child) = N(parent,
    # a)` is not asserted there; the counts and the exact values are.
    check_graph(rerooted, None, tree_mode=True, continued=True, playouts_stop_early=solver)
    kept, every = np.asarray(rerooted.num_nodes), np.asarray(whole.num_nodes)
    assert np.all(kept <= max_nodes)
    checked += int(np.sum(every > max_nodes))
    # The root lost what its dropped subtrees held.
    lost = np.asarray(whole.node_visits[:, 0]) - np.asarray(rerooted.node_visits[:, 0])
    dropped = every - kept
    assert np.all((lost > 0) == (dropped > 0))
  assert checked > 0


@pytest.mark.slow
def test_max_nodes_at_least_the_capacity_changes_nothing():
  for searched, _, _ in searched_graphs(True, max_nodes=None, plies=2):
    action = np.zeros(BATCH, np.int32) + 4
    plain = to_numpy(mg.reroot(searched, action))
    for max_nodes in (CAPACITY, CAPACITY + 7):
      same = to_numpy(mg.reroot(searched, action, max_nodes=max_nodes))
      for name in plain:
        np.testing.assert_array_equal(same[name], plain[name], err_msg=name)


@pytest.fixture(scope="module")
def one_searched_graph():
  searched, _, _ = next(iter(searched_graphs(True, max_nodes=None, plies=1)))
  return searched


@pytest.mark.parametrize("max_nodes", [0, -3, 2.5, True, "8"])
def test_bad_max_nodes_is_refused_by_name(one_searched_graph, max_nodes):
  searched = one_searched_graph
  with pytest.raises(ValueError, match="max_nodes must be None or an int >= 1"):
    mg.reroot(searched, np.zeros(BATCH, np.int32), max_nodes=max_nodes)


@pytest.fixture(scope="module")
def network_game():
  board = registry.game_from_spec("tic_tac_toe")
  apply_fn, params = networks.init_network(board.env, jax.random.PRNGKey(0), hidden=(16,))
  evaluator = registry.make_evaluator("network", board.env, apply_fn=apply_fn)
  return dataclasses.replace(board, evaluator=evaluator), params


@pytest.mark.slow
def test_self_play_with_room_drops_no_playout(network_game):
  game, params = network_game
  settings = dict(num_games=8, num_simulations=8, capacity=13, hidden=(16,), eval_games=0)
  overflows = {}
  for make_room in (False, True):
    config = train.Config.quick(**settings, make_room=make_room, progress=False)
    trajectory = jax.device_get(train.make_self_play(game, config)(params, jax.random.PRNGKey(1)))
    overflows[make_room] = int(trajectory["capacity_overflows"].sum())
    if make_room:  # every playout counted at the root
      np.testing.assert_array_equal(trajectory["new_root_visits"][trajectory["valid"]], 8)
  assert overflows == {False: overflows[False], True: 0}
  assert overflows[False] > 0, "the graph never filled: the test checks nothing"


def test_train_command_names_the_make_room_flag(capsys):
  assert train.main(["--make-room", "--no-reuse"]) == 2
  line = capsys.readouterr().err.strip()
  assert line.startswith("mcgs-jax train: error: --make-room: make_room must be False")


def test_arena_agent_make_room_is_checked_and_described():
  from mcgs_jax.apps.arena.agent import Agent

  agent = Agent(policy="muzero", evaluator="uniform", num_simulations=8, make_room=True)
  assert agent.describe().endswith("reuse room")
  with pytest.raises(ValueError, match="make_room=True needs reuse"):
    Agent(num_simulations=8, reuse=False, make_room=True)
  with pytest.raises(ValueError, match=r"make_room=True needs capacity \(8\) above"):
    Agent(num_simulations=8, capacity=8, make_room=True)
  with pytest.raises(ValueError, match="make_room=True is for engine 'mcgs'"):
    Agent(policy="muzero", engine="mctx", num_simulations=8, make_room=True)


def test_arena_command_names_make_room_for_mctx(capsys):
  from mcgs_jax.apps.cli import arena_command

  assert arena_command.main(["--b-engine", "mctx", "--b-make-room", "--games", "2"]) == 2
  assert "--b-make-room is for --b-engine mcgs" in capsys.readouterr().err
