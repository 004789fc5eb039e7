"""The qualitative findings of the chapter "Tìm kiếm cây Monte Carlo" (Monte Carlo tree
search; its author is not named) on UCT with random rollouts on Nim, checked against
minimax, with fixed seeds.

The measurement these thresholds come from is in benchmarks/RESULTS.md, "UCT + random
rollouts on Nim, checked against minimax".
Each test searches 12 identical roots as one batch (12 "seeds") with c = 1.41, one
random rollout per leaf and 400 simulations.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax.games import evaluators, search_game, solvers
from mcgs_jax.games.adapter import make_game
from mcgs_jax.games.nim import Nim
from mcgs_jax.testing import check_graph

NUM_SEEDS = 12
NUM_SIMULATIONS = 400


@functools.cache
def nim_search(heaps, transpositions):
  """`(PolicyOutput as numpy, env)` of one fixed-key UCT search, cached per config."""
  env = Nim(heaps)
  game = make_game(env, evaluators.rollout_evaluator(env))

  @jax.jit
  def search(key):
    state = jax.vmap(lambda k: env.init_from_heaps(jnp.array(heaps)))(
      jax.random.split(key, NUM_SEEDS)
    )
    root_key, search_key = jax.random.split(key)
    return search_game(
      mg.uct_policy,
      game,
      state,
      NUM_SIMULATIONS,
      search_key,
      root_key=root_key,
      c=1.41,
      transpositions=transpositions,
      capacity=NUM_SIMULATIONS + 1,
    )

  return jax.block_until_ready(search(jax.random.PRNGKey(0))), env


def optimal_actions(heaps, env):
  values = solvers.nim_action_values(heaps, env.max_heap)
  return {a for a, v in values.items() if v == max(values.values())}


@pytest.mark.slow
def test_nim_2_4_tree_mode_finds_the_winning_move():
  out, env = nim_search((2, 4), False)
  optimal = optimal_actions((2, 4), env)
  assert optimal == {env.action(1, 2)}  # take 2 from heap B
  chosen = np.asarray(out.action)
  assert np.isin(chosen, list(optimal)).sum() >= NUM_SEEDS - 1
  # Its estimated win rate is high (the chapter: 88%).
  q = np.asarray(out.search_graph.summary().qvalues)[:, env.action(1, 2)]
  assert np.mean((q + 1) / 2) > 0.75


@pytest.mark.slow
def test_nim_3_4_5_random_rollouts_mislead():
  """The chapter: the right move looks worse (~42%) than a wrong one (~64%)."""
  out, env = nim_search((3, 4, 5), False)
  right = env.action(0, 2)  # take 2 from heap A
  assert optimal_actions((3, 4, 5), env) == {right}
  chosen = np.asarray(out.action)
  q = np.asarray(out.search_graph.summary().qvalues)
  chosen_win = (q[np.arange(NUM_SEEDS), chosen] + 1) / 2
  right_win = (q[:, right] + 1) / 2
  # Most seeds do not choose the right move...
  assert (chosen != right).sum() > NUM_SEEDS // 2
  # ...because it is under-estimated relative to the move they choose.
  wrong = chosen != right
  assert np.mean(right_win[wrong]) < np.mean(chosen_win[wrong]) - 0.05
  assert np.mean(right_win[wrong] < chosen_win[wrong]) >= 0.75


@pytest.mark.parametrize("heaps", [(2, 4), (3, 4, 5)])
@pytest.mark.slow
def test_node_counts_tree_vs_graph(heaps):
  tree, _ = nim_search(heaps, False)
  graph, _ = nim_search(heaps, True)
  states = int(np.prod([h + 1 for h in heaps]))  # heap vectors, (0,..,0) included
  graph_nodes = np.asarray(graph.search_graph.num_nodes)
  assert np.all(graph_nodes <= states)
  assert np.all(np.asarray(graph.search_graph.transposition_hits) > 0)
  assert np.all(np.asarray(graph.search_graph.capacity_overflows) == 0)
  tree_nodes = np.asarray(tree.search_graph.num_nodes)
  if heaps == (3, 4, 5):
    # The tree of 3-4-5 is far larger than 400 nodes: nearly every simulation adds
    # one (a few end on terminals already in the tree).
    assert np.all(tree_nodes >= NUM_SIMULATIONS + 1 - 10)
    assert np.all(tree_nodes <= NUM_SIMULATIONS + 1)
  else:
    # Nim 2-4's whole tree is small: the tree repeats its 15 states many times over.
    assert np.all(tree_nodes > states)
  assert np.all(tree_nodes > graph_nodes)


@pytest.mark.quick_variants("heaps0")  # as test_node_counts_tree_vs_graph: one search each
@pytest.mark.parametrize("heaps", [(2, 4), (3, 4, 5)])
def test_tree_invariants(heaps):
  out, _ = nim_search(heaps, False)
  graph = out.search_graph
  check_graph(graph, NUM_SIMULATIONS, tree_mode=True)
  # Root visits count the root's own evaluation once, plus one per simulation.
  assert np.all(np.asarray(graph.node_visits)[:, 0] == NUM_SIMULATIONS + 1)
  check_graph(nim_search(heaps, True)[0].search_graph, NUM_SIMULATIONS, tree_mode=False)
