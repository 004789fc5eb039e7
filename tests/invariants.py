"""Checks of a searched graph against the definitions of MCGS (numpy, per game)."""

import numpy as np


def node_formula(graph_np, game, node):
  """`(1 + sum_a N(n,a), (U + sum_a N(n,a) (r + g Q(child))) / N)` from stored arrays."""
  edge_visits = graph_np["edge_visits"][game, node].astype(np.float64)
  children = graph_np["children_index"][game, node]
  child_q = np.where(children >= 0, graph_np["node_values"][game, np.maximum(children, 0)], 0.0)
  q = graph_np["edge_rewards"][game, node] + graph_np["edge_discounts"][game, node] * child_q
  visits = 1 + edge_visits.sum()
  value = (graph_np["raw_values"][game, node] + (edge_visits * q).sum()) / visits
  return visits, value


def to_numpy(graph):
  return {name: np.asarray(getattr(graph, name)) for name in (
      "node_visits", "raw_values", "node_values", "node_terminal", "node_proven",
      "proven_values", "children_index",
      "edge_visits", "edge_rewards", "edge_discounts", "num_nodes",
      "transposition_hits", "dropped_inserts", "capacity_overflows",
      "parallel_collisions")}


def check_graph(graph, num_simulations, *, tree_mode, q_exact_nodes=None, atol=1e-5,
                check_values=True, playouts_stop_early=False):
  """Asserts the invariants of every game of a searched graph.

  `q_exact_nodes(game)` lists the nodes whose Q must equal the formula (in graph mode
  other nodes may hold a Q computed before a shared child changed); the root always.
  `num_simulations=None` skips the root count (a continued graph holds more).
  `check_values=False` skips Q (a self-loop makes the formula read its own result).
  `playouts_stop_early`: in tree mode, playouts cut by `max_depth` or a full graph
  count an edge without entering its child, so a child may have fewer visits than
  its edge.
  """
  g = to_numpy(graph)
  batch_size = g["num_nodes"].shape[0]
  for game in range(batch_size):
    used = int(g["num_nodes"][game])
    assert 1 <= used <= g["node_visits"].shape[1]
    children = g["children_index"][game, :used]
    edge_visits = g["edge_visits"][game, :used]
    assert np.all(g["node_visits"][game, used:] == 0), "unused nodes must be untouched"
    assert np.all(children < used), "a child index points past num_nodes"
    assert np.all((edge_visits == 0) | (children >= 0)), "a visited edge has no child"
    assert np.all(edge_visits >= 0)
    incoming = np.zeros(used)
    np.add.at(incoming, children[children >= 0], edge_visits[children >= 0])
    parents = np.bincount(children[children >= 0], minlength=used)
    assert np.all(parents[1:] >= 1), "a node no edge leads to (created twice?)"
    if tree_mode:
      assert np.all(parents[1:] == 1), "tree mode: a node with two parents"
      assert parents[0] == 0
    for node in range(used):
      visits = g["node_visits"][game, node]
      assert visits >= 1
      if g["node_terminal"][game, node]:
        assert edge_visits[node].sum() == 0, "a terminal node has visited edges"
        if node:
          assert incoming[node] == visits, "terminal visits must equal arrivals"
        continue
      expected_visits, _ = node_formula(g, game, node)
      assert visits == expected_visits, f"game {game} node {node}: N != 1 + sum N(n,a)"
      if node:
        if tree_mode and not playouts_stop_early:
          assert incoming[node] == visits, "tree mode: N(child) must equal N(parent, a)"
        else:
          assert incoming[node] >= visits, "more passes through a node than edges into it"
    exact = [0] + list(q_exact_nodes(game) if q_exact_nodes else [])
    if tree_mode:
      exact = range(used)
    if not check_values:
      exact = []
    for node in exact:
      if g["node_terminal"][game, node]:
        continue
      _, expected_value = node_formula(g, game, node)
      if g["node_proven"][game, node]:  # the solver's exact value replaces the formula
        expected_value = g["proven_values"][game, node]
      np.testing.assert_allclose(g["node_values"][game, node], expected_value, atol=atol,
                                 err_msg=f"game {game} node {node}: Q != idempotent formula")
    if (num_simulations is not None and g["capacity_overflows"][game] == 0
        and not g["node_terminal"][game, 0]):
      counted = num_simulations - g["parallel_collisions"][game]
      assert g["node_visits"][game, 0] == counted + 1
      assert edge_visits[0].sum() == counted
