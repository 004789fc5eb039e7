"""2048 split at its afterstate (`mcgs_jax.games.play2048`): the deterministic half
equals pgx's step, the chance half draws pgx's tiles with pgx's frequencies, tree
mode reproduces `mctx.stochastic_muzero_policy` with a flax network, the graph
finds transpositions, and on a 2x2 board the search converges to exact expectimax.
"""

import functools

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pgx
import pytest

from mcgs_jax._src.stochastic import stochastic_muzero_policy
from mcgs_jax.games import expectimax, play2048
from mcgs_jax.testing import check_graph

KEY = jax.random.PRNGKey(0)


def random_boards(rng_key, batch_size, size=4, highest=11):
  """Boards of random tiles up to 2^highest, each with its own share of empty cells
  (0 to 70%): full boards with and without merges, illegal moves, finished games."""
  share_key, empty_key, tile_key = jax.random.split(rng_key, 3)
  share = jax.random.uniform(share_key, (batch_size, 1)) * 0.7
  empty = jax.random.uniform(empty_key, (batch_size, size * size)) < share
  tiles = jax.random.randint(tile_key, (batch_size, size * size), 1, highest + 1)
  return jnp.where(empty, 0, tiles).astype(jnp.int32)


def pgx_states(boards):
  env = pgx.make("2048")
  states = jax.vmap(env.init)(jax.random.split(KEY, boards.shape[0]))
  legal = jax.vmap(play2048.legal_actions)(boards)
  return env, states.replace(_board=boards, legal_action_mask=legal)


@pytest.mark.slow
def test_deterministic_half_equals_pgx_step():
  """pgx's board after a step is our afterstate plus one new tile (2 or 4 on a cell
  that was empty), with the same reward, legal moves and end of game."""
  batch_size = 1024
  boards = random_boards(KEY, batch_size)
  env, states = pgx_states(boards)
  # pgx's own legal moves of these boards, from its rules.
  pgx_legal = jax.vmap(lambda b: pgx.play2048._legal_action_mask(b.reshape(4, 4)))(boards)
  np.testing.assert_array_equal(jax.vmap(play2048.legal_actions)(boards), pgx_legal)
  afterstates, rewards, legal = jax.jit(jax.vmap(play2048.all_moves))(boards)
  step = jax.jit(jax.vmap(env.step))
  game = play2048.make_2048()
  assert 0 < int(jnp.sum(~legal)) < legal.size  # some moves illegal, most legal
  for action in range(play2048.NUM_ACTIONS):
    next_states = step(
      states,
      jnp.full((batch_size,), action),
      jax.random.split(jax.random.PRNGKey(action + 1), batch_size),
    )
    ok = np.asarray(legal[:, action])
    after = np.asarray(afterstates[:, action])[ok]
    board = np.asarray(next_states._board)[ok]
    changed = board != after
    assert np.all(changed.sum(axis=1) == 1), f"action {action}: not exactly one new tile"
    assert np.all(after[changed] == 0) and np.all(np.isin(board[changed], (1, 2)))
    np.testing.assert_array_equal(
      np.asarray(next_states.rewards)[ok, 0], np.asarray(rewards[:, action])[ok]
    )
    np.testing.assert_array_equal(
      np.asarray(next_states.terminated)[ok], np.asarray(game.terminated(jnp.asarray(board)))
    )


def _chi_square_bound(degrees: int, z: float = 3.72) -> float:
  """Upper quantile of chi-square with `degrees` degrees of freedom (Wilson and
  Hilferty's cube-root approximation; z = 3.72 is the 0.9999 normal quantile)."""
  k = float(degrees)
  return k * (1 - 2 / (9 * k) + z * np.sqrt(2 / (9 * k))) ** 3


@pytest.mark.slow
def test_chance_half_matches_pgx_tile_frequencies():
  """Outcome counts of pgx's step and of our sampler both fit `chance_probs`."""
  samples = 20000
  afterstate = jnp.asarray([1, 0, 2, 0, 0, 3, 0, 0, 4, 4, 0, 1, 0, 0, 5, 0], jnp.int32)
  probs = np.asarray(play2048.chance_probs(afterstate))
  np.testing.assert_allclose(probs.sum(), 1.0, rtol=1e-6)
  np.testing.assert_allclose(probs[16:].sum(), 0.1, rtol=1e-5)
  # pgx draws its tile after sliding; a board that slides to `afterstate` with
  # action 0 (left) is `afterstate` itself when nothing moves, so shift it right.
  start = jnp.asarray([0, 1, 0, 2, 0, 0, 0, 3, 0, 0, 4, 4, 0, 0, 1, 5], jnp.int32)
  slid, _, _ = play2048.all_moves(start)
  np.testing.assert_array_equal(
    slid[0], jnp.asarray([1, 2, 0, 0, 3, 0, 0, 0, 5, 0, 0, 0, 1, 5, 0, 0], jnp.int32)
  )
  after = slid[0]
  probs = np.asarray(play2048.chance_probs(after))
  env, states = pgx_states(jnp.broadcast_to(start, (samples, 16)))
  next_boards = np.asarray(
    jax.jit(jax.vmap(env.step))(
      states, jnp.zeros((samples,), jnp.int32), jax.random.split(KEY, samples)
    )._board
  )
  changed = next_boards != np.asarray(after)
  cells = np.argmax(changed, axis=1)
  pgx_outcomes = cells + 16 * (next_boards[np.arange(samples), cells] - 1)
  our_outcomes = np.asarray(
    jax.vmap(play2048.sample_outcome, in_axes=(0, None))(
      jax.random.split(jax.random.PRNGKey(1), samples), after
    )
  )
  possible = probs > 0
  for name, outcomes in (("pgx", pgx_outcomes), ("ours", our_outcomes)):
    counts = np.bincount(outcomes, minlength=32)
    assert counts[~possible].sum() == 0, f"{name}: a tile on an occupied cell"
    expected = samples * probs[possible]
    statistic = np.sum((counts[possible] - expected) ** 2 / expected)
    assert statistic < _chi_square_bound(int(possible.sum()) - 1), (name, statistic)
    fours = np.mean(outcomes >= 16)
    assert abs(fours - 0.1) < 4 * np.sqrt(0.09 / samples), (name, fours)


def test_exact_rules_agree_with_the_jax_rules():
  """The expectimax module's plain-Python rules and play2048's JAX rules, written
  separately, agree on random 4x4 and 2x2 boards."""
  for size, count in ((4, 200), (2, 200)):
    boards = np.asarray(random_boards(jax.random.PRNGKey(size), count, size=size, highest=6))
    afterstates, rewards, legal = jax.jit(jax.vmap(play2048.all_moves))(jnp.asarray(boards))
    for index, board in enumerate(boards):
      for action in range(play2048.NUM_ACTIONS):
        after, reward, is_legal = expectimax.afterstate(tuple(board), action)
        assert after == tuple(np.asarray(afterstates[index, action]))
        assert reward == float(rewards[index, action]) and is_legal == bool(legal[index, action])
      probs = np.asarray(play2048.chance_probs(jnp.asarray(board)))
      for probability, following in expectimax.outcomes(tuple(board)):
        changed = np.flatnonzero(np.asarray(following) != board)
        outcome = changed[0] + size * size * (following[changed[0]] - 1)
        np.testing.assert_allclose(probs[outcome], probability, rtol=1e-6)


@functools.cache
def network_game():
  apply_fn, params = play2048.init_network(jax.random.PRNGKey(1), hidden=(32,))
  # mctx's convention: the merge reward on the outcome edge.
  return play2048.make_2048(play2048.network_evaluator(apply_fn), reward_on="chance"), params


@pytest.mark.slow
def test_tree_mode_matches_mctx_on_2048():
  """128 random positions (none finished), a small flax network, 32 simulations:
  root visit counts and actions identical to `mctx.stochastic_muzero_policy`."""
  batch_size, num_simulations = 128, 32
  game, params = network_game()
  boards = jax.jit(game.random_positions, static_argnums=(1, 2))(
    jax.random.PRNGKey(2), batch_size, 60
  )
  assert not np.any(np.asarray(game.terminated(boards)))

  @jax.jit
  def both(key):
    root = game.root(params, key, boards)
    invalid = game.invalid_actions(boards)
    theirs = mctx.stochastic_muzero_policy(
      params,
      key,
      mctx.RootFnOutput(prior_logits=root.prior_logits, value=root.value, embedding=root.embedding),
      game.decision_recurrent_fn,
      game.chance_recurrent_fn,
      num_simulations,
      invalid_actions=invalid,
    )
    ours = stochastic_muzero_policy(
      params,
      key,
      root,
      game.decision_recurrent_fn,
      game.chance_recurrent_fn,
      num_simulations,
      invalid_actions=invalid,
      transpositions=False,
    )
    return theirs, ours

  theirs, ours = both(jax.random.PRNGKey(3))
  their_counts = np.asarray(theirs.search_tree.summary().visit_counts)
  our_counts = np.asarray(ours.search_graph.summary().visit_counts)
  same = np.all(their_counts == our_counts, axis=-1)
  same_action = np.asarray(theirs.action) == np.asarray(ours.action)
  print(
    f"2048: root visit counts identical in {same.sum()}/{batch_size}, actions in "
    f"{same_action.sum()}/{batch_size}"
  )
  assert same.sum() == batch_size and same_action.sum() == batch_size
  np.testing.assert_allclose(
    ours.search_graph.summary().value, theirs.search_tree.summary().value, rtol=1e-5, atol=1e-5
  )
  check_graph(ours.search_graph, num_simulations, tree_mode=True)


@pytest.mark.slow
def test_graph_mode_on_2048_keeps_the_invariants():
  """Graph mode with rollouts: the invariants hold and states and afterstates are
  found again. On a tree, the reward's edge (decision or chance) does not change
  the search when the evaluators agree."""
  batch_size, num_simulations = 8, 64

  def search(game, transpositions):
    boards = game.init(KEY, batch_size)
    return jax.jit(
      lambda key: stochastic_muzero_policy(
        None,
        key,
        game.root(None, key, boards),
        game.decision_recurrent_fn,
        game.chance_recurrent_fn,
        num_simulations,
        invalid_actions=game.invalid_actions(boards),
        transpositions=transpositions,
        hash_fn=game.hash_fn,
        afterstate_hash_fn=game.afterstate_hash_fn,
      )
    )(KEY)

  out = search(play2048.make_2048(play2048.rollout_evaluator(8)), True)
  check_graph(out.search_graph, num_simulations, tree_mode=False)
  assert np.all(np.asarray(out.search_graph.transposition_hits) > 0)
  trees = [
    search(play2048.make_2048(reward_on=reward_on), False) for reward_on in ("decision", "chance")
  ]
  for tree in trees:
    check_graph(tree.search_graph, num_simulations, tree_mode=True)
  np.testing.assert_array_equal(
    trees[0].search_graph.summary().visit_counts, trees[1].search_graph.summary().visit_counts
  )


def _convergence(num_positions, simulations, seed=5):
  """`({(S, mode): (mean |Q(root) - V*|, mean regret of the most visited move)}, mean
  V*)` on random 2x2 positions, with rollouts to the end of the game."""
  game = play2048.make_2048(play2048.rollout_evaluator(48), size=2)
  boards = jax.jit(game.random_positions, static_argnums=(1, 2))(
    jax.random.PRNGKey(seed), num_positions, 12
  )
  values = np.array([expectimax.value(board) for board in np.asarray(boards)])
  action_values = np.stack([expectimax.action_values(board) for board in np.asarray(boards)])
  results = {}
  for num_simulations in simulations:
    for mode in ("graph", "tree"):
      out = jax.jit(
        lambda key, boards, s=num_simulations, graph=mode == "graph": stochastic_muzero_policy(
          None,
          key,
          game.root(None, key, boards),
          game.decision_recurrent_fn,
          game.chance_recurrent_fn,
          s,
          invalid_actions=game.invalid_actions(boards),
          transpositions=graph,
          hash_fn=game.hash_fn,
          afterstate_hash_fn=game.afterstate_hash_fn,
          dirichlet_fraction=0.0,
        )
      )(jax.random.PRNGKey(1), boards)
      summary = out.search_graph.summary()
      chosen = np.argmax(np.asarray(summary.visit_counts), axis=-1)
      regret = values - action_values[np.arange(num_positions), chosen]
      results[num_simulations, mode] = (
        np.mean(np.abs(np.asarray(summary.value) - values)),
        np.mean(regret),
      )
  return results, np.mean(values)


@pytest.mark.slow
def test_search_converges_to_expectimax_on_2x2():
  """Root value approaches the exact one as simulations grow, the chosen move loses
  little against the best, and the graph's value is at least as close as the
  tree's at equal simulations. (PUCT may commit early to a move its first rollouts
  favoured, so a position or two can keep a suboptimal move at these budgets:
  the move is checked by its mean regret, not position by position.)"""
  results, mean_value = _convergence(32, (16, 256))
  print(results)
  for mode in ("graph", "tree"):
    assert results[256, mode][0] < results[16, mode][0] - 3.0  # value error shrinks
    assert results[256, mode][1] < 0.02 * mean_value  # regret under 2%
  assert results[256, "graph"][0] <= results[256, "tree"][0] + 0.25


@pytest.mark.slow
def test_search_converges_further_with_more_simulations():
  results, _ = _convergence(64, (64, 1024))
  print(results)
  for mode in ("graph", "tree"):
    assert results[1024, mode][0] < results[64, mode][0] - 5.0
  assert results[1024, "graph"][0] <= results[1024, "tree"][0]


def test_bad_arguments_of_make_2048():
  with pytest.raises(ValueError, match="reward_on must be one of"):
    play2048.make_2048(reward_on="afterstate")
  with pytest.raises(ValueError, match="size must be an int >= 2"):
    play2048.make_2048(size=1)
  with pytest.raises(TypeError, match="evaluator must be an Evaluator2048"):
    play2048.make_2048(evaluator=lambda params, key, boards: None)
  with pytest.raises(ValueError, match="num_steps and num_rollouts must be >= 1"):
    play2048.rollout_evaluator(num_steps=0)
  assert play2048.make_from_spec("2048").size == 4
  assert play2048.make_from_spec("2048:3").num_chance_outcomes == 18
  with pytest.raises(ValueError, match="'2048' or '2048:SIZE'"):
    play2048.make_from_spec("2049")


@pytest.mark.slow
def test_play_command_plays_to_the_end_and_writes_json_and_plot(tmp_path, capsys):
  """`mcgs-jax play` on a 2x2 board: every game ends, graph and tree side by side."""
  import json

  from mcgs_jax.apps.cli import play_command

  plot = tmp_path / "play.png"
  assert (
    play_command.main(
      [
        "--game",
        "2048:2",
        "--games",
        "3",
        "--simulations",
        "8",
        "--evaluator",
        "uniform",
        "--modes",
        "graph,tree",
        "--json",
        "--plot",
        str(plot),
      ]
    )
    == 0
  )
  result = json.loads(capsys.readouterr().out)
  assert set(result["modes"]) == {"graph", "tree"}
  for stats in result["modes"].values():
    assert stats["finished"] == 3 and len(stats["scores"]) == 3
    low, high = stats["score_ci95"]
    assert low <= stats["mean_score"] <= high
    assert sum(stats["largest_tiles"].values()) == 3
    assert stats["nodes_per_move"] >= 1
  assert plot.stat().st_size > 0
  text = play_command.format_results(result)
  assert "mean score" in text and "largest tile" in text


@pytest.mark.slow
def test_play_command_reuses_the_graph_by_move_and_tile(capsys):
  """`--reuse`: each search continues the previous one, rerooted by the move and
  then by the tile that fell, so roots start with visits carried over."""
  import json

  from mcgs_jax.apps.cli import play_command

  assert (
    play_command.main(
      [
        "--game",
        "2048:2",
        "--games",
        "3",
        "--simulations",
        "8",
        "--evaluator",
        "uniform",
        "--modes",
        "graph",
        "--reuse",
        "--json",
      ]
    )
    == 0
  )
  stats = json.loads(capsys.readouterr().out)["modes"]["graph"]
  assert stats["finished"] == 3
  assert stats["carried_visits_per_move"] > 1


@pytest.mark.parametrize(
  "argv, message",
  [
    (["--game", "chess"], "only 2048"),
    (["--game", "2048:1"], "board size"),
    (["--game", "2048:17"], "must be an integer in [2, 16]"),
    (["--games", "100000", "--simulations", "100000"], "GB for its searches' graphs"),
    (["--modes", "graph,forest"], "comma-separated list"),
    (["--games", "0"], "expected a positive integer"),
    (["--evaluator", "oracle"], "invalid choice"),
  ],
)
def test_play_command_bad_input_is_one_line(argv, message, capsys):
  from mcgs_jax.apps.cli import play_command

  with pytest.raises(SystemExit) as raised:
    play_command.main(argv)
  assert raised.value.code == 2
  error = capsys.readouterr().err.strip()
  assert error.startswith("mcgs-jax play: error:") and message in error
  assert len(error.splitlines()) == 1
