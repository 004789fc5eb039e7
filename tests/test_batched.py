"""Game-by-game reads and writes (`mcgs_jax._src.batched`): the same values as explicit
batch indexing, and a search and `reroot` sharded over the games axis of two host
devices compile with no all-gather (the explicit form gathers the tables)."""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mcgs_jax._src.batched import add_at, min_at, set_at, take

B, N, A = 5, 9, 4


def _tables():
  rng = np.random.default_rng(0)
  node_table = jnp.asarray(rng.normal(size=(B, N, 3)), jnp.float32)
  edge_table = jnp.asarray(rng.integers(-9, 9, size=(B, N, A)), jnp.int32)
  rows = jnp.asarray(rng.integers(0, N, size=(B,)), jnp.int32)
  many_rows = jnp.asarray(rng.integers(0, N, size=(B, 6)), jnp.int32)
  actions = jnp.asarray(rng.integers(0, A, size=(B,)), jnp.int32)
  return node_table, edge_table, rows, many_rows, actions


def test_take_is_explicit_batch_indexing():
  node_table, edge_table, rows, many_rows, actions = _tables()
  batch = jnp.arange(B)
  np.testing.assert_array_equal(take(node_table, rows), node_table[batch, rows])
  np.testing.assert_array_equal(take(node_table, many_rows), node_table[batch[:, None], many_rows])
  np.testing.assert_array_equal(take(edge_table, (rows, actions)), edge_table[batch, rows, actions])
  # Negative rows count from the end, as in NumPy-style indexing.
  np.testing.assert_array_equal(take(node_table, rows - N), node_table[batch, rows - N])


def test_scatters_are_explicit_batch_scatters():
  node_table, edge_table, rows, many_rows, actions = _tables()
  batch = jnp.arange(B)
  dropped = jnp.where(jnp.arange(B) % 2 == 0, rows, N)  # odd games write nothing
  values = jnp.arange(B * 3, dtype=jnp.float32).reshape(B, 3)
  np.testing.assert_array_equal(
    set_at(node_table, dropped, values, mode="drop"),
    node_table.at[batch, dropped].set(values, mode="drop"),
  )
  np.testing.assert_array_equal(
    set_at(node_table, dropped, 7.0, mode="drop", unique_indices=True, indices_are_sorted=True),
    node_table.at[batch, dropped].set(7.0, mode="drop"),
  )
  np.testing.assert_array_equal(
    set_at(edge_table, (dropped, actions), actions, mode="drop"),
    edge_table.at[batch, dropped, actions].set(actions, mode="drop"),
  )
  # Several rows per game, repeated ones included.
  np.testing.assert_array_equal(
    add_at(edge_table, (many_rows, many_rows % A), 1, mode="drop"),
    edge_table.at[batch[:, None], many_rows, many_rows % A].add(1, mode="drop"),
  )
  claims = jnp.arange(B * 6, dtype=jnp.int32).reshape(B, 6)[:, ::-1]
  np.testing.assert_array_equal(
    min_at(jnp.full((B, N), 99, jnp.int32), many_rows, claims, mode="drop"),
    jnp.full((B, N), 99, jnp.int32).at[batch[:, None], many_rows].min(claims, mode="drop"),
  )


SHARDED = textwrap.dedent(
  """
  import json
  import jax, numpy as np
  from jax.sharding import Mesh, NamedSharding, PartitionSpec
  import mcgs_jax as mg
  from mcgs_jax.games import make_game

  games = NamedSharding(Mesh(np.asarray(jax.devices()), ("games",)), PartitionSpec("games"))
  game = make_game("tic_tac_toe")
  state = jax.device_put(game.init(jax.random.PRNGKey(0), 4), games)

  def sharded(tree):
    return jax.tree_util.tree_map(
      lambda x: jax.lax.with_sharding_constraint(x, games) if x.ndim else x, tree
    )

  def search(key, state):
    return sharded(mg.muzero_policy(
      None, key, root=game.root(None, key, state), recurrent_fn=game.recurrent_fn,
      num_simulations=8, invalid_actions=game.invalid_actions(state), solver=True,
    ))

  def reroot(graph, action):
    return sharded(mg.reroot(graph, action))

  key = jax.random.PRNGKey(1)
  out = jax.jit(search)(key, state)
  texts = {
    "search": jax.jit(search).lower(key, state).compile().as_text(),
    "reroot": jax.jit(reroot).lower(out.search_graph, out.action).compile().as_text(),
  }
  print(json.dumps({name: text.count("all-gather(") for name, text in texts.items()}))
  """
)


@pytest.mark.slow
def test_sharded_search_and_reroot_gather_no_table():
  flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2"
  env = dict(os.environ, XLA_FLAGS=flags.strip(), JAX_PLATFORMS="cpu")
  result = subprocess.run(
    [sys.executable, "-c", SHARDED], env=env, capture_output=True, text=True, timeout=600
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip().splitlines()[-1] == '{"search": 0, "reroot": 0}'


def test_take_under_jit_and_vmap_matches():
  """An outer transform (a vmap over searches) keeps the values."""
  node_table, _, rows, _, _ = _tables()
  stacked = jnp.stack([node_table, node_table + 1])
  got = jax.jit(jax.vmap(take, in_axes=(0, None)))(stacked, rows)
  np.testing.assert_array_equal(got[1], take(node_table, rows) + 1)
