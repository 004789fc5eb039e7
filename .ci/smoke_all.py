"""Smoke check of `pip install "mcgs-jax[all]"`: every module imports, the network
evaluator (flax) and the pictures (matplotlib) work from the installed wheel (the
searches themselves are checked by smoke_core.py, smoke_games.py and the tests).

Run by .ci/run in a fresh virtual environment holding the built wheel with all
extras, before the test suite runs against that same environment.
"""

import importlib
import os
import pkgutil
import tempfile

import jax
import numpy as np


def check_every_module_imports():
  import mcgs_jax

  repo = os.environ.get("MCGS_REPO")
  if repo:
    here = os.path.realpath(mcgs_jax.__file__)
    assert not here.startswith(os.path.realpath(repo) + os.sep), (
      f"mcgs_jax imported from the checkout ({here}), not from the installed wheel"
    )
  names = [info.name for info in pkgutil.walk_packages(mcgs_jax.__path__, "mcgs_jax.")]
  for name in names:
    if name == "mcgs_jax.train":  # deprecated alias; imports mcgs_jax.apps.train
      continue
    importlib.import_module(name)
  assert len(names) >= 20, names
  missing = [name for name in mcgs_jax.__all__ if not hasattr(mcgs_jax, name)]
  assert not missing, f"mcgs_jax.__all__ names missing: {missing}"
  import mcgs_jax.games as games

  missing = [name for name in games.__all__ if getattr(games, name, None) is None]
  assert not missing, f"mcgs_jax.games.__all__ names missing: {missing}"
  typed = os.path.join(os.path.dirname(mcgs_jax.__file__), "py.typed")
  assert os.path.exists(typed), "the wheel lacks the py.typed marker"
  print(f"ok: {len(names)} modules import from {os.path.dirname(mcgs_jax.__file__)}")


def check_network_and_pictures():
  import matplotlib

  matplotlib.use("Agg")
  import mcgs_jax as mg
  from mcgs_jax.apps import viz
  from mcgs_jax.games import evaluators, init_network, make_game

  game = make_game("tic_tac_toe")
  apply_fn, params = init_network(game.env, jax.random.PRNGKey(0), hidden=(16,))
  game = make_game("tic_tac_toe", evaluators.network_evaluator(apply_fn))
  state = game.init(jax.random.PRNGKey(1), 2)
  root = game.root(params, jax.random.PRNGKey(2), state)
  out = mg.gumbel_muzero_policy(
    params,
    jax.random.PRNGKey(3),
    root,
    game.recurrent_fn,
    num_simulations=16,
    invalid_actions=game.invalid_actions(state),
    hash_fn=game.hash_fn,
  )
  assert np.all(np.asarray(out.search_graph.node_visits[:, 0]) == 17)
  dot = viz.to_dot(out.search_graph, game_index=0, max_nodes=10)
  assert dot.startswith("digraph"), dot[:80]
  ax = viz.plot_graph(out.search_graph, game_index=1, max_nodes=10)
  with tempfile.TemporaryDirectory() as directory:
    path = os.path.join(directory, "graph.png")
    ax.figure.savefig(path)
    assert os.path.getsize(path) > 1000
  print("ok: flax network evaluator with gumbel_muzero_policy; viz.to_dot and plot_graph")


if __name__ == "__main__":
  check_every_module_imports()
  check_network_and_pictures()
  print("smoke_all: all checks passed")
