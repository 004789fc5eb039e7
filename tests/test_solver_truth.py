"""The solver's proofs against the exact solvers, under every policy and every
compact-edge width `K`, below a node's legal count included (issue 60, defect 1).

Every proven non-terminal node of the searched graph must hold its state's exact
value, and a root the solver has decided (proven, or holding an edge proven worth
the highest value) must play an exactly optimal move. With `K` below a node's legal
count its dropped moves are never searched: such a node may be proven by a winning
slot, never by all of its slots being proven (`proofs.has_dropped_actions`).
Games: Nim 3,4,5 (`solvers.nim_value`), tic-tac-toe two moves in
(`solvers.tic_tac_toe_values`) and a layered DAG game (`solvers.dag_values`).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mcgs_jax import testing
from mcgs_jax.apps import registry
from mcgs_jax.games import dag, evaluators, search_game, solvers
from mcgs_jax.games.adapter import make_game
from mcgs_jax.games.nim import Nim

BATCH = 4
SIMULATIONS = 200
NIM_HEAPS = (3, 4, 5)  # 12 legal moves at the root
DAG = dict(num_actions=4, depth=6, width=5, seed=3)
TIC_TAC_TOE_OPENING = (4, 0)  # 7 legal moves left
# None: dense; 1, 2, 4: below the root's legal count in every game; 16: above it.
WIDTHS = (None, 1, 2, 4, 16)


def _game_and_start(name: str):
  """`(env, unbatched start state)`."""
  if name == "nim":
    env = Nim(NIM_HEAPS)
  elif name == "dag":
    env = dag.DagGame(**DAG)
  else:
    game = make_game(name)
    return game.env, game.play(TIC_TAC_TOE_OPENING)
  return env, env.init(jax.random.PRNGKey(0))


def _exact_value(name: str, env, state) -> int:
  """The exact value of one unbatched state for its player to move."""
  if name == "nim":
    return solvers.nim_value(tuple(int(h) for h in np.asarray(state.heaps)))
  if name == "dag":
    return int(solvers.dag_values(env)[int(state.layer), int(state.index)])
  return solvers.tic_tac_toe_values(state)[0]


def _root_action_values(name: str, env, state) -> dict[int, int]:
  if name == "nim":
    return solvers.nim_action_values(NIM_HEAPS, env.max_heap)
  if name == "dag":
    return env.exact_action_values(0, 0)
  return solvers.tic_tac_toe_values(state)[1]


@functools.cache
def _search(name: str, policy: str, width: int | None):
  """`(PolicyOutput, env, root states)` of `BATCH` solver searches of one position
  (one search key: the games draw their own streams from it)."""
  env, start = _game_and_start(name)
  game = make_game(env, evaluators.rollout_evaluator(env))
  options = {"c": 1.41} if policy == "uct" else {}
  if policy == "muzero":
    options["dirichlet_fraction"] = 0.0

  @jax.jit
  def run(key):
    state = jax.tree_util.tree_map(lambda leaf: jnp.stack([leaf] * BATCH), start)
    return state, search_game(
      registry.POLICIES[policy],
      game,
      state,
      SIMULATIONS,
      key,
      solver=True,
      max_children=width,
      **options,
    )

  state, out = jax.block_until_ready(run(jax.random.PRNGKey(7)))
  return out, env, state


def _one(tree, *index):
  return jax.tree_util.tree_map(lambda leaf: leaf[index], tree)


@pytest.mark.parametrize("width", WIDTHS, ids=str)
@pytest.mark.parametrize("policy", ["muzero", "gumbel", "uct"])
@pytest.mark.parametrize("name", ["nim", "tic_tac_toe", "dag"])
@pytest.mark.quick_variants("nim-muzero-2")
def test_every_proof_is_exact_under_every_width(name, policy, width):
  out, env, state = _search(name, policy, width)
  graph = out.search_graph
  proven = np.asarray(graph.node_proven & ~graph.node_terminal)
  values = np.asarray(graph.proven_values)
  checked = 0
  for game, node in zip(*np.nonzero(proven)):
    exact = _exact_value(name, env, _one(graph.embeddings, game, node))
    assert values[game, node] == exact, (game, node, values[game, node], exact)
    checked += 1
  root_state = _one(state, 0)  # every game searches the same position
  action_values = _root_action_values(name, env, root_state)
  best = max(action_values.values())
  for game in range(BATCH):
    if bool(graph.node_proven[game, 0]):
      assert values[game, 0] == best
      assert action_values[int(out.action[game])] == best, (game, int(out.action[game]))
  if width is None or width >= 16:
    assert checked > 0, "the control proves nothing: the test would check nothing"


def test_check_graph_reads_the_solver_stops_from_the_graph():
  """A tree-mode solver search passes `check_graph` with its defaults (playouts that
  stop at a proven child count the edge without entering it; issue 60, defect 5),
  and an unproven child with fewer visits than its edge still fails."""
  env, start = _game_and_start("tic_tac_toe")
  game = make_game(env, evaluators.rollout_evaluator(env))

  @jax.jit
  def run(key):
    state = jax.tree_util.tree_map(lambda leaf: jnp.stack([leaf] * BATCH), start)
    return search_game(
      registry.POLICIES["muzero"], game, state, 100, key, solver=True, transpositions=False
    )

  graph = run(jax.random.PRNGKey(0)).search_graph
  proven = np.asarray(graph.node_proven & ~graph.node_terminal)
  assert proven[:, 1:].any(), "nothing proven below the root: the case checks nothing"
  testing.check_graph(graph, 100, tree_mode=True)

  children = np.asarray(graph.children_index[0, 0])
  unproven = [a for a, c in enumerate(children) if c > 0 and not proven[0, c]]
  action = unproven[0]
  broken = graph.replace(
    edge_visits=graph.edge_visits.at[0, 0, action].add(1),
    node_visits=graph.node_visits.at[0, 0].add(1),
  )
  with pytest.raises(AssertionError, match="N\\(child\\) must equal"):
    testing.check_graph(broken, None, tree_mode=True, check_values=False)
