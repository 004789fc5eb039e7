"""Transpositions on a real game: tic-tac-toe move orders meet in one node."""

import functools

import jax
import numpy as np

import mcgs_jax as mg
from mcgs_jax.games import search_game
from mcgs_jax.games.adapter import make_game
from mcgs_jax.testing import check_graph

SIMS = 300


@functools.cache
def searched(transpositions):
  game = make_game("tic_tac_toe")
  state = game.init(jax.random.PRNGKey(0), 2)

  @jax.jit
  def run(key):
    return search_game(mg.muzero_policy, game, state, SIMS, key, transpositions=transpositions)

  return game, run(jax.random.PRNGKey(1)).search_graph


def test_move_orders_meet_in_one_node():
  game, graph = searched(True)
  step = jax.jit(game.step)
  for g in range(2):
    used = int(graph.num_nodes[g])
    children = np.asarray(graph.children_index[g, :used])
    boards = np.asarray(graph.embeddings._x.board[g, :used])
    # No state is held by two nodes (nothing was dropped from the table here).
    assert int(graph.dropped_inserts[g]) == 0
    assert len({b.tobytes() for b in boards}) == used
    parents = {}
    for node in range(used):
      for action in np.flatnonzero(children[node] >= 0):
        parents.setdefault(int(children[node, action]), []).append((node, int(action)))
    shared = {child: edges for child, edges in parents.items() if len(edges) >= 2}
    assert shared, "no state was reached by two move orders"
    # Every edge into a shared node is a real move that produces that node's board.
    for child, edges in list(shared.items())[:20]:
      nodes = np.array([node for node, _ in edges])
      actions = np.array([action for _, action in edges])
      parent_states = jax.tree_util.tree_map(lambda x: x[g, nodes], graph.embeddings)
      moved = step(parent_states, actions)
      np.testing.assert_array_equal(
        np.asarray(moved._x.board), np.broadcast_to(boards[child], moved._x.board.shape)
      )
    check_graph(graph, SIMS, tree_mode=False)


def test_graph_uses_fewer_nodes_than_tree():
  _, graph = searched(True)
  _, tree = searched(False)
  assert np.all(np.asarray(graph.num_nodes) < np.asarray(tree.num_nodes))
  assert np.all(np.asarray(graph.transposition_hits) > 0)
  check_graph(tree, SIMS, tree_mode=True)
