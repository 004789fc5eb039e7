"""No policy plays, weighs or spends playouts on an action the root cannot take: with
the solver excluding the edges Gumbel's schedule asks for, at a high temperature, and
on a continued graph whose root holds visits of an edge now invalid."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax.testing import commuting_game

ROOT, RECURRENT = commuting_game()


@pytest.mark.slow
def test_gumbel_with_the_solver_never_visits_or_plays_an_illegal_action():
  """Once the solver proves the actions Sequential Halving considers, the schedule's
  next step has no candidate left: the root rule must then pick among the other valid
  actions (it used to pick action 0, even where that square was taken), and the
  interior rule must not prefer an unvisited illegal edge (lag 0) over legal edges
  visited beyond their share."""
  pytest.importorskip("pgx")
  from mcgs_jax.apps.benchmark.timing import random_positions
  from mcgs_jax.games import make_game, rollout_evaluator

  base = make_game("tic_tac_toe")
  game = make_game("tic_tac_toe", rollout_evaluator(base.env, num_rollouts=4))
  key = jax.random.PRNGKey(3)
  state = random_positions(game, key, 48, 7)
  invalid = game.invalid_actions(state)

  @jax.jit
  def run(key):
    root = game.root(None, key, state)
    return mg.gumbel_muzero_policy(
      None,
      key,
      root,
      game.recurrent_fn,
      300,
      invalid_actions=invalid,
      hash_fn=game.hash_fn,
      solver=True,
    )

  out = run(jax.random.fold_in(key, 1))
  graph = jax.device_get(out.search_graph)
  invalid = np.asarray(invalid)
  root_visits = np.asarray(graph.edge_visits)[:, 0]
  assert not np.any(root_visits[invalid]), "playouts spent on invalid root actions"
  assert not np.any(invalid[np.arange(len(invalid)), np.asarray(out.action)])
  prior = np.asarray(jax.nn.softmax(graph.children_prior_logits, axis=-1))
  in_use = np.arange(graph.children_index.shape[1])[None, :] < np.asarray(graph.num_nodes)[:, None]
  illegal_edges = (prior == 0) & in_use[..., None]
  assert not np.any((np.asarray(graph.children_index) >= 0) & illegal_edges)
  assert not np.any(np.asarray(graph.edge_visits)[illegal_edges])


def test_a_high_temperature_never_samples_an_invalid_action():
  """A zero visit count is the logit log(tiny) ~ -87: divided by a temperature of 100
  it comes within a few nats of the visited actions. Invalid actions stay out."""
  invalid = jnp.array([[False, True, True]] * 8)
  run = jax.jit(
    lambda key: mg.muzero_policy(
      None, key, ROOT(8), RECURRENT, 8, invalid_actions=invalid, temperature=100.0
    )
  )
  actions = np.concatenate([np.asarray(run(jax.random.PRNGKey(seed)).action) for seed in range(8)])
  assert np.all(actions == 0)


# muzero: the greedy variant's search and weights, sampled from instead of argmaxed
@pytest.mark.parametrize("policy", ["muzero", "muzero_greedy", "uct"])
@pytest.mark.quick_variants("muzero_greedy")
def test_a_continued_graph_never_weighs_or_plays_an_edge_invalid_at_its_root(policy):
  """The same root searched again with its most visited action now invalid (a
  learned model does not mask interior actions, so a rerooted graph can hold visits
  of an edge the real game forbids): that edge gets weight 0 and is not played."""
  batch_size = 4
  root = ROOT(batch_size)
  key = jax.random.PRNGKey(0)

  def run(invalid_actions, graph=None):
    if policy == "uct":
      return mg.uct_policy(
        None, key, root, RECURRENT, 16, invalid_actions=invalid_actions, graph=graph
      )
    temperature = 0.0 if policy == "muzero_greedy" else 1.0
    return mg.muzero_policy(
      None,
      key,
      root,
      RECURRENT,
      16,
      invalid_actions=invalid_actions,
      graph=graph,
      temperature=temperature,
    )

  first = jax.jit(run)(jnp.zeros((batch_size, 3), bool))
  favourite = np.argmax(np.asarray(first.action_weights), axis=-1)
  now_invalid = jax.nn.one_hot(favourite, 3, dtype=bool)
  second = jax.jit(run)(now_invalid, first.search_graph)
  rows = np.arange(batch_size)
  assert np.asarray(second.search_graph.edge_visits)[rows, 0, favourite].min() > 0
  weights = np.asarray(second.action_weights)
  assert np.all(weights[rows, favourite] == 0)
  np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-6)
  assert np.all(np.asarray(second.action) != favourite)
