"""Smoke check of the `games` extra (`pip install "mcgs-jax[games]"`: pgx, no flax).

Run by .ci/run in a fresh virtual environment holding the built wheel with the games
extra. Searches connect four and tic-tac-toe with the uniform and the rollout
evaluator, checks the counts the README promises, checks one search decision against
the exact solver, and runs `mcgs-jax search` from the installed entry point.
"""

import importlib.util
import json
import os
import subprocess
import sys

import jax
import numpy as np


def check_environment():
  assert importlib.util.find_spec("pgx") is not None, "games venv lacks pgx"
  present = [
    name
    for name in ("flax", "optax", "matplotlib", "mctx")
    if importlib.util.find_spec(name) is not None
  ]
  assert not present, f"games venv has packages of other extras installed: {present}"
  import mcgs_jax

  repo = os.environ.get("MCGS_REPO")
  if repo:
    here = os.path.realpath(mcgs_jax.__file__)
    assert not here.startswith(os.path.realpath(repo) + os.sep), (
      f"mcgs_jax imported from the checkout ({here}), not from the installed wheel"
    )
  print(f"ok: mcgs_jax {mcgs_jax.__version__} from {mcgs_jax.__file__}, pgx present, no flax")


def check_searches():
  import mcgs_jax as mg
  from mcgs_jax.games import evaluators, make_game

  batch_size, num_simulations = 4, 48
  total_hits = 0
  for game_id in ("tic_tac_toe", "connect_four"):
    for name in ("uniform", "rollout"):
      game = make_game(game_id)  # uniform evaluator by default
      if name == "rollout":
        game = make_game(game_id, evaluators.rollout_evaluator(game.env, num_rollouts=2))
      state = game.init(jax.random.PRNGKey(0), batch_size)
      invalid = game.invalid_actions(state)

      @jax.jit
      def policy(key, state, game=game):
        root = game.root(None, key, state)
        return mg.muzero_policy(
          None,
          key,
          root,
          game.recurrent_fn,
          num_simulations=num_simulations,
          invalid_actions=game.invalid_actions(state),
          hash_fn=game.hash_fn,
        )

      out = policy(jax.random.PRNGKey(1), state)
      graph = out.search_graph
      visits = np.asarray(graph.node_visits[:, 0])
      assert np.all(visits == num_simulations + 1), f"{game_id}/{name}: root visits {visits}"
      action = np.asarray(out.action)
      assert not np.asarray(invalid)[np.arange(batch_size), action].any(), "illegal action"
      weights = np.asarray(out.action_weights)
      np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
      assert np.all(weights[np.asarray(invalid)] == 0), "weight on an illegal action"
      assert np.all(np.asarray(graph.dropped_inserts) == 0)
      hits = np.asarray(graph.transposition_hits)
      total_hits += int(hits.sum())
      values = np.asarray(graph.summary().value)
      assert np.all(np.abs(values) <= 1 + 1e-5), values
      print(
        f"ok: {game_id} / {name}: root visits {visits.tolist()}, "
        f"nodes {np.asarray(graph.num_nodes).tolist()}, hits {hits.tolist()}"
      )
  print(f"ok: {total_hits} transposition hits in all")


def check_transposition_keys():
  """Move orders that reach the same position get the same key; others do not."""
  import jax.numpy as jnp

  from mcgs_jax.games import make_game

  for game_id, same_a, same_b, other in (
    ("connect_four", [0, 1, 2], [2, 1, 0], [0, 1, 3]),
    ("tic_tac_toe", [0, 4, 8], [8, 4, 0], [0, 4, 7]),
  ):
    game = make_game(game_id)
    states = [game.play(moves) for moves in (same_a, same_b, other)]
    batch = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *states)
    keys = np.asarray(game.hash_fn(batch))
    assert keys.dtype == np.uint32 and keys.shape[0] == 3, (keys.dtype, keys.shape)
    assert np.array_equal(keys[0], keys[1]), f"{game_id}: {same_a} and {same_b} differ"
    assert not np.array_equal(keys[0], keys[2]), f"{game_id}: {same_a} and {other} collide"
  print("ok: connect_four and tic_tac_toe keys: same position, same key")


def check_against_solver():
  """X has a win in one (top row); with the MCTS-solver the search must play it."""
  import jax.numpy as jnp

  import mcgs_jax as mg
  from mcgs_jax.games import make_game, tic_tac_toe_values_from_actions

  moves = [0, 3, 1, 4]
  value, action_values = tic_tac_toe_values_from_actions(moves)
  assert value == 1 and action_values[2] == 1, (value, action_values)
  game = make_game("tic_tac_toe")
  state = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[None], game.play(moves))
  root = game.root(None, jax.random.PRNGKey(0), state)
  out = mg.muzero_policy(
    None,
    jax.random.PRNGKey(3),
    root,
    game.recurrent_fn,
    num_simulations=64,
    invalid_actions=game.invalid_actions(state),
    hash_fn=game.hash_fn,
    solver=True,
  )
  assert int(out.action[0]) == 2, f"played {int(out.action[0])}, the winning move is 2"
  assert bool(out.search_graph.node_proven[0, 0]), "root not proven"
  assert float(out.search_graph.proven_values[0, 0]) == 1.0
  print("ok: tic-tac-toe win in one: solver proves the root and plays 2 (exact solver agrees)")


def check_command_line():
  # The entry point of this environment (not whatever `mcgs-jax` is first on PATH).
  command = os.path.join(os.path.dirname(sys.executable), "mcgs-jax")
  assert os.path.exists(command), f"the mcgs-jax entry point is not installed: {command}"
  result = subprocess.run(
    [
      command,
      "--no-cache",
      "search",
      "--game",
      "tic_tac_toe",
      "--moves",
      "0,3,1,4",
      "--simulations",
      "64",
      "--json",
    ],
    capture_output=True,
    text=True,
    check=False,
  )
  assert result.returncode == 0, result.stderr
  rows = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
  assert len(rows) == 1, result.stdout
  print(f"ok: mcgs-jax search --json: {sorted(rows[0])}")
  result = subprocess.run(
    [command, "--no-cache", "train", "--help"], capture_output=True, text=True, check=False
  )
  assert result.returncode != 0 and "train" in result.stderr and "flax" in result.stderr, (
    result.returncode,
    result.stderr[-2000:],
  )
  print(f"ok: mcgs-jax train without flax: {result.stderr.strip().splitlines()[-1]}")


if __name__ == "__main__":
  check_environment()
  check_searches()
  check_transposition_keys()
  check_against_solver()
  check_command_line()
  print("smoke_games: all checks passed")
  sys.exit(0)
