"""Recycled graphs (`recycle=`): a search that overwrites an old graph's arrays gives
exactly the graph of a search that allocates new ones, whatever the old graph held
(a bigger or smaller search, a full graph, a rerooted or all-empty one), clears only
the rows the old graph used, and refuses a graph of other shapes by name.

`mcgs-jax bench --capacities ...` times searches with and without it (recorded in
benchmarks/RESULTS.md).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax._src import graph as graph_lib
from mcgs_jax._src import initial
from mcgs_jax.apps import registry
from mcgs_jax.testing import check_graph, commuting_game

ROOT, RECURRENT = commuting_game()
BATCH = 3
CAPACITY = 48
# Rows are cleared in blocks of at most this many bytes (4 rows of these graphs):
# graphs that fit in one block are filled anew instead, and every graph here would.
SMALL_BLOCK_BYTES = 1600


@pytest.fixture(autouse=True, scope="module")
def small_blocks():
  """Every search of this module is traced with blocks of 4 rows, so that it takes
  the path of large graphs (the block size is read when a search is traced)."""
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(initial, "_CLEAR_BYTES", SMALL_BLOCK_BYTES)
    yield


def policy_search(
  key,
  root,
  num_simulations,
  recycle=None,
  *,
  policy="muzero",
  transpositions=True,
  num_parallel=1,
  capacity=CAPACITY,
  solver=False,
):
  policies = {
    # No root noise: a known fraction of 0 leaves the Gamma sampler out of the
    # program (a third of a search's compile time), and recycling is not about it.
    **registry.POLICIES,
    "muzero": functools.partial(mg.muzero_policy, dirichlet_fraction=0.0),
  }
  return policies[policy](
    None,
    key,
    root,
    RECURRENT,
    num_simulations,
    capacity=capacity,
    transpositions=transpositions,
    num_parallel=num_parallel,
    solver=solver,
    recycle=recycle,
  ).search_graph


STATIC = ("num_simulations", "policy", "transpositions", "num_parallel", "capacity", "solver")
fresh_search = jax.jit(policy_search, static_argnames=STATIC)
recycled_search = jax.jit(policy_search, static_argnames=STATIC, donate_argnames="recycle")


def assert_same_graph(actual, expected):
  leaves_actual = jax.tree_util.tree_leaves_with_path(actual)
  leaves_expected = jax.tree_util.tree_leaves_with_path(expected)
  assert [path for path, _ in leaves_actual] == [path for path, _ in leaves_expected]
  for (path, a), (_, b) in zip(leaves_actual, leaves_expected, strict=True):
    np.testing.assert_array_equal(
      np.asarray(a), np.asarray(b), err_msg=f"graph{jax.tree_util.keystr(path)}"
    )


@pytest.mark.quick_variants("graph-old-smaller")
@pytest.mark.parametrize(
  "config, old_simulations",
  [
    (dict(policy="muzero", transpositions=True), 6),
    (dict(policy="muzero", transpositions=True), 40),
    (dict(policy="muzero", transpositions=False), 40),
    pytest.param(dict(policy="muzero", transpositions=False), 6, marks=pytest.mark.slow),
    pytest.param(dict(policy="gumbel", transpositions=True), 40, marks=pytest.mark.slow),
    pytest.param(
      dict(policy="uct", transpositions=True, num_parallel=2, solver=True),
      40,
      marks=pytest.mark.slow,
    ),
  ],
  ids=[
    "graph-old-smaller",
    "graph-old-bigger",
    "tree-old-bigger",
    "tree-old-smaller",
    "gumbel",
    "uct-parallel-solver",
  ],
)
def test_recycled_search_equals_a_fresh_one(config, old_simulations):
  """The old graph (another root, another key, more or fewer nodes) leaves no trace."""
  old = fresh_search(jax.random.PRNGKey(7), ROOT(BATCH, offset=5), old_simulations, **config)
  expected = fresh_search(jax.random.PRNGKey(1), ROOT(BATCH), 12, **config)
  recycled = recycled_search(jax.random.PRNGKey(1), ROOT(BATCH), 12, old, **config)
  assert_same_graph(recycled, expected)
  check_graph(
    recycled,
    12,
    tree_mode=not config["transpositions"],
    check_values=False,
    playouts_stop_early=True,
  )


@pytest.mark.parametrize("block_bytes", [1 << 22, SMALL_BLOCK_BYTES], ids=["filled-anew", "4-rows"])
def test_a_full_graph_and_a_rerooted_or_empty_one_recycle_cleanly(monkeypatch, block_bytes):
  """A graph filled to capacity (small enough to be filled anew, or cleared in blocks
  of 4 rows whose last one is moved back to end at the capacity), a rerooted graph,
  and `empty_like` all recycle to a fresh search."""
  monkeypatch.setattr(initial, "_CLEAR_BYTES", block_bytes)
  capacity = 9
  full = fresh_search(jax.random.PRNGKey(2), ROOT(BATCH), 30, capacity=capacity)
  assert np.all(np.asarray(full.num_nodes) == capacity)
  action = jnp.asarray([0, 1, 2], jnp.int32)
  rerooted = jax.jit(mg.reroot)(full, action)
  # Jitted anew: the block size is read when the search is traced.
  fresh = jax.jit(policy_search, static_argnames=STATIC)
  recycling = jax.jit(policy_search, static_argnames=STATIC, donate_argnames="recycle")
  expected = fresh(jax.random.PRNGKey(3), ROOT(BATCH), 5, capacity=capacity)
  for old in (full, rerooted, mg.empty_like(full)):
    assert_same_graph(
      recycling(jax.random.PRNGKey(3), ROOT(BATCH), 5, old, capacity=capacity), expected
    )


@pytest.mark.parametrize(
  "block_bytes, block_rows",
  [(1, 1), (SMALL_BLOCK_BYTES, 4), (1 << 30, CAPACITY)],
  ids=["row", "rows", "all"],
)
def test_clearing_writes_every_used_row_in_blocks(monkeypatch, block_bytes, block_rows):
  """Blocks of one row, of a few rows, or the whole capacity: every used row is
  empty afterwards, and rows above the last block are not written (they hold a
  sentinel here that must survive)."""
  monkeypatch.setattr(initial, "_CLEAR_BYTES", block_bytes)
  # 20 playouts: the fullest game uses 15 rows, so its last block of 4 is partly used.
  old = fresh_search(jax.random.PRNGKey(4), ROOT(BATCH), 20, capacity=CAPACITY)
  assert initial.clear_block_rows(old) == block_rows
  used = int(np.max(np.asarray(old.num_nodes)))
  assert 0 < used < CAPACITY and (block_rows == 1 or used % block_rows)
  sentinel = old.replace(node_visits=old.node_visits.at[:, used:].set(-7))
  cleared = initial.clear_used_rows(sentinel)
  for name, fill in graph_lib.ROW_FIELDS.items():
    for leaf in jax.tree_util.tree_leaves(cleared[name]):
      np.testing.assert_array_equal(np.asarray(leaf)[:, :used], fill, err_msg=name)
  last_written = min(-(-used // block_rows) * block_rows, CAPACITY)
  visits = np.asarray(cleared["node_visits"])
  np.testing.assert_array_equal(visits[:, used:last_written], 0)
  np.testing.assert_array_equal(visits[:, last_written:], -7)


def test_recycled_buffers_are_donated_and_not_copied():
  """Under `jax.jit(..., donate_argnames=...)` the old graph's buffers are taken (its
  arrays are deleted), and the compiled search holds no copy of a whole `[B, N, ...]`
  table: the set-up writes the used rows in place."""
  old = fresh_search(jax.random.PRNGKey(5), ROOT(BATCH), 12)
  lowered = recycled_search.lower(jax.random.PRNGKey(6), ROOT(BATCH), 12, old)
  text = lowered.compile().as_text()
  copies = [
    line
    for line in text.splitlines()
    if " copy(" in line and f"[{BATCH},{CAPACITY}" in line and f"[{BATCH},{CAPACITY},0]" not in line
  ]
  assert not copies, "\n".join(copies)
  recycled_search(jax.random.PRNGKey(6), ROOT(BATCH), 12, old)
  assert old.node_visits.is_deleted()


@functools.cache
def a_graph():
  return fresh_search(jax.random.PRNGKey(8), ROOT(BATCH), 12)


def test_recycle_takes_the_capacity_of_the_old_graph():
  old = fresh_search(jax.random.PRNGKey(8), ROOT(BATCH), 12, capacity=30)
  out = jax.eval_shape(
    lambda: mg.muzero_policy(None, jax.random.PRNGKey(9), ROOT(BATCH), RECURRENT, 12, recycle=old)
  )
  assert out.search_graph.node_visits.shape == (BATCH, 30)


def test_recycle_with_graph_is_refused():
  with pytest.raises(ValueError, match="graph .*or recycle"):
    mg.muzero_policy(
      None, jax.random.PRNGKey(0), ROOT(BATCH), RECURRENT, 12, graph=a_graph(), recycle=a_graph()
    )


@pytest.mark.parametrize(
  "change, message",
  [
    (dict(capacity=CAPACITY + 1), r"capacity = 49 differs from the capacity of recycle \(48\)"),
    (dict(transpositions=False), r"transpositions = False, but recycle was built with"),
    (dict(batch=BATCH + 1), r"recycle holds B = 3 games of A = 3 actions; root has B = 4"),
  ],
  ids=["capacity", "transpositions", "batch"],
)
def test_a_graph_of_other_shapes_is_refused_by_name(change, message):
  batch = change.pop("batch", BATCH)
  with pytest.raises(ValueError, match=message):
    mg.muzero_policy(
      None, jax.random.PRNGKey(0), ROOT(batch), RECURRENT, 12, recycle=a_graph(), **change
    )


def test_a_graph_of_other_value_dtype_is_refused_by_table():
  root = ROOT(BATCH)
  wide = a_graph().replace(raw_values=a_graph().raw_values.astype(jnp.float16))
  message = r"recycle\.raw_values has shape \(3, 48\) and dtype float16"
  with pytest.raises(ValueError, match=message):
    mg.muzero_policy(None, jax.random.PRNGKey(0), root, RECURRENT, 12, recycle=wide)


def test_a_graph_of_another_embedding_is_refused():
  root = ROOT(BATCH)
  other = root.replace(embedding={**root.embedding, "extra": jnp.zeros((BATCH,), jnp.int32)})

  def recurrent(params, key, action, embedding):
    output, new = RECURRENT(params, key, action, embedding)
    return output, {**new, "extra": embedding["extra"]}

  with pytest.raises(ValueError, match="recycle holds other tables"):
    mg.muzero_policy(None, jax.random.PRNGKey(0), other, recurrent, 12, recycle=a_graph())


def test_recycle_must_be_a_graph():
  with pytest.raises(TypeError, match="recycle must be a mcgs_jax.Graph"):
    mg.muzero_policy(
      None, jax.random.PRNGKey(0), ROOT(BATCH), RECURRENT, 12, recycle={"node_visits": 0}
    )


# Slow: the recycling of test_recycled_search_equals_a_fresh_one, on the stochastic policy.
@pytest.mark.slow
def test_stochastic_policy_recycles_to_the_same_graph():
  """Chance nodes too: a recycled stochastic search (its wider tables, its
  `StochasticRecurrentState` embeddings) equals one on new tables."""
  from test_stochastic import toy_chance_fn, toy_decision_fn, toy_root  # noqa: PLC0415

  def search(key, root, num_simulations, recycle=None):
    return mg.stochastic_muzero_policy(
      None,
      key,
      root,
      toy_decision_fn,
      toy_chance_fn,
      num_simulations,
      capacity=40,
      recycle=recycle,
    ).search_graph

  fresh = jax.jit(search, static_argnames="num_simulations")
  recycling = jax.jit(search, static_argnames="num_simulations", donate_argnames="recycle")
  old = fresh(jax.random.PRNGKey(1), toy_root(4), 30)
  expected = fresh(jax.random.PRNGKey(2), toy_root(4), 12)
  recycled = recycling(jax.random.PRNGKey(2), toy_root(4), 12, old)
  assert isinstance(recycled, type(expected))
  assert_same_graph(recycled, expected)
