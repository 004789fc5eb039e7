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
from mcgs_jax.apps import registry
from mcgs_jax.testing import check_graph, commuting_game, to_numpy

ROOT, RECURRENT = commuting_game()
SIMS = 40
BATCH = 4
SICK_GAME = 1
# No root noise for muzero: nothing here is about it, and a known fraction of 0 leaves
# the Gamma sampler out of the program (a third of a search's compile time).
POLICIES = {
  **registry.POLICIES,
  "muzero": functools.partial(mg.muzero_policy, dirichlet_fraction=0.0),
}
FIELDS = ("value", "reward", "discount", "prior_logits")


def sickness(field=None, bad=jnp.nan, sick_totals=(3, 7), games=(SICK_GAME,)):
  """`params` of `poisoned_recurrent_fn`: `bad` goes into `field` of the output
  wherever one of `games` reaches a state whose total is in `sick_totals`
  (deterministic, so every edge into such a state is bad every time it is evaluated).
  `field=None` poisons nothing. As arrays, so every sickness shares one program."""
  return {
    "bad": np.float32(bad),
    "fields": np.array([name == field for name in FIELDS]),
    "totals": np.isin(np.arange(11), sick_totals),
    "games": np.isin(np.arange(BATCH), games),
  }


HEALTHY = sickness()


def poisoned_recurrent_fn(params, rng_key, action, embedding):
  """The commuting game, with the non-finite outputs that `params` (`sickness`) asks
  for."""
  output, embedding = RECURRENT(None, rng_key, action, embedding)
  total = embedding["total"]
  # With num_parallel = K the batch is K * BATCH leaves, game-major within each K.
  sick = jnp.tile(params["games"], total.shape[0] // BATCH) & params["totals"][total]
  poisoned = dict(zip(FIELDS, sick[None, :] & params["fields"][:, None]))
  bad = params["bad"]
  return output.replace(
    value=jnp.where(poisoned["value"], bad, output.value),
    reward=jnp.where(poisoned["reward"], bad, output.reward),
    discount=jnp.where(poisoned["discount"], bad, output.discount),
    prior_logits=jnp.where(
      poisoned["prior_logits"][:, None], output.prior_logits.at[:, 1].set(bad), output.prior_logits
    ),
  ), embedding


@functools.partial(jax.jit, static_argnames=("policy", "options"))
def _run(key, params, root, invalid_actions, *, policy, options):
  return POLICIES[policy](
    params,
    key,
    root,
    poisoned_recurrent_fn,
    SIMS,
    invalid_actions=invalid_actions,
    **dict(options),
  )


def run(key, params=HEALTHY, *, root=None, invalid_actions=None, policy="muzero", options=()):
  """`policy` on the poisoned commuting game (`root`: 4 games from the start)."""
  root = ROOT(BATCH) if root is None else root
  return _run(key, params, root, invalid_actions, policy=policy, options=options)


def assert_games_equal(first, second, games):
  """Bit for bit in `games`: both searches ran in one program, so a game's numbers
  may depend only on its own inputs."""
  for a, b in zip(jax.tree_util.tree_leaves(first), jax.tree_util.tree_leaves(second)):
    np.testing.assert_array_equal(np.asarray(a)[games], np.asarray(b)[games])


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
  clean = run(key)
  sick = run(key, sickness(field, bad))
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
  clean = run(jax.random.PRNGKey(1), policy=policy, options=options)
  sick = run(jax.random.PRNGKey(1), sickness("value"), policy=policy, options=options)
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
    sickness("value", sick_totals=every_total),
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
  out = run(jax.random.PRNGKey(3), sickness("reward"), options=(("num_parallel", 4),))
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
  out = run(jax.random.PRNGKey(5), root=sick_root, policy=policy)
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
  out = run(jax.random.PRNGKey(6), root=sick_root, invalid_actions=invalid, policy=policy)
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
  clean = ROOT(BATCH)
  bad = clean.replace(prior_logits=clean.prior_logits.at[SICK_GAME, 0].set(jnp.nan))
  out_bad = run(jax.random.PRNGKey(0), root=bad, policy="gumbel")
  out_clean = run(jax.random.PRNGKey(0), root=clean, policy="gumbel")
  assert np.isfinite(np.asarray(out_bad.action_weights)).all()
  np.testing.assert_array_equal(
    out_bad.search_graph.non_finite_roots, np.eye(BATCH, dtype=np.int32)[SICK_GAME]
  )
  healthy = np.array([game for game in range(BATCH) if game != SICK_GAME])
  np.testing.assert_array_equal(out_bad.action_weights[healthy], out_clean.action_weights[healthy])
