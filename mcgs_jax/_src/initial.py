"""The graph a search starts from: a fresh one holding the root, a graph it continues,
or a fresh one written into the arrays of a graph it recycles."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax._src import checks, hashing, numerics, types
from mcgs_jax._src.graph import ROOT_INDEX, Graph, empty_graph
from mcgs_jax._src.options import MAX_CAPACITY, GraphOptions
from mcgs_jax._src.per_game import where_per_game


def finite_root(
  root: types.RootFnOutput, invalid_actions: chex.Array
) -> tuple[types.RootFnOutput, chex.Array]:
  """`(root, non_finite [B] bool)`: the root with a non-finite value (or one beyond
  `small_enough_to_sum`) taken as 0 and prior logits holding a NaN or +inf, or no
  finite entry, taken as uniform over the valid actions, and which games needed
  either."""
  value, logits = jnp.asarray(root.value), jnp.asarray(root.prior_logits)
  bad_value = ~numerics.small_enough_to_sum(value)
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
