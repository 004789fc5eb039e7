"""Chance nodes on the graph (`stochastic_muzero_policy`): mctx's own bandit check,
tree mode equal to mctx on a toy game, states and afterstates shared but never
merged with each other, reuse by action then outcome, parallel playouts, and bad
input named."""

import functools

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest

from mcgs_jax._src import reuse
from mcgs_jax._src.stochastic import stochastic_muzero_policy
from mcgs_jax._src.types import (
  ChanceRecurrentFnOutput,
  DecisionRecurrentFnOutput,
  RecurrentFnOutput,
  RootFnOutput,
  StochasticGraph,
)
from mcgs_jax.testing import check_graph

KEY = jax.random.PRNGKey(0)

# A toy two-player game with chance. State and afterstate are both {"total", "steps"}:
# action a moves the total by a // 2 (actions 0 and 1 reach the same afterstate), then
# outcome c moves it by c // 2 (outcomes 0 and 1 reach the same state), modulo 7.
# Action 0 from a state gives an afterstate with the state's very values: only the
# node-type lane of the key keeps them apart.
MODULUS, NUM_ACTIONS, NUM_OUTCOMES, HORIZON = 7, 4, 3, 4


def toy_root(batch_size):
  total = jnp.arange(batch_size, dtype=jnp.int32) % MODULUS
  steps = jnp.zeros((batch_size,), jnp.int32)
  logits, value = _toy_evaluation(total, steps)
  return RootFnOutput(prior_logits=logits, value=value, embedding={"total": total, "steps": steps})


def _toy_evaluation(total, steps):
  angle = total.astype(jnp.float32) * 1.3 + steps.astype(jnp.float32) * 0.7
  logits = jnp.sin(angle[:, None] * (1.0 + jnp.arange(NUM_ACTIONS)))
  return logits, 0.5 * jnp.cos(angle)


def toy_decision_fn(params, rng_key, action, state, *, move_reward=False):
  del params, rng_key
  total = (state["total"] + action // 2) % MODULUS
  angle = total.astype(jnp.float32) + 0.3 * state["steps"].astype(jnp.float32)
  chance_logits = jnp.cos(angle[:, None] * 0.9 + jnp.arange(NUM_OUTCOMES))
  output = DecisionRecurrentFnOutput(
    chance_logits=chance_logits,
    afterstate_value=0.3 * jnp.sin(angle),
    reward=0.1 * action.astype(jnp.float32) if move_reward else None,
  )
  return output, {"total": total, "steps": state["steps"]}


def toy_chance_fn(params, rng_key, outcome, afterstate):
  del params, rng_key
  total = (afterstate["total"] + outcome // 2) % MODULUS
  steps = afterstate["steps"] + 1
  done = steps >= HORIZON
  logits, value = _toy_evaluation(total, steps)
  return ChanceRecurrentFnOutput(
    action_logits=logits,
    value=jnp.where(done, 0.0, value),
    reward=jnp.where(done, jnp.sin(total.astype(jnp.float32)), 0.0),
    discount=jnp.where(done, 0.0, -1.0),
  ), {"total": total, "steps": steps}


def to_mctx_root(root):
  return mctx.RootFnOutput(
    prior_logits=root.prior_logits, value=root.value, embedding=root.embedding
  )


@functools.partial(
  jax.jit, static_argnames=("num_simulations", "transpositions", "num_parallel", "capacity")
)
def toy_search(
  key, root, *, num_simulations, transpositions, num_parallel=1, capacity=None, graph=None
):
  return stochastic_muzero_policy(
    None,
    key,
    root,
    toy_decision_fn,
    toy_chance_fn,
    num_simulations,
    transpositions=transpositions,
    num_parallel=num_parallel,
    capacity=capacity,
    graph=graph,
  )


def check_stochastic_graph(
  graph, num_simulations, *, tree_mode, playouts_stop_early=False, continued=False
):
  """`check_graph`, and: levels alternate, decision nodes use only the `A` action
  columns and chance nodes only the `C` outcome columns."""
  check_graph(
    graph,
    num_simulations,
    tree_mode=tree_mode,
    playouts_stop_early=playouts_stop_early,
    continued=continued,
  )
  children = np.asarray(graph.children_index)
  is_decision = np.asarray(graph.embeddings.is_decision_node)
  used = np.arange(children.shape[1])[None] < np.asarray(graph.num_nodes)[:, None]
  assert np.all(is_decision[:, 0] | ~used[:, 0]), "the root must be a decision node"
  for game in range(children.shape[0]):
    for node in np.flatnonzero(used[game]):
      row = children[game, node]
      expanded = np.flatnonzero(row >= 0)
      width = NUM_ACTIONS if is_decision[game, node] else NUM_OUTCOMES
      assert np.all(expanded < width), "an edge outside its node type's columns"
      assert np.all(is_decision[game, row[expanded]] != is_decision[game, node]), (
        "a state linked to a state, or an afterstate to an afterstate"
      )


@pytest.mark.slow
def test_mctx_bandit_check():
  """mctx's `test_stochastic_muzero_policy`: chance mass on one outcome, so the
  stochastic search with 2 S simulations acts as `muzero_policy` with S; and tree
  mode gives `mctx.stochastic_muzero_policy`'s visit counts with rewards too."""
  root = RootFnOutput(
    prior_logits=jnp.array([[-1.0, 0.0, 2.0, 3.0], [0.0, 2.0, 5.0, -4.0]]),
    value=jnp.array([1.0, 0.0]),
    embedding=jnp.zeros([2, 4]),
  )
  invalid_actions = jnp.array([[0.0, 0.0, 0.0, 1.0], [1.0, 0.0, 1.0, 0.0]])

  def bandit(rewards, num_outcomes=5):
    def recurrent_fn(params, rng_key, action, embedding):
      reward = rewards[jnp.arange(action.shape[0]), action]
      return mctx.RecurrentFnOutput(
        reward=reward,
        discount=jnp.zeros_like(reward),
        prior_logits=jnp.zeros_like(rewards),
        value=jnp.zeros_like(reward),
      ), embedding

    def decision_fn(params, rng_key, action, embedding):
      logits = jnp.full([action.shape[0], num_outcomes], -jnp.inf).at[:, 0].set(1.0)
      return DecisionRecurrentFnOutput(
        chance_logits=logits, afterstate_value=jnp.zeros(action.shape)
      ), (action, embedding)

    def chance_fn(params, rng_key, outcome, afterstate):
      action, embedding = afterstate
      reward = rewards[jnp.arange(action.shape[0]), action]
      return ChanceRecurrentFnOutput(
        action_logits=jnp.zeros_like(rewards),
        value=jnp.zeros_like(reward),
        discount=jnp.zeros_like(reward),
        reward=reward,
      ), embedding

    return recurrent_fn, decision_fn, chance_fn

  num_simulations = 10
  recurrent_fn, decision_fn, chance_fn = bandit(jnp.zeros((2, 4)))
  # Each search jitted: one program instead of one per operation.
  theirs = jax.jit(
    lambda key: mctx.muzero_policy(
      (),
      key,
      to_mctx_root(root),
      recurrent_fn,
      num_simulations,
      invalid_actions=invalid_actions,
      dirichlet_fraction=0.0,
    )
  )(KEY)
  for transpositions in (False, True):
    ours = jax.jit(
      lambda key, transpositions=transpositions: stochastic_muzero_policy(
        (),
        key,
        root,
        decision_fn,
        chance_fn,
        2 * num_simulations,
        invalid_actions=invalid_actions,
        dirichlet_fraction=0.0,
        transpositions=transpositions,
      )
    )(KEY)
    np.testing.assert_array_equal(ours.action, theirs.action)
    np.testing.assert_allclose(ours.action_weights, theirs.action_weights)

  rewards = jnp.array([[0.3, 0.5, -0.2, 0.9], [0.1, 0.7, 0.2, -0.5]])
  _, decision_fn, chance_fn = bandit(rewards)
  theirs = jax.jit(
    lambda key: mctx.stochastic_muzero_policy(
      (), key, to_mctx_root(root), decision_fn, chance_fn, 20, invalid_actions=invalid_actions
    )
  )(KEY)
  ours = jax.jit(
    lambda key: stochastic_muzero_policy(
      (),
      key,
      root,
      decision_fn,
      chance_fn,
      20,
      invalid_actions=invalid_actions,
      transpositions=False,
    )
  )(KEY)
  np.testing.assert_array_equal(
    ours.search_graph.summary().visit_counts, theirs.search_tree.summary().visit_counts
  )
  np.testing.assert_allclose(
    ours.search_graph.summary().value, theirs.search_tree.summary().value, atol=1e-5
  )
  np.testing.assert_array_equal(ours.action, theirs.action)


def test_tree_mode_matches_mctx_on_toy_game():
  batch_size, num_simulations = 14, 48
  root = toy_root(batch_size)
  ours = toy_search(KEY, root, num_simulations=num_simulations, transpositions=False)
  theirs = jax.jit(
    lambda key: mctx.stochastic_muzero_policy(
      None, key, to_mctx_root(root), toy_decision_fn, toy_chance_fn, num_simulations
    )
  )(KEY)
  our_summary, their_summary = ours.search_graph.summary(), theirs.search_tree.summary()
  same = np.all(
    np.asarray(our_summary.visit_counts) == np.asarray(their_summary.visit_counts), axis=-1
  )
  assert same.sum() == batch_size, f"{same.sum()}/{batch_size} roots as mctx's"
  np.testing.assert_allclose(our_summary.value, their_summary.value, atol=1e-5)
  np.testing.assert_array_equal(ours.action, theirs.action)
  np.testing.assert_allclose(ours.action_weights, theirs.action_weights, atol=1e-6)
  assert our_summary.visit_counts.shape == (batch_size, NUM_ACTIONS)
  assert isinstance(ours.search_graph, StochasticGraph)
  check_stochastic_graph(ours.search_graph, num_simulations, tree_mode=True)


def test_graph_shares_afterstates_and_states_but_never_mixes_them():
  batch_size, num_simulations = 7, 64
  out = toy_search(KEY, toy_root(batch_size), num_simulations=num_simulations, transpositions=True)
  graph = out.search_graph
  check_stochastic_graph(graph, num_simulations, tree_mode=False)
  children = np.asarray(graph.children_index)
  is_decision = np.asarray(graph.embeddings.is_decision_node)
  # Actions 0 and 1 reach one afterstate: one chance node under the root.
  both = (children[:, 0, 0] >= 0) & (children[:, 0, 1] >= 0)
  assert both.any()
  np.testing.assert_array_equal(children[both, 0, 0], children[both, 0, 1])
  # Outcomes 0 and 1 reach one state: one decision node under each chance node.
  chance_rows = children[~is_decision]
  linked = (chance_rows[:, 0] >= 0) & (chance_rows[:, 1] >= 0)
  assert linked.any()
  np.testing.assert_array_equal(chance_rows[linked, 0], chance_rows[linked, 1])
  assert np.all(np.asarray(graph.transposition_hits) > 0)
  # Action 0's afterstate equals the root state bit for bit; it is a new chance node.
  assert np.all(children[:, 0, 0] != 0)


def test_move_reward_on_the_decision_edge():
  """`DecisionRecurrentFnOutput.reward` lands on the state-to-afterstate edge."""
  decision_fn = functools.partial(toy_decision_fn, move_reward=True)
  out = jax.jit(
    lambda key: stochastic_muzero_policy(None, key, toy_root(3), decision_fn, toy_chance_fn, 24)
  )(KEY)
  graph = out.search_graph
  rewards = np.asarray(graph.edge_rewards[:, 0, :NUM_ACTIONS])
  expanded = np.asarray(graph.children_index[:, 0, :NUM_ACTIONS]) >= 0
  np.testing.assert_allclose(
    rewards[expanded], np.broadcast_to(0.1 * np.arange(NUM_ACTIONS), rewards.shape)[expanded]
  )
  np.testing.assert_allclose(np.asarray(graph.edge_discounts[:, 0, :NUM_ACTIONS])[expanded], 1.0)
  check_stochastic_graph(graph, 24, tree_mode=False)


@pytest.mark.slow
def test_reuse_by_action_then_outcome():
  batch_size, num_simulations, capacity = 5, 40, 120
  root = toy_root(batch_size)
  first = toy_search(
    KEY, root, num_simulations=num_simulations, transpositions=True, capacity=capacity
  )
  action = jnp.asarray(first.action)
  # The outcome that happened: the most visited expanded outcome of each chance node.
  graph = first.search_graph
  chance_node = graph.children_index[jnp.arange(batch_size), 0, action]
  outcome = jnp.argmax(
    graph.edge_visits[jnp.arange(batch_size), chance_node, :NUM_OUTCOMES], axis=-1
  ).astype(jnp.int32)
  kept_visits = graph.node_visits[
    jnp.arange(batch_size), graph.children_index[jnp.arange(batch_size), chance_node, outcome]
  ]
  rerooted = reuse.reroot(reuse.reroot(graph, action), outcome)
  assert isinstance(rerooted, StochasticGraph)
  decision_output, afterstate = toy_decision_fn(None, None, action, root.embedding)
  chance_output, state = toy_chance_fn(None, None, outcome, afterstate)
  del decision_output
  next_root = RootFnOutput(
    prior_logits=chance_output.action_logits, value=chance_output.value, embedding=state
  )
  second = toy_search(
    KEY,
    next_root,
    num_simulations=num_simulations,
    transpositions=True,
    capacity=capacity,
    graph=rerooted,
  )
  check_stochastic_graph(second.search_graph, None, tree_mode=False, continued=True)
  root_visits = np.asarray(second.search_graph.node_visits[:, 0])
  expected = np.asarray(kept_visits) + num_simulations
  kept = np.asarray(rerooted.num_nodes) > 0
  assert kept.any()
  np.testing.assert_array_equal(root_visits[kept], expected[kept])

  # Rerooted by the action only, the root is a chance node: those games start afresh.
  halfway = reuse.reroot(graph, action)
  restarted = toy_search(
    KEY,
    next_root,
    num_simulations=num_simulations,
    transpositions=True,
    capacity=capacity,
    graph=halfway,
  )
  np.testing.assert_array_equal(restarted.search_graph.node_visits[:, 0], num_simulations + 1)
  check_stochastic_graph(restarted.search_graph, num_simulations, tree_mode=False)


@pytest.mark.slow
def test_parallel_playouts():
  num_simulations = 32
  out = toy_search(
    KEY, toy_root(4), num_simulations=num_simulations, transpositions=True, num_parallel=4
  )
  check_stochastic_graph(out.search_graph, num_simulations, tree_mode=False)
  np.testing.assert_allclose(np.sum(np.asarray(out.action_weights), axis=-1), 1.0, rtol=1e-6)


def test_solver_is_refused():
  with pytest.raises(ValueError, match="solver=True is not supported"):
    stochastic_muzero_policy(None, KEY, toy_root(2), toy_decision_fn, toy_chance_fn, 4, solver=True)


def _replace_output(fn, **fields):
  def wrapped(params, rng_key, action, embedding):
    output, new_embedding = fn(params, rng_key, action, embedding)
    return output.replace(
      **{name: make(getattr(output, name)) for name, make in fields.items()}
    ), new_embedding

  return wrapped


def _replace_embedding(fn, make):
  def wrapped(params, rng_key, action, embedding):
    output, new_embedding = fn(params, rng_key, action, embedding)
    return output, make(new_embedding)

  return wrapped


@pytest.mark.parametrize(
  "decision_fn, chance_fn, kwargs, error, message",
  [
    (
      _replace_output(toy_decision_fn, chance_logits=lambda x: x[:, 0]),
      toy_chance_fn,
      {},
      ValueError,
      r"chance_logits of shape \(2,\); expected \[B, C\]",
    ),
    (
      _replace_output(toy_decision_fn, chance_logits=lambda x: x[:, :0]),
      toy_chance_fn,
      {},
      ValueError,
      "zero chance outcomes",
    ),
    (
      _replace_output(toy_decision_fn, chance_logits=lambda x: x.astype(jnp.int32)),
      toy_chance_fn,
      {},
      TypeError,
      "chance_logits of dtype int32",
    ),
    (
      _replace_output(toy_decision_fn, afterstate_value=lambda x: x[:, None]),
      toy_chance_fn,
      {},
      ValueError,
      "afterstate_value of shape",
    ),
    (
      _replace_output(toy_decision_fn, reward=lambda x: jnp.zeros((2, 2))),
      toy_chance_fn,
      {},
      ValueError,
      "decision_recurrent_fn returned reward of shape",
    ),
    (
      toy_decision_fn,
      _replace_output(toy_chance_fn, action_logits=lambda x: x[:, :2]),
      {},
      ValueError,
      r"chance_recurrent_fn returned action_logits of shape \(2, 2\)",
    ),
    (
      toy_decision_fn,
      _replace_output(toy_chance_fn, discount=lambda x: x[:1]),
      {},
      ValueError,
      "chance_recurrent_fn returned discount of shape",
    ),
    (
      toy_decision_fn,
      _replace_embedding(toy_chance_fn, lambda e: e["total"]),
      {},
      ValueError,
      "chance_recurrent_fn's state embedding has pytree structure",
    ),
    (
      toy_decision_fn,
      toy_chance_fn,
      dict(afterstate_hash_fn=lambda after: jnp.zeros((2, 2), jnp.int32)),
      TypeError,
      "afterstate_hash_fn must return uint32",
    ),
    (
      toy_decision_fn,
      toy_chance_fn,
      dict(afterstate_hash_fn=lambda after: jnp.zeros((2,), jnp.uint32)),
      ValueError,
      r"afterstate_hash_fn must return uint32 \[B, L\]",
    ),
    (
      toy_decision_fn,
      toy_chance_fn,
      dict(hash_fn=lambda state: jnp.zeros((2, 2), jnp.float32)),
      TypeError,
      "hash_fn must return uint32",
    ),
    (
      toy_decision_fn,
      toy_chance_fn,
      dict(afterstate_hash_fn=3),
      TypeError,
      "afterstate_hash_fn must be callable",
    ),
    (None, toy_chance_fn, {}, TypeError, "decision_recurrent_fn must be callable"),
    (
      toy_decision_fn,
      toy_chance_fn,
      dict(transposition=False),
      TypeError,
      "unexpected keyword 'transposition'",
    ),
    (
      toy_decision_fn,
      toy_chance_fn,
      dict(num_simulations=0),
      ValueError,
      "num_simulations must be >= 1",
    ),
    (
      toy_decision_fn,
      toy_chance_fn,
      dict(invalid_actions=jnp.zeros((2, 3), bool)),
      ValueError,
      r"invalid_actions must have shape \[B, A\] = \(2, 4\)",
    ),
  ],
)
def test_bad_input_names_the_argument(decision_fn, chance_fn, kwargs, error, message):
  kwargs = dict(kwargs)
  num_simulations = kwargs.pop("num_simulations", 4)
  with pytest.raises(error, match=message):
    jax.jit(
      lambda key: stochastic_muzero_policy(
        None, key, toy_root(2), decision_fn, chance_fn, num_simulations, **kwargs
      )
    )(KEY)


def test_afterstate_never_merges_with_a_state_of_the_same_bits():
  """Without the node-type lane, action 0's afterstate would be found as the root."""
  graph = toy_search(KEY, toy_root(2), num_simulations=8, transpositions=True).search_graph
  keys = np.asarray(graph.node_keys)
  is_decision = np.asarray(graph.embeddings.is_decision_node)
  used = np.arange(keys.shape[1])[None] < np.asarray(graph.num_nodes)[:, None]
  np.testing.assert_array_equal(keys[..., -1][used], np.where(is_decision, 0, 1)[used])


def test_plain_recurrent_output_is_rejected_as_decision_output():
  def wrong(params, rng_key, action, state):
    logits, value = _toy_evaluation(state["total"], state["steps"])
    return RecurrentFnOutput(reward=value, discount=value, prior_logits=logits, value=value), state

  with pytest.raises(TypeError, match="DecisionRecurrentFnOutput"):
    stochastic_muzero_policy(None, KEY, toy_root(2), wrong, toy_chance_fn, 4)


@pytest.mark.parametrize("bad_logit", [-jnp.inf, jnp.nan])
@pytest.mark.quick_variants("nan")
def test_chance_logits_with_no_possible_outcome_are_counted(bad_logit):
  """A decision whose chance logits allow no outcome (all -inf, or NaN) cannot be
  evaluated: each such expansion is counted in `non_finite_evaluations` and adds no
  node, as a non-finite `recurrent_fn` output in a deterministic search."""
  impossible = _replace_output(toy_decision_fn, chance_logits=lambda x: jnp.full_like(x, bad_logit))
  out = jax.jit(
    lambda key: stochastic_muzero_policy(None, key, toy_root(2), impossible, toy_chance_fn, 12)
  )(jax.random.PRNGKey(0))
  np.testing.assert_array_equal(out.search_graph.non_finite_evaluations, [12, 12])
  np.testing.assert_array_equal(out.search_graph.num_nodes, [1, 1])
  np.testing.assert_array_equal(out.action_weights, np.zeros((2, 4)))
