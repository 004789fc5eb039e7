"""Self-play options of `mcgs_jax.apps.train` beyond the plain search: KataGo's playout
cap randomization ("Accelerating Self-Play Learning in Go", Wu 2019), the
MCTS-solver, and Gumbel MuZero continuing the kept graph."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax._src.forced_playouts import forced_root_action_selection
from mcgs_jax.apps import registry, train
from mcgs_jax.games import networks, search_game
from mcgs_jax.testing import check_graph, commuting_game

pytest.importorskip("flax")

SMALL = dict(num_games=8, num_simulations=8, hidden=(16,), progress=False, eval_games=0)
CAPPED = dict(SMALL, full_search_probability=0.5, fast_simulations=2)


@pytest.fixture(scope="module")
def network_game():
  board = registry.game_from_spec("tic_tac_toe")
  apply_fn, params = networks.init_network(board.env, jax.random.PRNGKey(0), hidden=(16,))
  evaluator = registry.make_evaluator("network", board.env, apply_fn=apply_fn)
  return dataclasses.replace(board, evaluator=evaluator), apply_fn, params


def _self_play(network_game, **settings):
  game, _, params = network_game
  config = train.Config.quick(**settings)
  return jax.device_get(train.make_self_play(game, config)(params, jax.random.PRNGKey(1)))


@pytest.mark.slow
def test_playout_cap_searches_fast_moves_with_fewer_simulations_and_drops_their_policy(
  network_game,
):
  trajectory = _self_play(network_game, **CAPPED)
  valid = trajectory["valid"]
  weight = trajectory["policy_weight"][valid]
  visits = trajectory["new_root_visits"][valid]
  assert set(np.unique(weight)) == {0.0, 1.0}, "expected full and fast moves"
  np.testing.assert_array_equal(visits[weight == 1.0], 8)  # the full search
  np.testing.assert_array_equal(visits[weight == 0.0], 2)  # the fast one
  assert np.all(trajectory["policy_weight"][~valid] == 0.0)
  # One coin per move for the whole batch.
  for row, alive in zip(trajectory["policy_weight"], valid, strict=True):
    assert len(set(row[alive].tolist())) <= 1
  buffer = train.ReplayBuffer(1000)
  count = buffer.add(trajectory)
  assert count == valid.sum()
  np.testing.assert_array_equal(buffer.data["policy_weight"][:count], weight)


@pytest.mark.slow
def test_without_playout_cap_every_move_is_a_full_search(network_game):
  trajectory = _self_play(network_game, **SMALL)
  assert "policy_weight" not in trajectory
  np.testing.assert_array_equal(trajectory["new_root_visits"][trajectory["valid"]], 8)
  buffer = train.ReplayBuffer(1000)
  buffer.add(trajectory)
  assert set(buffer.data) == {"observation", "policy", "value"}


@pytest.mark.slow
def test_a_fast_position_is_absent_from_the_policy_loss_but_not_the_value_loss(network_game):
  _, apply_fn, params = network_game
  rng = np.random.default_rng(0)
  batch = dict(
    observation=rng.random((6, 3, 3, 2)).astype(np.float32) > 0.5,
    policy=rng.dirichlet(np.ones(9), 6).astype(np.float32),
    value=rng.choice([-1.0, 0.0, 1.0], 6).astype(np.float32),
    policy_weight=np.array([1, 0, 1, 0, 0, 1], np.float32),
  )
  fast = batch["policy_weight"] == 0
  grad = jax.grad(lambda p, b: train.loss_fn(p, apply_fn, b, 1e-4)[0])
  other_policy = dict(
    batch, policy=np.where(fast[:, None], np.eye(9, dtype=np.float32)[0], batch["policy"])
  )
  for a, b in zip(
    jax.tree_util.tree_leaves(grad(params, batch)),
    jax.tree_util.tree_leaves(grad(params, other_policy)),
    strict=True,
  ):
    np.testing.assert_array_equal(a, b)
  _, (policy_loss, value_loss) = train.loss_fn(params, apply_fn, batch, 0.0)
  full_only = {name: value[~fast] for name, value in batch.items() if name != "policy_weight"}
  _, (full_policy_loss, _) = train.loss_fn(params, apply_fn, full_only, 0.0)
  np.testing.assert_allclose(policy_loss, full_policy_loss, rtol=1e-6)
  other_value = dict(batch, value=np.where(fast, -batch["value"] + 0.5, batch["value"]))
  assert train.loss_fn(params, apply_fn, other_value, 0.0)[1][1] != value_loss


def _late_positions(game):
  """8 tic-tac-toe games 7 plies in, none over (X 4, 8, 1, 3; O 0, 2, 7): every
  search reaches terminal states there."""
  state = game.init(jax.random.PRNGKey(3), 8)
  for action in (4, 0, 8, 2, 1, 7, 3):
    state = game.step(state, jnp.full((8,), action, jnp.int32))
  assert not np.any(state.terminated)
  return state


@pytest.mark.parametrize("solver", [False, True])
@pytest.mark.quick_variants("True")
def test_the_solver_reaches_self_play_searches(network_game, solver):
  game, _, params = network_game
  state = _late_positions(game)
  config = train.Config.quick(**SMALL, solver=solver, reuse=False)
  search = jax.jit(train.search_policy(game, config))
  out = search(
    params,
    jax.random.PRNGKey(2),
    game.root(params, jax.random.PRNGKey(2), state),
    game.invalid_actions(state),
    None,
  )
  proven = np.asarray(out.search_graph.node_proven)
  assert proven.any() == solver


@pytest.mark.slow
def test_gumbel_self_play_with_reuse_keeps_the_graph_invariants(network_game):
  game, _, params = network_game
  config = train.Config.quick(**SMALL, policy="gumbel")
  assert config.reuse and config.transpositions
  search = jax.jit(train.search_policy(game, config))
  state = game.init(jax.random.PRNGKey(4), 8)
  graph = None
  for move in range(3):
    key = jax.random.PRNGKey(10 + move)
    out = search(params, key, game.root(params, key, state), game.invalid_actions(state), graph)
    check_graph(
      out.search_graph,
      None if graph is not None else 8,
      tree_mode=False,
      continued=graph is not None,
    )
    weights = np.asarray(out.action_weights)
    assert np.all(np.isfinite(weights)) and np.allclose(weights.sum(-1), 1.0, atol=1e-5)
    state = game.step(state, out.action)
    graph = mg.reroot(out.search_graph, out.action)
    check_graph(graph, None, tree_mode=False, continued=True)
  assert int(np.min(graph.node_visits[:, 0])) > 0, "the reused graphs carried no visits"


@pytest.mark.parametrize(
  "settings, message",
  [
    (dict(full_search_probability=0.0), "full_search_probability must be a finite number > 0"),
    (dict(full_search_probability=1.5), "full_search_probability must be in (0, 1]"),
    (dict(full_search_probability=float("nan")), "full_search_probability must be a finite"),
    (dict(fast_simulations=8), "fast_simulations must be an integer from 1 to 7"),
    (dict(fast_simulations=0), "fast_simulations must be an integer from 1 to 7"),
    (
      dict(engine="mctx", transpositions=False, reuse=False, solver=True),
      "solver must be False with engine 'mctx'",
    ),
    (dict(make_room=True, reuse=False), "make_room must be False without reuse"),
    (dict(make_room=True, capacity=8), "make_room must be False with capacity 8"),
    (dict(make_room=1), "make_room must be True or False"),
  ],
)
def test_bad_self_play_options_are_refused_by_name(settings, message):
  with pytest.raises(ValueError) as error:
    train.Config(num_simulations=8, **settings)
  assert str(error.value).startswith(message), str(error.value)


def test_train_command_names_a_bad_playout_cap_flag(capsys):
  assert train.main(["--full-search-probability", "2"]) == 2
  line = capsys.readouterr().err.strip()
  assert line.startswith("mcgs-jax train: error: --full-search-probability: full_search")


def _noised_search(network_game, forced_playouts):
  game, _, params = network_game
  state = game.init(jax.random.PRNGKey(6), 8)
  key = jax.random.PRNGKey(7)
  return jax.jit(
    lambda: search_game(
      mg.muzero_policy,
      game,
      state,
      48,
      key,
      params=params,
      dirichlet_alpha=0.03,  # concentrated noise: some children get tiny priors
      forced_playouts=forced_playouts,
    )
  )()


def _forced_counts(graph, k):
  prior = np.asarray(jax.nn.softmax(graph.children_prior_logits[:, 0]))
  visits = np.asarray(graph.edge_visits[:, 0])
  return visits, np.sqrt(k * prior * visits.sum(-1, keepdims=True))


@pytest.mark.slow
def test_forced_playouts_show_in_the_visit_counts(network_game):
  forced = _noised_search(network_game, 2.0).search_graph
  visits, needed = _forced_counts(forced, 2.0)
  # Each visited child was chosen whenever it fell below its forced count, which
  # grows with the total: at the end none is more than one playout short of it.
  visited = visits > 0
  assert np.all(visits[visited] >= np.floor(needed[visited]) - 1), (visits, needed)
  forced_short = np.sum(visited & (visits < np.floor(needed)))
  plain = _noised_search(network_game, 0.0).search_graph
  visits, needed = _forced_counts(plain, 2.0)
  plain_short = np.sum((visits > 0) & (visits < np.floor(needed)))
  assert forced_short < plain_short, (forced_short, plain_short)


@pytest.mark.slow
def test_forced_playouts_skip_a_child_puct_has_not_tried():
  # KataGo's rule: only a child with a visit is forced. Here the unvisited child 0
  # (prior 0.6) and the once-visited child 1 (prior 0.1) are both below their forced
  # counts; PUCT prefers child 0, the forced rule child 1.
  root_fn, recurrent = commuting_game(num_actions=4, modulus=7, horizon=4)
  graph = mg.muzero_policy(None, jax.random.PRNGKey(0), root_fn(2), recurrent, 8).search_graph
  prior = jnp.log(jnp.array([0.6, 0.1, 0.15, 0.15]))
  graph = graph.replace(
    children_prior_logits=graph.children_prior_logits.at[:, 0].set(prior),
    edge_visits=graph.edge_visits.at[:, 0].set(jnp.array([0, 1, 50, 49])),
    node_visits=graph.node_visits.at[:, 0].set(101),
  )
  keys = jax.random.split(jax.random.PRNGKey(1), 2)
  rule_options = dict(pb_c_init=1.25, pb_c_base=19652.0, solver=False)
  qtransform = mg.qtransform_by_parent_and_siblings
  forced_rule = functools.partial(
    forced_root_action_selection, forced_playouts=2.0, qtransform=qtransform, **rule_options
  )
  puct_rule = functools.partial(mg.muzero_action_selection, qtransform=qtransform, **rule_options)
  roots = jnp.zeros((2,), jnp.int32)
  np.testing.assert_array_equal(jax.vmap(puct_rule, (0, 0, 0, None))(keys, graph, roots, 0), 0)
  np.testing.assert_array_equal(jax.vmap(forced_rule)(keys, graph, roots), 1)


def test_pruning_takes_the_forced_playouts_out_of_the_target(network_game):
  out = _noised_search(network_game, 2.0)
  graph = out.search_graph
  target = np.asarray(mg.prune_forced_playouts(graph, forced_playouts=2.0))
  visits, needed = _forced_counts(graph, 2.0)
  kept = target * visits.max(-1, keepdims=True) / target.max(-1, keepdims=True)
  best = visits.argmax(-1)
  np.testing.assert_allclose(target.sum(-1), 1.0, rtol=1e-6)
  assert np.all(np.abs(kept[np.arange(8), best] - visits[np.arange(8), best]) < 1e-3)
  assert np.all(kept <= visits + 1e-3)
  # At most n_forced taken from a child; one left with a single visit is pruned.
  floor = visits - np.floor(needed)
  assert np.all((kept >= floor - 1e-3) | ((kept == 0) & (floor <= 1)))
  assert np.all((kept == 0) | (kept > 1 - 1e-3))
  assert np.any(kept < visits - 0.5), "nothing was pruned"
  assert not np.allclose(target, np.asarray(out.action_weights))


def test_forced_playouts_are_checked():
  root_fn, recurrent = commuting_game()
  for value, message in ((-1.0, "forced_playouts must be >= 0"), (float("inf"), "must be finite")):
    with pytest.raises(ValueError, match=message):
      mg.muzero_policy(None, jax.random.PRNGKey(0), root_fn(2), recurrent, 4, forced_playouts=value)
  with pytest.raises(ValueError, match="forced_playouts must be a number known at trace time"):
    jax.jit(
      lambda k: mg.muzero_policy(
        None, jax.random.PRNGKey(0), root_fn(2), recurrent, 4, forced_playouts=k
      )
    )(2.0)
  with pytest.raises(ValueError, match="forced_playouts must be 0 with policy 'gumbel'"):
    train.Config(policy="gumbel", forced_playouts=2.0)


@pytest.mark.slow
def test_self_play_with_forced_playouts_trains_on_pruned_targets(network_game):
  trajectory = _self_play(network_game, **dict(SMALL, num_simulations=16), forced_playouts=2.0)
  valid = trajectory["valid"]
  policy = trajectory["policy"][valid]
  np.testing.assert_allclose(policy.sum(-1), 1.0, rtol=1e-5)
  assert np.all(policy[~trajectory["legal"][valid]] == 0)


@pytest.mark.slow
def test_pruning_that_would_leave_no_visit_keeps_them_unpruned():
  # With reuse the target counts only the search's own visits. Where all of them went
  # to a child that pruning empties (here: one visit to a child that is not the most
  # visited), the target is those visits unpruned, not a row of zeros.
  root_fn, recurrent = commuting_game(num_actions=4, modulus=7, horizon=4)
  graph = mg.muzero_policy(None, jax.random.PRNGKey(0), root_fn(2), recurrent, 8).search_graph
  graph = graph.replace(
    edge_visits=graph.edge_visits.at[:, 0].set(jnp.array([1, 1, 50, 49])),
    node_visits=graph.node_visits.at[:, 0].set(102),
  )
  own_visits = jnp.array([[1, 0, 0, 0], [0, 0, 3, 0]])
  target = np.asarray(mg.prune_forced_playouts(graph, own_visits, forced_playouts=2.0))
  # Game 0: child 0 (one visit, not the most visited) is pruned to nothing.
  np.testing.assert_array_equal(target[0], [1.0, 0.0, 0.0, 0.0])
  # Game 1: the most visited child keeps its visits; nothing to fall back on.
  np.testing.assert_array_equal(target[1], [0.0, 0.0, 1.0, 0.0])
  untouched = np.asarray(mg.prune_forced_playouts(graph, forced_playouts=2.0))
  assert untouched[0, 0] == 0.0  # the same child pruned from the whole visit count


@pytest.mark.slow
def test_pruning_checks_its_arguments_as_the_policy_does():
  root_fn, recurrent = commuting_game(num_actions=4, modulus=7, horizon=4)
  out = mg.muzero_policy(None, jax.random.PRNGKey(0), root_fn(2), recurrent, 8)
  graph = out.search_graph
  visits = graph.edge_visits[:, 0]
  for value, message in ((-1.0, "forced_playouts must be >= 0"), (float("nan"), ">= 0, got nan")):
    with pytest.raises(ValueError, match=message):
      mg.prune_forced_playouts(graph, forced_playouts=value)
  # One row for every game would give game 1 the target of game 0's visits.
  with pytest.raises(ValueError, match=r"visits must have shape \[B, A\] = \(2, 4\).*got \(4,\)"):
    mg.prune_forced_playouts(graph, visits[0], forced_playouts=2.0)
  wider = jnp.zeros((2, 5), jnp.int32)
  with pytest.raises(ValueError, match=r"visits must have shape \[B, A\] = \(2, 4\).*got \(2, 5\)"):
    mg.prune_forced_playouts(graph, wider, forced_playouts=2.0)
  with pytest.raises(TypeError, match=r"got a PolicyOutput \(give its search_graph\)"):
    mg.prune_forced_playouts(out, forced_playouts=2.0)
  with pytest.raises(ValueError, match="pb_c_base must be > 0"):
    mg.prune_forced_playouts(graph, forced_playouts=2.0, pb_c_base=0.0)
  target = mg.prune_forced_playouts(graph, visits, forced_playouts=2.0)
  np.testing.assert_allclose(np.asarray(target).sum(-1), 1.0, rtol=1e-6)
