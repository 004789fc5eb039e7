"""`mcgs_jax.viz`: DOT text and matplotlib drawing of a tic-tac-toe search graph."""

import re

import jax
import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.collections import PathCollection

import mcgs_jax as mg
from mcgs_jax.apps import viz
from mcgs_jax.games import evaluators, search_game
from mcgs_jax.games.adapter import make_game

pgx = pytest.importorskip("pgx")

NODE_LINE = re.compile(r"^\s*n(\d+) \[", re.MULTILINE)
EDGE_LINE = re.compile(r"^\s*n(\d+) -> n(\d+) \[label=\"([^\"]*)\"", re.MULTILINE)


@pytest.fixture(scope="module")
def graph():
  """Graph-mode search of two tic-tac-toe games after X center, O corner."""
  env = pgx.make("tic_tac_toe")
  game = make_game(env, evaluators.rollout_evaluator(env))
  state = game.play([4, 0])
  state = jax.tree.map(lambda x: np.stack([x, x]), state)

  @jax.jit
  def search(key):
    return search_game(mg.muzero_policy, game, state, 100, key).search_graph

  result = search(jax.random.PRNGKey(1))
  assert int(result.transposition_hits[0]) > 0, "the fixture needs a shared node"
  return result


def kept_nodes(dot):
  return [int(n) for n in NODE_LINE.findall(dot)]


def test_dot_mentions_every_kept_node_once_and_edges_stay_inside(graph):
  sub = viz.subgraph(graph, 0, max_nodes=25)
  dot = viz.to_dot(graph, 0, max_nodes=25)
  nodes = kept_nodes(dot)
  assert sorted(nodes) == sorted(sub.nodes)
  assert len(nodes) == len(set(nodes)) == 25
  assert dot.startswith("digraph mcgs {") and dot.rstrip().endswith("}")
  edges = EDGE_LINE.findall(dot)
  assert len(edges) == len(sub.edges) > 0
  children = np.asarray(graph.children_index[0])
  visits = np.asarray(graph.edge_visits[0])
  for parent, child, label in edges:
    parent, child = int(parent), int(child)
    assert parent in nodes and child in nodes
    action_text, visit_text = label.split("\\n")
    action = int(action_text)
    assert children[parent, action] == child
    assert visit_text == f"N={visits[parent, action]}"
  # The root comes first and every kept node but the root has a kept parent.
  assert nodes[0] == 0
  assert {int(c) for _, c, _ in edges} == set(nodes) - {0}


def test_kept_nodes_are_the_most_visited_frontier(graph):
  sub = viz.subgraph(graph, 0, max_nodes=10)
  visits = np.asarray(graph.node_visits[0])
  children = np.asarray(graph.children_index[0])
  kept = set(sub.nodes)
  frontier = {int(c) for n in kept for c in children[n] if c >= 0} - kept
  assert min(visits[n] for n in kept) >= max(visits[n] for n in frontier)


def test_shared_node_is_marked(graph):
  children = np.asarray(graph.children_index[0])[: int(graph.num_nodes[0])]
  incoming = np.bincount(children[children >= 0], minlength=children.shape[0])
  shared = set(np.flatnonzero(incoming >= 2).tolist())
  assert shared
  dot = viz.to_dot(graph, 0, max_nodes=None)
  for line in dot.splitlines():
    match = NODE_LINE.match(line)
    if not match:
      continue
    node = int(match.group(1))
    marked = viz.SHARED_COLOR in line and "shared (" in line
    assert marked == (node in shared), line


def test_limits(graph):
  total = int(graph.num_nodes[1])
  assert len(kept_nodes(viz.to_dot(graph, 1, max_nodes=None))) == total
  assert len(kept_nodes(viz.to_dot(graph, 1, max_nodes=7))) == 7
  assert len(kept_nodes(viz.to_dot(graph, 1, max_nodes=10 * total))) == total
  assert kept_nodes(viz.to_dot(graph, 1, max_depth=0)) == [0]
  sub = viz.subgraph(graph, 1, max_nodes=None, max_depth=1)
  root_children = {int(c) for c in np.asarray(graph.children_index[1, 0]) if c >= 0}
  assert set(sub.nodes) == {0} | root_children
  assert all(d <= 1 for d in sub.depth.values())
  with pytest.raises(ValueError, match="max_nodes"):
    viz.to_dot(graph, max_nodes=0)


def test_action_labels(graph):
  names = [f"cell{a}" for a in range(9)]
  dot = viz.to_dot(graph, 0, max_nodes=5, action_labels=names)
  assert all(label.split("\\n")[0] in names for _, _, label in EDGE_LINE.findall(dot))
  dot = viz.to_dot(graph, 0, max_nodes=5, action_labels=lambda a: f"<{a}>")
  assert all(label.startswith("<") for _, _, label in EDGE_LINE.findall(dot))


@pytest.mark.parametrize("max_nodes, max_depth", [(40, None), (12, 2), (None, 1)])
def test_plot_graph_draws_one_marker_per_node(graph, tmp_path, max_nodes, max_depth):
  sub = viz.subgraph(graph, 0, max_nodes=max_nodes, max_depth=max_depth)
  ax = viz.plot_graph(graph, 0, max_nodes=max_nodes, max_depth=max_depth)
  markers = sum(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection))
  assert markers == len(sub.nodes)
  path = tmp_path / "graph.png"
  ax.figure.savefig(path, dpi=50)
  assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  plt.close(ax.figure)


def test_plot_graph_on_given_axes_and_single_game(graph):
  one_game = jax.tree.map(lambda x: x[1], graph)
  fig, ax = plt.subplots()
  assert viz.plot_graph(one_game, ax=ax, max_nodes=8, show_labels=False) is ax
  single, batched = viz.subgraph(one_game, max_nodes=8), viz.subgraph(graph, 1, max_nodes=8)
  assert (single.nodes, single.edges) == (batched.nodes, batched.edges)
  assert kept_nodes(viz.to_dot(one_game, max_nodes=8)) == single.nodes
  plt.close(fig)
