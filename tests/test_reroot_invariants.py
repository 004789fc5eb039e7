"""`check_graph(continued=True)` accepts what `reroot` and a continued search make, for
every policy, and still rejects a broken graph."""

import jax
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax.apps import registry
from mcgs_jax.games import search_game
from mcgs_jax.games.adapter import make_game
from mcgs_jax.testing import check_graph

pytest.importorskip("pgx")

SIMULATIONS = 24
BATCH = 6
POLICIES = {
  # No root noise (not what this checks; without it the program compiles faster).
  "muzero": lambda: dict(
    policy=mg.muzero_policy, options=dict(temperature=0.0, dirichlet_fraction=0.0)
  ),
  **{
    name: lambda policy=policy: dict(policy=policy, options={})
    for name, policy in registry.POLICIES.items()
    if name != "muzero"
  },
}


def play(policy_name, transpositions, plies=4, simulations=SIMULATIONS):
  """Plies of tic-tac-toe where every search continues the rerooted graph; yields
  `(searched, rerooted)` graphs as numpy-ready pytrees."""
  game = make_game("tic_tac_toe")
  setup = POLICIES[policy_name]()

  @jax.jit
  def step(key, state, graph):
    out = search_game(
      setup["policy"],
      game,
      state,
      simulations,
      key,
      transpositions=transpositions,
      capacity=4 * simulations + 1,
      graph=graph,
      **setup["options"],
    )
    rerooted = mg.reroot(out.search_graph, out.action)
    return game.step(state, out.action), out.search_graph, rerooted

  key = jax.random.PRNGKey(7)
  state = game.init(key, BATCH)
  # Empty games (num_nodes == 0) take their root: the first ply continues an empty
  # graph of the search's own shapes, so every ply runs one compiled step.
  graph = mg.empty_like(jax.eval_shape(step, key, state, None)[1])
  for ply in range(plies):
    state, searched, graph = step(jax.random.fold_in(key, ply), state, graph)
    yield searched, graph


# Two combinations in the suite, the other four with the slow checks.
COMBINATIONS = [
  pytest.param(name, transpositions, marks=() if keep else pytest.mark.slow)
  for name in sorted(POLICIES)
  for transpositions in (True, False)
  for keep in [(name, transpositions) in {("muzero", True), ("gumbel", False)}]
]


@pytest.mark.quick_variants("muzero-True")
@pytest.mark.parametrize("policy_name, transpositions", COMBINATIONS)
def test_rerooted_and_continued_graphs_pass(policy_name, transpositions):
  rerooted_games = 0
  for ply, (searched, rerooted) in enumerate(play(policy_name, transpositions)):
    check_graph(
      searched,
      SIMULATIONS if ply == 0 else None,
      tree_mode=not transpositions,
      continued=ply > 0,
    )
    check_graph(rerooted, None, tree_mode=not transpositions, continued=True)
    rerooted_games += int(np.sum(np.asarray(rerooted.num_nodes) > 0))
  assert rerooted_games > 0  # graphs were kept, not only emptied


def test_graph_mode_reroot_keeps_terminals_with_dropped_parents():
  """The case the audit found: a terminal state reached from several parents keeps
  its visits when some of them are dropped, so fewer visits arrive through the kept
  edges than it holds. `continued=True` accepts it."""
  found = False
  # 64 simulations a move: enough for terminals reached from several parents.
  for _, rerooted in play("uct", True, plies=6, simulations=64):
    names = ("num_nodes", "node_terminal", "node_visits", "children_index", "edge_visits")
    graph = {name: np.asarray(getattr(rerooted, name)) for name in names}
    for game in range(BATCH):
      used = int(graph["num_nodes"][game])
      children = graph["children_index"][game, :used]
      kept = children >= 0
      arrivals = np.zeros(used)
      np.add.at(arrivals, children[kept], graph["edge_visits"][game, :used][kept])
      terminal = graph["node_terminal"][game, :used].copy()
      terminal[:1] = False
      visits = graph["node_visits"][game, :used]
      found |= bool(np.any(arrivals[terminal] < visits[terminal]))
    check_graph(rerooted, None, tree_mode=False, continued=True)
  assert found, "no terminal lost a parent: the test plays too few plies"


def test_continued_check_still_rejects_broken_graphs():
  _, rerooted = next(iter(play("muzero", True, plies=1)))
  live = int(np.argmax(np.asarray(rerooted.num_nodes) > 1))
  broken = rerooted.replace(node_visits=rerooted.node_visits.at[live, 0].add(1))
  with pytest.raises(AssertionError, match="N != k"):
    check_graph(broken, None, tree_mode=False, continued=True)
  # A game that says it is empty must be empty.
  emptied = rerooted.replace(num_nodes=rerooted.num_nodes.at[live].set(0))
  with pytest.raises(AssertionError, match="is empty but"):
    check_graph(emptied, None, tree_mode=False, continued=True)
