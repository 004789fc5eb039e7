"""The graph a search starts from: a fresh one holding the root (`empty_graph`), a
graph it continues, or a fresh one written into the arrays of a graph it recycles
(`clear_used_rows`)."""

import functools
import math
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax._src import batched, checks, compact, hashing, types
from mcgs_jax._src.batched import where_per_game
from mcgs_jax._src.graph import (
  COUNTER_FIELDS,
  EDGE_FIELDS,
  NODE_FIELDS,
  ROOT_INDEX,
  ROW_FIELDS,
  Graph,
)
from mcgs_jax._src.options import MAX_CAPACITY, GraphOptions
from mcgs_jax._src.rows import positive_probability, small_enough_to_sum


def finite_root(
  root: types.RootFnOutput, invalid_actions: chex.Array
) -> tuple[types.RootFnOutput, chex.Array]:
  """`(root, non_finite [B] bool)`: the root with a non-finite value (or one beyond
  `small_enough_to_sum`) taken as 0 and prior logits holding a NaN or +inf, or no
  finite entry, taken as uniform over the valid actions, and which games needed
  either."""
  value, logits = jnp.asarray(root.value), jnp.asarray(root.prior_logits)
  bad_value = ~small_enough_to_sum(value)
  # `logits < inf` is False for NaN too; -inf is allowed (a zero prior).
  bad_logits = ~(jnp.all(logits < jnp.inf, axis=-1) & jnp.any(jnp.isfinite(logits), axis=-1))
  uniform = jnp.where(invalid_actions, jnp.finfo(logits.dtype).min, 0.0).astype(logits.dtype)
  return (
    root.replace(
      value=jnp.where(bad_value, 0.0, value).astype(value.dtype),
      prior_logits=jnp.where(bad_logits[:, None], uniform, logits),
    ),
    bad_value | bad_logits,
  )


def initial_graph(
  root: types.RootFnOutput,
  invalid_actions: chex.Array,
  *,
  num_simulations: int,
  options: GraphOptions,
  extra_data: chex.ArrayTree,
  graph: Graph | None,
  recycle: Graph | None,
) -> Graph:
  """The graph a search with these arguments (see `search`) starts from, after
  `check_inputs` has checked `root`, `invalid_actions [B, A]` bool, `graph` and
  `recycle`.

  Without `graph`, a fresh graph whose only node is `root` (written into the arrays
  of `recycle` when given); with it, `graph` continued from `root`'s evaluation
  (`_continue`). Checks that `graph` or `recycle` fits the search, and the capacity
  (`options.capacity`, by default `num_simulations + 1` or the capacity of either)
  and the root key (outside `jit`; under it a game whose root key differs starts
  afresh and is counted in `root_key_mismatches`); a non-finite root is replaced
  (`finite_root`) and counted in `non_finite_roots`.
  """
  batch_size, num_actions = np.shape(root.prior_logits)
  capacity = options.capacity
  for name, given in (("graph", graph), ("recycle", recycle)):
    if given is not None:
      capacity = checks.check_continued_graph(
        given, capacity, batch_size, num_actions, options.transpositions, name
      )
  capacity = checks.check_int(
    "capacity",
    num_simulations + 1 if capacity is None else capacity,
    minimum=2,
    maximum=MAX_CAPACITY,
  )
  root, root_non_finite = finite_root(root, invalid_actions)
  if options.transpositions:
    root_key = checks.check_key(options.resolved_hash_fn(root.embedding), batch_size)
    num_slots = hashing.num_slots_for(capacity)
  else:
    root_key = jnp.zeros((batch_size, 0), jnp.uint32)
    num_slots = 0
  new_graph = functools.partial(
    empty_graph,
    root,
    capacity=capacity,
    num_slots=num_slots,
    root_key=root_key,
    root_invalid_actions=invalid_actions,
    value_bounds=options.value_bounds,
    extra_data=extra_data,
    max_children=options.max_children,
    count_unproven=options.counts_unproven_edges,
  )
  for name, given in (("graph", graph), ("recycle", recycle)):
    if given is not None:
      checks.check_tables(name, given, jax.eval_shape(new_graph))
  if graph is not None and options.transpositions:
    checks.check_root_key(graph, root_key)
  fresh = new_graph(recycle=recycle)
  start = fresh if graph is None else _continue(graph, fresh, extra_data, root.prior_logits)
  return start.replace(non_finite_roots=start.non_finite_roots + root_non_finite)


def _continue(
  graph: Graph, fresh: Graph, extra_data: chex.ArrayTree, root_logits: chex.Array
) -> Graph:
  """`graph` with the root's new prior logits (`root_logits [B, A]`; with compact
  edges read at the slots the root already has), invalid actions and terminal flag
  and the search's `value_bounds` from `fresh` (the fresh graph of the new root
  evaluation), and `fresh` whole in games where `graph` is empty or stores another
  key at its root than `fresh` (`[B, L]` keys; `L = 0` in tree mode, where no key
  differs): those games start afresh, and the second kind is counted in
  `root_key_mismatches`, the one counter every game keeps from `graph`."""
  kept = graph.num_nodes > 0
  stored_key, root_key = graph.node_keys[:, ROOT_INDEX], fresh.node_keys[:, ROOT_INDEX]
  mismatched = kept & jnp.any(stored_key != root_key, axis=-1)  # [B]
  root_key_mismatches = graph.root_key_mismatches + mismatched.astype(jnp.int32)
  # One selection over every table, which games whose graph is empty needed anyway.
  graph = where_per_game(
    ~kept | mismatched, fresh.replace(extra_data=None), graph.replace(extra_data=None)
  )
  root_row = fresh.children_prior_logits[:, ROOT_INDEX]
  if graph.compact:
    lowest = jnp.finfo(root_row.dtype).min
    root_row = graph.actions_to_root_row(root_logits.astype(root_row.dtype), lowest)
  return graph.replace(
    children_prior_logits=graph.children_prior_logits.at[:, ROOT_INDEX].set(root_row),
    root_invalid_actions=fresh.root_invalid_actions,
    # The bounds this search was given apply, not the ones the graph was built with.
    value_bounds=fresh.value_bounds,
    node_terminal=graph.node_terminal.at[:, ROOT_INDEX].set(fresh.node_terminal[:, ROOT_INDEX]),
    # Stamps only grow, so old marks cannot match a new playout; cleared anyway so
    # that a graph edited by hand (or from an older version) starts clean.
    path_marks=jnp.full_like(graph.path_marks, -1),
    root_key_mismatches=root_key_mismatches,
    extra_data=extra_data,
  )


def empty_graph(
  root: types.RootFnOutput,
  *,
  capacity: int,
  num_slots: int,
  root_key: chex.Array,
  root_invalid_actions: chex.Array,
  value_bounds: tuple[float, float] | None = None,
  extra_data: chex.ArrayTree = None,
  recycle: Graph | None = None,
  max_children: int | None = None,
  count_unproven: bool = False,
) -> Graph:
  """A graph whose only node is the root.

  Args:
    root: the root evaluation, `[B, A]` logits, `[B]` value, `[B, ...]` embedding.
    capacity: `N`, nodes per game including the root.
    num_slots: `C`, hash slots per game, a power of two (0 in tree mode).
    root_key: `[B, L]` uint32 key of the root state (`L = 0` in tree mode).
    root_invalid_actions: `[B, A]` bool. A root whose every action is invalid is
      terminal: playouts end there and no node is ever added.
    value_bounds: `(lowest, highest)` or None (unbounded).
    recycle: a graph of these shapes whose arrays are overwritten instead of
      allocating new ones (see `clear_used_rows`); the result is the same. Ignored
      when the whole graph fits in one clearing block (`_CLEAR_BYTES`).
    max_children: `K`, compact edges (`GraphOptions.max_children`), or None (dense).
    count_unproven: keep `Graph.node_unproven_edges` (`GraphOptions.proof_first`).
  """
  batch_size, num_actions = root.prior_logits.shape
  value_dtype = root.value.dtype
  root_rows, slots = _root_rows(root, root_key, root_invalid_actions, max_children, count_unproven)
  edge_dtypes = _edge_dtypes(value_dtype)
  width = compact.slot_width(max_children, num_actions)
  # A graph that fits in one clearing block is as cheap to fill anew, and XLA then
  # writes new buffers directly instead of broadcasting and copying into old ones.
  if recycle is None or clear_block_rows(recycle) >= capacity:
    empty_tables = _filled_tables(root, root_rows, edge_dtypes, capacity, width)
    hash_slots = jnp.full((batch_size, num_slots), -1, jnp.int32)
  else:
    empty_tables = clear_used_rows(recycle)
    hash_slots = jnp.full_like(recycle.hash_slots, -1)

  def set_root(table: chex.Array, root_entry: chex.Numeric) -> chex.Array:
    return table.at[:, ROOT_INDEX].set(jnp.asarray(root_entry, table.dtype))

  tables = {name: set_root(empty_tables[name], entry) for name, (entry, _) in root_rows.items()}
  tables["embeddings"] = jax.tree_util.tree_map(
    set_root, empty_tables["embeddings"], root.embedding
  )
  tables.setdefault("children_actions", None)
  tables.setdefault("node_dropped_actions", None)
  tables.setdefault("node_unproven_edges", None)
  for name in edge_dtypes:
    tables[name] = empty_tables[name]
  for name in COUNTER_FIELDS:
    tables[name] = jnp.zeros((batch_size,), jnp.int32)
  if slots is not None:
    tables["dropped_actions"] = slots.dropped
  if num_slots:
    start = (root_key[:, 0] & jnp.uint32(num_slots - 1)).astype(jnp.int32)
    hash_slots = batched.set_at(hash_slots, start, ROOT_INDEX)
  lowest, highest = (-jnp.inf, jnp.inf) if value_bounds is None else value_bounds
  return Graph(
    **tables,
    hash_slots=hash_slots,
    num_nodes=jnp.ones((batch_size,), jnp.int32),
    root_invalid_actions=jnp.asarray(root_invalid_actions, jnp.bool_),
    value_bounds=jnp.broadcast_to(jnp.asarray([lowest, highest], value_dtype), (batch_size, 2)),
    extra_data=extra_data,
  )


def _root_rows(
  root: types.RootFnOutput,
  root_key: chex.Array,
  root_invalid_actions: chex.Array,
  max_children: int | None,
  count_unproven: bool,
) -> tuple[dict[str, tuple[chex.Array, Any]], compact.Slots | None]:
  """`({name: (the root's entry [B, ...], dtype)}, slots)` of every node table but
  the embeddings (the slot tables in a dense graph, and `node_unproven_edges` unless
  `count_unproven`) in a new graph, and the root's compact `Slots` (None in a dense
  graph)."""
  batch_size = root.prior_logits.shape[0]
  value_dtype = root.value.dtype
  root_terminal = jnp.all(root_invalid_actions, axis=-1)
  slots = None
  prior_logits = root.prior_logits
  if max_children is not None:
    slots = compact.compact_row(prior_logits, root_invalid_actions, max_children)
    prior_logits = slots.logits
  rows = {
    "node_visits": (jnp.ones((batch_size,)), jnp.int32),
    "node_evaluations": (jnp.ones((batch_size,)), jnp.int32),
    "raw_values": (root.value, value_dtype),
    "node_values": (root.value, value_dtype),
    "node_keys": (root_key, jnp.uint32),
    "node_terminal": (root_terminal, jnp.bool_),
    "node_proven": (jnp.zeros((batch_size,)), jnp.bool_),
    "proven_values": (jnp.zeros((batch_size,)), value_dtype),
    "path_marks": (jnp.full((batch_size,), NODE_FIELDS["path_marks"]), jnp.int32),
    "children_prior_logits": (prior_logits, prior_logits.dtype),
  }
  if slots is not None:
    rows["children_actions"] = (slots.actions, jnp.int32)
    rows["node_dropped_actions"] = (slots.dropped, jnp.int32)
  if count_unproven:
    # Every legal edge of the root is unproven (compact slots hold valid actions only).
    legal = positive_probability(prior_logits)
    if slots is None:
      legal &= ~root_invalid_actions
    rows["node_unproven_edges"] = (jnp.sum(legal, axis=-1), jnp.int32)
  return rows, slots


def _edge_dtypes(value_dtype: Any) -> dict[str, Any]:
  """`{name: dtype}` of every edge table, values in `value_dtype`."""
  return {
    "children_index": jnp.int32,
    "edge_visits": jnp.int32,
    "edge_rewards": value_dtype,
    "edge_discounts": value_dtype,
    "edge_values": value_dtype,
    "edge_non_finite": jnp.bool_,
  }


def _filled_tables(
  root: types.RootFnOutput,
  root_rows: dict[str, tuple[chex.Array, Any]],
  edge_dtypes: dict[str, Any],
  capacity: int,
  width: int,
) -> dict[str, Any]:
  """Every node and edge table of a new graph of `capacity` nodes and `width` edges
  per node, each filled with its empty value (the root's row not yet set)."""
  batch_size = root.prior_logits.shape[0]
  empty_tables = {
    name: jnp.full((batch_size, capacity) + jnp.shape(entry)[1:], NODE_FIELDS[name], dtype)
    for name, (entry, dtype) in root_rows.items()
  }
  empty_tables["embeddings"] = jax.tree_util.tree_map(
    lambda leaf: jnp.full(
      (batch_size, capacity) + leaf.shape[1:], NODE_FIELDS["embeddings"], leaf.dtype
    ),
    root.embedding,
  )
  for name, dtype in edge_dtypes.items():
    empty_tables[name] = jnp.full((batch_size, capacity, width), EDGE_FIELDS[name], dtype)
  return empty_tables


# Rows written per step by `clear_used_rows`: at most this many bytes over all tables.
_CLEAR_BYTES = 1 << 22


def clear_block_rows(graph: Graph) -> int:
  """Rows per block of `clear_used_rows`: as many as fit in `_CLEAR_BYTES` over all
  node and edge tables of all games, at least one, at most the capacity."""
  tables = [getattr(graph, name) for name in ROW_FIELDS]
  leaves = jax.tree_util.tree_leaves(tables)
  row_bytes = graph.batch_size * sum(
    math.prod(leaf.shape[2:]) * leaf.dtype.itemsize for leaf in leaves
  )
  return max(1, min(graph.capacity, _CLEAR_BYTES // max(row_bytes, 1)))


def clear_used_rows(graph: Graph) -> dict[str, Any]:
  """Every node and edge table of `graph` (a dict by field name, `embeddings` a
  pytree) with its empty values written over rows `[0, max_b num_nodes[b])`.

  Rows from `num_nodes` up must hold their empty values already, as in every graph
  a search, `reroot` or `empty_like` returns; the cost is then proportional to the
  rows used, not to the capacity. Rows are cleared in blocks of at most
  `_CLEAR_BYTES` over all tables, the last block ending at the capacity (blocks may
  overlap: every row below the used count is cleared, rows above it are empty).
  Under an outer `jax.vmap` the loop's length is batched, and JAX then selects over
  whole tables at every block: the result is the same, the saving is lost.
  """
  tables = {name: getattr(graph, name) for name in ROW_FIELDS}
  batch_size, capacity = graph.batch_size, graph.capacity
  block = clear_block_rows(graph)

  def clear_block(index: chex.Array, tables: dict[str, Any]) -> dict[str, Any]:
    start = jnp.minimum(index * block, capacity - block)

    def clear(table: chex.Array, fill: chex.Numeric) -> chex.Array:
      empty = jnp.full((batch_size, block) + table.shape[2:], fill, table.dtype)
      return jax.lax.dynamic_update_slice_in_dim(table, empty, start, axis=1)

    return {
      name: jax.tree_util.tree_map(lambda table, fill=fill: clear(table, fill), tables[name])
      for name, fill in ROW_FIELDS.items()
    }

  rows_used = jnp.max(graph.num_nodes)
  return jax.lax.fori_loop(0, (rows_used + block - 1) // block, clear_block, tables)
