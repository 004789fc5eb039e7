"""With the solver a policy never plays a root move it has proven lost while another
valid move is not proven lost (CrazyAra's MCTS-solver leaves them out), whatever
their visits (issue 50, item 14); `action_weights` still count those visits
(`PolicyOutput`). Checked on Nim against the exact solver, and through `mcgs-jax
search`, which reported the most visited move.
"""

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax._src import proofs, readout
from mcgs_jax.apps import cli, registry
from mcgs_jax.games import evaluators, search_game, solvers
from mcgs_jax.games.adapter import make_game
from mcgs_jax.games.nim import Nim

SEEDS = 12


@functools.cache
def nim_search(heaps: tuple[int, ...], policy: str, simulations: int, temperature: float):
  """`(PolicyOutput, env)` of `SEEDS` solver searches of one Nim position."""
  env = Nim(heaps)
  game = make_game(env, evaluators.rollout_evaluator(env))
  options = dict(c=1.41) if policy == "uct" else dict(temperature=temperature)
  if policy == "muzero":
    options["dirichlet_fraction"] = 0.0
  rule = registry.POLICIES[policy]

  @jax.jit
  def search(key):
    state = jax.vmap(lambda k: env.init_from_heaps(jnp.array(heaps)))(jax.random.split(key, SEEDS))
    root_key, search_key = jax.random.split(key)
    return search_game(
      rule,
      game,
      state,
      simulations,
      search_key,
      root_key=root_key,
      solver=True,
      capacity=simulations + 1,
      **options,
    )

  return jax.block_until_ready(search(jax.random.PRNGKey(0))), env


def _root_proofs(out):
  """`(proven, value)` `[B, A]` of the root's edges (numpy)."""
  proven, value = jax.vmap(proofs.proven_edges, in_axes=(0, None))(out.search_graph, 0)
  return np.asarray(proven), np.asarray(value)


@pytest.mark.parametrize(
  "policy, temperature", [("uct", 0.0), ("muzero", 0.0), ("muzero", 1.0)], ids=str
)
@pytest.mark.slow
def test_a_proven_loss_is_played_only_when_every_move_is_one(policy, temperature):
  most_visited_lost = 0
  for heaps in ((3, 4, 5), (2, 3, 4), (1, 2, 3)):
    out, env = nim_search(heaps, policy, 400, temperature)
    exact = solvers.nim_action_values(heaps, env.max_heap)
    legal = np.zeros(out.action_weights.shape[-1], bool)
    legal[list(exact)] = True
    proven, value = _root_proofs(out)
    weights, actions = np.asarray(out.action_weights), np.asarray(out.action)
    for b, action in enumerate(actions):
      lost = proven[b] & (value[b] == -1.0) & legal
      assert all(value[b, a] == exact[a] for a in np.flatnonzero(proven[b] & legal))
      if lost[action]:  # then every move is proven lost (and so, lost)
        assert np.all(lost[legal]), (heaps, b, action)
      most_visited_lost += bool(lost[np.argmax(weights[b])] and not np.all(lost[legal]))
      # The weights count the visits of the proven losses too.
      assert np.isclose(weights[b][legal].sum(), 1.0)
  assert most_visited_lost > 0, "no search had a proven loss as its most visited move"


@pytest.mark.slow
def test_with_no_visit_left_the_fallback_is_no_proven_loss():
  """Where no edge the solver leaves has a visit, the policy falls back on the
  highest prior: made here a proven loss's, which the fallback used to play."""
  out, _ = nim_search((3, 4, 5), "uct", 400, 0.0)
  graph, options = out.search_graph, mg.GraphOptions(solver=True)
  proven, value = _root_proofs(out)
  lost = proven & (value == -1.0)
  decided, _ = proofs.best_proven_action(graph)
  games = np.flatnonzero(lost.any(-1) & ~np.asarray(decided))
  assert games.size > 0
  excluded = readout.excluded_root_edges(graph, options)
  logits = graph.children_prior_logits[:, 0]
  logits = logits.at[np.arange(SEEDS), lost.argmax(-1)].set(10.0)  # a proven loss first
  graph = graph.replace(
    edge_visits=graph.edge_visits.at[:, 0].set(jnp.where(excluded, graph.edge_visits[:, 0], 0)),
    children_prior_logits=graph.children_prior_logits.at[:, 0].set(logits),
  )
  for played in (
    readout.most_visited(graph, options=options),
    readout.sample_from_visits(jax.random.PRNGKey(0), graph, options=options, temperature=1.0),
  ):
    action = np.asarray(played.action)
    assert not np.any(lost[games, action[games]])


@pytest.mark.slow
def test_the_search_command_reports_the_move_the_policy_plays(capsys):
  argv = ["search", "--game", "nim:3,4,5", "--policy", "uct", "--evaluator", "rollout"]
  assert cli.main([*argv, "--simulations", "400", "--seed", "0", "--solver", "--json"]) == 0
  report = json.loads(capsys.readouterr().out)
  rows = {row["action"]: row for row in report["actions"]}
  assert rows[report["action"]].get("proven_value") != -1.0
  most_visited = max(report["actions"], key=lambda row: row["visits"])
  assert most_visited.get("proven_value") == -1.0  # what the command used to report
