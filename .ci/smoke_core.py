"""Smoke check of the core install (`pip install mcgs-jax`: jax, chex, numpy only).

Run by .ci/run in a fresh virtual environment holding the built wheel and nothing
else. Checks that the package imports without any extra, that no extra is pulled in
at import time, and that searches with a user's own `recurrent_fn` and with
`mcgs_jax.testing.commuting_game` give the counts the README promises.
"""

import importlib.util
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np

EXTRAS = ("pgx", "flax", "optax", "matplotlib", "mctx")


def check_environment():
  """The venv must be core only, or this check proves nothing."""
  present = [name for name in EXTRAS if importlib.util.find_spec(name) is not None]
  assert not present, f"core venv has extra packages installed: {present}"
  import mcgs_jax

  repo = os.environ.get("MCGS_REPO")
  if repo:
    here = os.path.realpath(mcgs_jax.__file__)
    assert not here.startswith(os.path.realpath(repo) + os.sep), (
      f"mcgs_jax imported from the checkout ({here}), not from the installed wheel"
    )
  for module in ("mcgs_jax", "mcgs_jax.games", "mcgs_jax.testing", "mcgs_jax.apps.cli"):
    importlib.import_module(module)
  loaded = [name for name in EXTRAS if name in sys.modules]
  assert not loaded, f"importing mcgs_jax loaded {loaded}"
  print(f"ok: mcgs_jax {mcgs_jax.__version__} imports from {mcgs_jax.__file__}")


def user_game():
  """A user's own game, written against the mctx API only: a counter that actions
  push up by 1, 2 or 3 (mod 7), ending after 4 moves."""
  import mcgs_jax as mg

  num_actions = 3

  def recurrent_fn(params, rng_key, action, embedding):
    del params, rng_key
    total = (embedding["total"] + action + 1) % 7
    steps = embedding["steps"] + 1
    done = steps >= 4
    out = mg.RecurrentFnOutput(
      reward=jnp.where(done, jnp.where(total % 2 == 0, 1.0, -1.0), 0.0),
      discount=jnp.where(done, 0.0, -1.0),
      prior_logits=jnp.zeros((total.shape[0], num_actions)),
      value=jnp.zeros(total.shape, jnp.float32),
    )
    return out, {"total": total, "steps": steps}

  def root(batch_size):
    return mg.RootFnOutput(
      prior_logits=jnp.zeros((batch_size, num_actions)),
      value=jnp.zeros((batch_size,)),
      embedding={
        "total": jnp.arange(batch_size, dtype=jnp.int32),
        "steps": jnp.zeros((batch_size,), jnp.int32),
      },
    )

  return root, recurrent_fn


def check_search(name, out, batch_size, num_simulations, num_actions):
  graph = out.search_graph
  visits = np.asarray(graph.node_visits[:, 0])
  assert out.action.shape == (batch_size,), out.action.shape
  assert out.action_weights.shape == (batch_size, num_actions), out.action_weights.shape
  assert np.all(visits == num_simulations + 1), f"{name}: root visits {visits}"
  weights = np.asarray(out.action_weights)
  assert not np.isnan(weights).any(), f"{name}: NaN action weights"
  np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5, err_msg=name)
  summary = graph.summary()
  np.testing.assert_allclose(
    np.asarray(summary.visit_counts).sum(-1), num_simulations, err_msg=name
  )
  assert out.search_tree is graph
  print(
    f"ok: {name}: root visits {visits.tolist()}, "
    f"transposition hits {np.asarray(graph.transposition_hits).tolist()}"
  )


def check_user_recurrent_fn():
  import mcgs_jax as mg

  root_fn, recurrent_fn = user_game()
  batch_size, num_simulations = 4, 32
  root = root_fn(batch_size)
  key = jax.random.PRNGKey(0)
  for name, policy in (
    ("muzero_policy", mg.muzero_policy),
    ("gumbel_muzero_policy", mg.gumbel_muzero_policy),
    ("uct_policy", mg.uct_policy),
  ):
    out = jax.jit(
      lambda key, root, policy=policy: policy(  # noqa: B023
        None, key, root, recurrent_fn, num_simulations=num_simulations
      )
    )(key, root)
    check_search(f"user recurrent_fn, {name}", out, batch_size, num_simulations, 3)
  graph_out = mg.muzero_policy(None, key, root, recurrent_fn, num_simulations=num_simulations)
  tree_out = mg.muzero_policy(
    None, key, root, recurrent_fn, num_simulations=num_simulations, transpositions=False
  )
  graph_nodes = np.asarray(graph_out.search_graph.num_nodes)
  tree_nodes = np.asarray(tree_out.search_graph.num_nodes)
  assert np.all(graph_out.search_graph.transposition_hits > 0), "no transposition found"
  assert np.all(tree_out.search_graph.transposition_hits == 0)
  assert np.all(graph_nodes < tree_nodes), (graph_nodes, tree_nodes)
  print(f"ok: graph nodes {graph_nodes.tolist()} < tree nodes {tree_nodes.tolist()}")


def check_commuting_game():
  import mcgs_jax as mg
  from mcgs_jax import testing

  root_fn, recurrent_fn = testing.commuting_game()
  batch_size, num_simulations = 3, 48
  root = root_fn(batch_size)
  for transpositions in (True, False):
    out = mg.muzero_policy(
      None,
      jax.random.PRNGKey(1),
      root,
      recurrent_fn,
      num_simulations=num_simulations,
      transpositions=transpositions,
    )
    check_search(
      f"commuting_game, transpositions={transpositions}", out, batch_size, num_simulations, 3
    )
    testing.check_graph(out.search_graph, num_simulations, tree_mode=not transpositions)
  print("ok: testing.check_graph holds in graph and tree mode")


def check_extras_fail_clearly():
  """Without the games extra, what needs pgx says so, and nothing else breaks."""
  from mcgs_jax.games import make_game

  try:
    make_game("connect_four")
  except ImportError as error:
    assert "pgx" in str(error), error
  else:
    raise AssertionError("make_game('connect_four') worked without pgx")
  result = subprocess.run(
    [sys.executable, "-m", "mcgs_jax.apps.cli", "--version"],
    capture_output=True,
    text=True,
    check=True,
  )
  assert result.stdout.startswith("mcgs-jax "), result.stdout
  print(f"ok: without pgx make_game('connect_four') raises ImportError; {result.stdout.strip()}")


if __name__ == "__main__":
  check_environment()
  check_user_recurrent_fn()
  check_commuting_game()
  check_extras_fail_clearly()
  print("smoke_core: all checks passed")
