"""Non-finite numbers from the evaluator are counted, never spread: an edge whose
`recurrent_fn` output holds a NaN or an infinity gets no child and is never chosen
again, its playout is dropped (`non_finite_evaluations`), a non-finite root is
replaced (`non_finite_roots`), and the other games of the batch do not notice."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax.testing import check_graph, commuting_game, to_numpy

ROOT, RECURRENT = commuting_game()
SIMS = 40
BATCH = 4
SICK_GAME = 1
POLICIES = {"muzero": mg.muzero_policy, "gumbel": mg.gumbel_muzero_policy, "uct": mg.uct_policy}


def poisoned(field, bad=jnp.nan, sick_totals=(3, 7), games=(SICK_GAME,)):
  """The commuting game, with `bad` in `field` of the output wherever one of `games`
  reaches a state whose total is in `sick_totals` (deterministic, so every edge into
  such a state is bad every time it is evaluated)."""
  sick_games = jnp.zeros(BATCH, bool).at[jnp.array(games)].set(True)

  def recurrent_fn(params, rng_key, action, embedding):
    output, embedding = RECURRENT(params, rng_key, action, embedding)
    total = embedding["total"]
    # With num_parallel = K the batch is K * BATCH leaves, game-major within each K.
    sick = jnp.tile(sick_games, total.shape[0] // BATCH) & jnp.isin(total, jnp.array(sick_totals))
    if field == "prior_logits":
      bad_row = output.prior_logits.at[:, 1].set(bad)
      return output.replace(
        prior_logits=jnp.where(sick[:, None], bad_row, output.prior_logits)
      ), embedding
    return output.replace(**{field: jnp.where(sick, bad, getattr(output, field))}), embedding

  return recurrent_fn


@functools.partial(jax.jit, static_argnames=("recurrent_fn", "policy", "options"))
def run(key, recurrent_fn, *, policy="muzero", options=()):
  return POLICIES[policy](None, key, ROOT(BATCH), recurrent_fn, SIMS, **dict(options))


def assert_games_equal(first, second, games):
  """Same counts, nodes and flags; values equal up to float rounding (the two programs
  are compiled apart, and XLA may order a sum differently in each)."""
  for a, b in zip(jax.tree_util.tree_leaves(first), jax.tree_util.tree_leaves(second)):
    a, b = np.asarray(a)[games], np.asarray(b)[games]
    if np.issubdtype(a.dtype, np.floating):
      np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    else:
      np.testing.assert_array_equal(a, b)


@pytest.mark.quick_variants("value-nan", "reward-nan", "discount--inf", "prior_logits-inf")
@pytest.mark.parametrize(
  "field,bad",
  [
    ("value", jnp.nan),
    ("value", jnp.inf),
    ("reward", jnp.nan),
    ("discount", -jnp.inf),
    ("prior_logits", jnp.nan),
    ("prior_logits", jnp.inf),
  ],
)
def test_a_non_finite_output_is_counted_and_kept_out(field, bad):
  key = jax.random.PRNGKey(0)
  clean = run(key, RECURRENT)
  sick = run(key, poisoned(field, bad))
  graph = sick.search_graph
  healthy = [game for game in range(BATCH) if game != SICK_GAME]
  assert_games_equal(sick.search_graph, clean.search_graph, healthy)
  np.testing.assert_array_equal(
    sick.action_weights[np.array(healthy)], clean.action_weights[np.array(healthy)]
  )
  counted = np.asarray(graph.non_finite_evaluations)
  assert counted[SICK_GAME] > 0 and np.all(counted[healthy] == 0)
  # A bad state never gets a node, and each bad edge was evaluated once: selection
  # never chose it again.
  g = to_numpy(graph)
  used = int(g["num_nodes"][SICK_GAME])
  totals = np.asarray(graph.embeddings["total"][SICK_GAME, :used])
  assert not np.any(np.isin(totals[1:], (3, 7)))
  assert counted[SICK_GAME] == g["edge_non_finite"][SICK_GAME].sum()
  check_graph(graph, SIMS, tree_mode=False)
  assert np.all(np.isfinite(np.asarray(sick.action_weights)))
  np.testing.assert_array_equal(graph.non_finite_roots, 0)


@pytest.mark.quick_variants("True-muzero", "False-uct")
@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("transpositions", [True, False])
def test_every_policy_stays_finite(policy, transpositions):
  options = (("transpositions", transpositions),)
  clean = run(jax.random.PRNGKey(1), RECURRENT, policy=policy, options=options)
  sick = run(jax.random.PRNGKey(1), poisoned("value"), policy=policy, options=options)
  graph = sick.search_graph
  assert int(graph.non_finite_evaluations[SICK_GAME]) > 0
  assert np.all(np.isfinite(np.asarray(sick.action_weights)))
  check_graph(graph, SIMS, tree_mode=not transpositions)
  healthy = np.array([game for game in range(BATCH) if game != SICK_GAME])
  np.testing.assert_array_equal(sick.action_weights[healthy], clean.action_weights[healthy])
  np.testing.assert_array_equal(graph.edge_visits[healthy], clean.search_graph.edge_visits[healthy])


@pytest.mark.quick_variants("4")
@pytest.mark.parametrize("num_parallel", [1, 4])
def test_a_root_whose_every_child_is_bad_spends_every_playout_and_stays_defined(num_parallel):
  every_total = tuple(range(11))
  out = run(
    jax.random.PRNGKey(2),
    poisoned("value", sick_totals=every_total),
    options=(("num_parallel", num_parallel),),
  )
  graph = out.search_graph
  assert int(graph.non_finite_evaluations[SICK_GAME]) == SIMS
  assert int(graph.num_nodes[SICK_GAME]) == 1
  assert int(graph.node_visits[SICK_GAME, 0]) == 1
  np.testing.assert_array_equal(out.action_weights[SICK_GAME], 0.0)
  assert np.all(np.asarray(graph.edge_non_finite[SICK_GAME, 0]))
  check_graph(graph, SIMS, tree_mode=False)


def test_parallel_playouts_drop_bad_leaves():
  out = run(jax.random.PRNGKey(3), poisoned("reward"), options=(("num_parallel", 4),))
  graph = out.search_graph
  assert int(graph.non_finite_evaluations[SICK_GAME]) > 0
  check_graph(graph, SIMS, tree_mode=False)
  assert np.all(np.isfinite(np.asarray(out.action_weights)))


def test_terminal_outputs_ignore_value_and_prior():
  """A terminal state's value and prior are never read (discount 0): garbage there is
  no evaluation error."""
  _, recurrent_fn = commuting_game(horizon=1)

  def garbage_at_the_end(params, rng_key, action, embedding):
    output, embedding = recurrent_fn(params, rng_key, action, embedding)
    return output.replace(
      value=jnp.full_like(output.value, jnp.nan),
      prior_logits=jnp.full_like(output.prior_logits, jnp.inf),
    ), embedding

  out = jax.jit(lambda k: mg.muzero_policy(None, k, ROOT(BATCH), garbage_at_the_end, 20))(
    jax.random.PRNGKey(4)
  )
  graph = out.search_graph
  np.testing.assert_array_equal(graph.non_finite_evaluations, 0)
  assert np.all(np.asarray(graph.num_nodes) > 1)
  check_graph(graph, 20, tree_mode=False)


@pytest.mark.quick_variants("muzero")
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_non_finite_root_value_is_counted_and_replaced(policy):
  root = ROOT(BATCH)
  sick_root = root.replace(value=root.value.at[SICK_GAME].set(jnp.nan))
  out = jax.jit(lambda k: POLICIES[policy](None, k, sick_root, RECURRENT, SIMS))(
    jax.random.PRNGKey(5)
  )
  graph = out.search_graph
  np.testing.assert_array_equal(graph.non_finite_roots, np.eye(BATCH, dtype=np.int32)[SICK_GAME])
  assert float(graph.raw_values[SICK_GAME, 0]) == 0.0
  check_graph(graph, SIMS, tree_mode=False)
  assert np.all(np.isfinite(np.asarray(out.action_weights)))


@pytest.mark.quick_variants("muzero")
@pytest.mark.parametrize("policy", ["muzero", "uct"])
def test_non_finite_root_logits_are_counted_and_replaced(policy):
  root = ROOT(BATCH)
  sick_root = root.replace(prior_logits=root.prior_logits.at[SICK_GAME, 0].set(jnp.nan))
  invalid = jnp.zeros((BATCH, 3), bool).at[SICK_GAME, 2].set(True)
  out = jax.jit(
    lambda k: POLICIES[policy](None, k, sick_root, RECURRENT, SIMS, invalid_actions=invalid)
  )(jax.random.PRNGKey(6))
  graph = out.search_graph
  np.testing.assert_array_equal(graph.non_finite_roots, np.eye(BATCH, dtype=np.int32)[SICK_GAME])
  logits = np.asarray(graph.children_prior_logits[SICK_GAME, 0])
  np.testing.assert_array_equal(logits[:2], 0.0)  # uniform over the valid actions
  assert logits[2] == np.finfo(np.float32).min
  assert int(graph.edge_visits[SICK_GAME, 0, 2]) == 0
  check_graph(graph, SIMS, tree_mode=False)
  assert np.all(np.isfinite(np.asarray(out.action_weights)))


def test_gumbel_weights_stay_finite_with_a_nan_root_logit():
  """Gumbel builds its weights from the root logits: a NaN there is replaced (uniform
  over valid actions) and counted, and the other games keep their results."""
  root_fn, recurrent_fn = commuting_game()
  clean = root_fn(4)
  bad = clean.replace(prior_logits=clean.prior_logits.at[1, 0].set(jnp.nan))
  out_bad = mg.gumbel_muzero_policy(None, jax.random.PRNGKey(0), bad, recurrent_fn, 16)
  out_clean = mg.gumbel_muzero_policy(None, jax.random.PRNGKey(0), clean, recurrent_fn, 16)
  assert np.isfinite(np.asarray(out_bad.action_weights)).all()
  np.testing.assert_array_equal(out_bad.search_graph.non_finite_roots, [0, 1, 0, 0])
  for game in (0, 2, 3):
    np.testing.assert_array_equal(out_bad.action_weights[game], out_clean.action_weights[game])
