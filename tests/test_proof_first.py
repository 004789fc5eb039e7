"""The solver's proof-first selection (`GraphOptions.proof_first`, issue 60, "Search
truth, still short"): on Nim 3,4,5 (120 states; the only winning move takes 2 from
the first heap) every one of 12 seeds proves the root and plays that move by 400
simulations with random rollouts, for muzero, gumbel and uct; without it 0 to 9 of
12 did (`benchmarks/solver_nim_trace.py`). Every proof is checked against the exact
solver (with compact edges, parallel playouts, a tree, the stop rule, folding and
`reroot` too), and the count the selection reads (`Graph.node_unproven_edges`)
against the graph it describes.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax.apps import registry
from mcgs_jax.games import evaluators, search_game, solvers
from mcgs_jax.games.adapter import make_game
from mcgs_jax.games.nim import Nim
from mcgs_jax.testing import check_graph

HEAPS = (3, 4, 5)
WINNING_ACTION = 1  # take 2 from heap 0
SEEDS = 12
SIMULATIONS = 400
KEY = jax.random.PRNGKey(0)


def _nim_search(policy, heaps, simulations, seeds, key, **graph_options):
  """`PolicyOutput` of `seeds` solver searches of one Nim position (one batch, one
  key), with `proof_first` and `graph_options` (which may override both)."""
  env = Nim(heaps)
  game = make_game(env, evaluators.rollout_evaluator(env))
  options = dict(registry.POLICY_TABLE[policy].playing_options)
  if policy == "uct":
    options["c"] = 1.41
  options = {"solver": True, "proof_first": True, **options, **graph_options}

  @jax.jit
  def run(key):
    keys = jax.random.split(key, seeds)
    state = jax.vmap(lambda k: env.init_from_heaps(jnp.array(heaps)))(keys)
    return search_game(
      registry.POLICIES[policy],
      game,
      state,
      simulations,
      keys[1],
      root_key=keys[0],
      **options,
    )

  return run(key)


@functools.cache
def _search(policy: str, proof_first: bool = True):
  """`PolicyOutput` of `SEEDS` solver searches of Nim 3,4,5 at 400 simulations."""
  out = _nim_search(
    policy, HEAPS, SIMULATIONS, SEEDS, jax.random.PRNGKey(3), proof_first=proof_first
  )
  return jax.block_until_ready(out)


def _assert_proofs_exact(graph):
  """Every proven non-terminal node of a Nim graph holds its state's exact value."""
  proven = np.asarray(graph.node_proven & ~graph.node_terminal)
  heaps = np.asarray(graph.embeddings.heaps)
  values = np.asarray(graph.proven_values)
  for game, node in zip(*np.nonzero(proven), strict=True):
    assert values[game, node] == solvers.nim_value(tuple(heaps[game, node])), (game, node)


@pytest.mark.quick_variants("uct")
@pytest.mark.parametrize("policy", ["muzero", "gumbel", "uct"])
def test_nim_3_4_5_is_proven_and_won_in_every_seed_by_400_simulations(policy):
  out = _search(policy)
  graph = out.search_graph
  np.testing.assert_array_equal(np.asarray(graph.node_proven[:, 0]), True)
  np.testing.assert_array_equal(np.asarray(graph.proven_values[:, 0]), 1.0)
  np.testing.assert_array_equal(np.asarray(out.action), WINNING_ACTION)
  _assert_proofs_exact(graph)


def test_the_unproven_counts_are_those_of_the_graph():
  """A node's count is its legal edges into no proven child as of its last
  recomputation: never fewer than now (children only become proven; a stale count
  is higher), exact at the root (recomputed by every playout), and 0 where the node
  is settled by full expansion."""
  graph = _search("uct").search_graph
  counts = np.asarray(graph.node_unproven_edges)
  children = np.asarray(graph.children_index)
  child_proven = np.take_along_axis(
    np.asarray(graph.node_proven), np.maximum(children, 0).reshape(SEEDS, -1), axis=1
  ).reshape(children.shape)
  legal = np.asarray(jax.nn.softmax(graph.children_prior_logits, axis=-1) > 0)
  now = np.sum(legal & ~((children >= 0) & child_proven), axis=-1)
  used = np.arange(counts.shape[1])[None] < np.asarray(graph.num_nodes)[:, None]
  live = used & ~np.asarray(graph.node_terminal)
  assert np.all(counts[live] >= now[live])
  np.testing.assert_array_equal(counts[:, 0], now[:, 0])
  np.testing.assert_array_equal(counts[~used], 0)


def test_without_it_the_graph_keeps_no_count():
  """`proof_first=False` keeps no `node_unproven_edges`, nor does a search without
  the solver; a value other than a bool is refused, naming the keyword."""
  for options in (dict(proof_first=False), dict(proof_first=True, solver=False)):
    shapes = jax.eval_shape(
      lambda key, options=options: _nim_search("uct", HEAPS, 8, 2, key, **options), KEY
    )
    assert shapes.search_graph.node_unproven_edges is None, options
  with pytest.raises(TypeError, match="proof_first must be a bool"):
    mg.GraphOptions(solver=True, proof_first=1)
  assert not mg.GraphOptions(proof_first=True).counts_unproven_edges


@pytest.mark.parametrize(
  "options",
  [
    dict(max_children=2, num_parallel=2),
    dict(max_children=4),
    dict(transpositions=False),
    dict(stop_rule="catch_up", fold_evaluations=True),
  ],
  ids=["slots_2_parallel_2", "slots_4", "tree", "catch_up_fold"],
)
@pytest.mark.slow
def test_proofs_stay_exact_with_the_other_options(options):
  """The order changes which edge a playout takes, never what is proven: with compact
  edges below the legal count, parallel playouts, a tree, the stop rule and folding,
  every proof is the exact solver's and a decided root plays an optimal move."""
  out = _nim_search("muzero", HEAPS, 200, 4, jax.random.PRNGKey(5), **options)
  _assert_proofs_exact(out.search_graph)
  values = solvers.nim_action_values(HEAPS, max(HEAPS))
  decided = np.asarray(out.search_graph.node_proven[:, 0])
  for action in np.asarray(out.action)[decided]:
    assert values[int(action)] == max(values.values())


@pytest.mark.slow
def test_a_rerooted_graph_searches_on():
  """`reroot` keeps the counts with their rows; the search continued from it holds
  the invariants of a continued graph and exact proofs."""
  heaps, capacity = (2, 3, 4), 256
  first = _nim_search("muzero", heaps, 48, 4, jax.random.PRNGKey(6), capacity=capacity)
  graph = mg.reroot(first.search_graph, first.action)
  env = Nim(heaps)
  game = make_game(env, evaluators.rollout_evaluator(env))
  state = jax.vmap(lambda k: env.init_from_heaps(jnp.array(heaps)))(jax.random.split(KEY, 4))
  state = jax.vmap(env.step)(state, first.action)
  search = jax.jit(
    lambda state, graph: search_game(
      mg.muzero_policy,
      game,
      state,
      48,
      KEY,
      solver=True,
      proof_first=True,
      capacity=capacity,
      graph=graph,
      dirichlet_fraction=0.0,
    )
  )
  out = search(state, graph)
  check_graph(out.search_graph, None, tree_mode=False, continued=True)
  _assert_proofs_exact(out.search_graph)
