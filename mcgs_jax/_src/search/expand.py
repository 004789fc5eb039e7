"""Expansion, the second step of a simulation: the last edge of every playout is
evaluated (`expand`) and linked to its child (`link`): an existing node of the same
state (a transposition), a new node, or none when the graph is full; evaluations
that are not finite drop their playout, and with `fold_evaluations` an evaluation of
an existing node is averaged into it.
"""

import chex
import jax
import jax.numpy as jnp

from mcgs_jax._src import checks, hashing, rows, types
from mcgs_jax._src.batched import drop_unless, set_at, take
from mcgs_jax._src.graph import NODE_FIELDS, ROOT_INDEX, Graph
from mcgs_jax._src.options import DEFAULT_OPTIONS, GraphOptions
from mcgs_jax._src.search.leaf_evaluation import (
  Evaluation,
  finite_outputs,
  fold_evaluation,
  stored_evaluation,
)
from mcgs_jax._src.search.path import Path, last_edge


def expand(
  params: types.Params,
  rng_key: chex.PRNGKey,
  graph: Graph,
  path: Path,
  *,
  recurrent_fn: types.RecurrentFn,
  options: GraphOptions = DEFAULT_OPTIONS,
) -> tuple[Graph, Path]:
  """Evaluates the last edge of every path and links it to its child.

  One batched `recurrent_fn` call for all games. Where the last edge is unexpanded,
  the new state is looked up by its key (graph mode): found, the edge links to the
  existing node (a transposition hit); not found, a node is added, or, when the
  graph is full, nothing is and the playout stops one edge short (counted in
  `capacity_overflows`). Games whose last edge already has a child only get their
  `path.leaf` set. With `solver`, a new terminal node is proven (value 0). See
  `link` for non-finite evaluations and `fold_evaluations`.

  Returns:
    `(graph, path)` with `path.leaf`, `path.leaf_is_new` and `path.leaf_folded` set.
  """
  parent, edge = last_edge(path)
  parent_embedding = jax.tree_util.tree_map(lambda x: take(x, parent), graph.embeddings)
  output, embedding = checks.unpack_recurrent_result(
    recurrent_fn(params, rng_key, edge_action(graph, parent, edge), parent_embedding)
  )
  checks.check_recurrent_output(
    output, embedding, parent_embedding, graph.batch_size, graph.num_actions
  )
  return link(graph, path, output, embedding, options=options)


def edge_action(graph: Graph, node: chex.Array, edge: chex.Array) -> chex.Array:
  """`[B]` int32, the action of the edge `(node [B], edge [B])`: `edge` itself in a
  dense graph, the slot's action with compact edges (0 for an empty slot, which
  selection never takes)."""
  if not graph.compact:
    return edge
  return jnp.maximum(take(graph.children_actions, (node, edge)), 0)


@chex.dataclass(frozen=True)
class _Lookup:
  """A new state looked up in the graph by its key (`L` key lanes, `C` hash slots)."""

  key: chex.Array  # [B, L] uint32, the state's key (the root's, unused, in tree mode).
  found: chex.Array  # [B] int32, the node holding that key; -1 when none (tree mode).
  free_slot: chex.Array  # [B] int32 in [0, C), a slot for a new node; -1 when none.


def _look_up(graph: Graph, embedding: types.Embedding, options: GraphOptions) -> _Lookup:
  """Finds the node of the state `embedding [B, ...]` by its key: a `hashing.probe`
  over `options.probe_window` slots in graph mode; none in tree mode."""
  batch_size = graph.batch_size
  if not options.transpositions:
    none = jnp.full((batch_size,), -1, jnp.int32)
    return _Lookup(key=graph.node_keys[:, 0], found=none, free_slot=none)
  key = checks.check_key(options.resolved_hash_fn(embedding), batch_size)
  if key.shape[1] != graph.node_keys.shape[2]:
    raise ValueError(
      f"hash_fn returned {key.shape[1]} lanes; the root key has {graph.node_keys.shape[2]}"
    )
  # The table may be smaller than the window asked for (a small capacity).
  probe_window = min(options.probe_window, graph.hash_slots.shape[1])
  found, free_slot = jax.vmap(hashing.probe, in_axes=(0, 0, 0, None))(
    graph.hash_slots, graph.node_keys, key, probe_window
  )
  return _Lookup(key=key, found=found, free_slot=free_slot)


@chex.dataclass(frozen=True)
class _Outcomes:
  """What `link` does with the last edge of every path; every field `[B]` bool."""

  collided: chex.Array  # Dropped: another path of the step expanded the edge first.
  non_finite: chex.Array  # Dropped: `recurrent_fn`'s output is not finite.
  needs_node: chex.Array  # Kept, and the edge has no child yet.
  linked: chex.Array  # The edge links to an existing node of the same key.
  create: chex.Array  # The edge links to a new node.
  overflow: chex.Array  # The edge gets no child: the graph is full.


def _dropped_playouts(
  path: Path, child: chex.Array, output: types.RecurrentFnOutput
) -> tuple[chex.Array, chex.Array]:
  """`(collided [B], non_finite [B])`: the playouts `link` drops whole, those whose
  unexpanded last edge another path of the step has linked since (its child is
  `child [B]`), and those whose output is not finite (`finite_outputs`)."""
  collided = path.last_edge_unexpanded & (child >= 0)
  non_finite = (path.length > 0) & ~collided & ~finite_outputs(output)
  return collided, non_finite


def _outcomes(
  graph: Graph,
  path: Path,
  child: chex.Array,
  lookup: _Lookup,
  *,
  collided: chex.Array,
  non_finite: chex.Array,
) -> _Outcomes:
  """Sorts the last edge of every path, whose child is `child [B]` (-1 when
  unexpanded) and whose new state was looked up as `lookup`, into `_Outcomes`;
  `path` has the dropped playouts (`_dropped_playouts`) at length 0."""
  needs_node = (path.length > 0) & (child < 0)
  linked = needs_node & (lookup.found >= 0)
  has_room = graph.num_nodes < graph.capacity
  return _Outcomes(
    collided=collided,
    non_finite=non_finite,
    needs_node=needs_node,
    linked=linked,
    create=needs_node & ~linked & has_room,
    overflow=needs_node & ~linked & ~has_room,
  )


def _new_node_rows(
  graph: Graph, lookup: _Lookup, evaluation: Evaluation, options: GraphOptions
) -> dict[str, chex.Array]:
  """The rows a new node gets, by node table (`[B, ...]` each; every table of
  `NODE_FIELDS` the graph has, but `embeddings`)."""
  new_rows = {
    "node_visits": 1,
    "raw_values": evaluation.value,
    "node_values": evaluation.value,
    "node_keys": lookup.key,
    "node_terminal": evaluation.terminal,
    "node_proven": evaluation.terminal & options.solver,
    "proven_values": 0.0,
    "path_marks": NODE_FIELDS["path_marks"],
    "node_evaluations": 1,
    "children_prior_logits": evaluation.prior_logits,
  }
  if evaluation.children_actions is not None:
    new_rows["children_actions"] = evaluation.children_actions
    new_rows["node_dropped_actions"] = evaluation.dropped_actions
  if graph.node_unproven_edges is not None:
    # A new node's legal edges are all unexpanded; a terminal node has none.
    legal = jnp.sum(rows.positive_probability(evaluation.prior_logits), axis=-1)
    new_rows["node_unproven_edges"] = jnp.where(evaluation.terminal, 0, legal)
  optional = {"children_actions", "node_dropped_actions", "node_unproven_edges"}
  written = set(new_rows) | {"embeddings"} | optional
  assert written == set(NODE_FIELDS), "a node table is not set"
  return new_rows


def _insert_hash_slot(graph: Graph, create: chex.Array, lookup: _Lookup) -> Graph:
  """Puts the new node (row `num_nodes`) of the games where `create [B]` in its
  free hash slot, or counts it in `dropped_inserts` where the probe window was
  full."""
  insert = create & (lookup.free_slot >= 0)
  slot = drop_unless(insert, lookup.free_slot, graph.hash_slots.shape[1])
  return graph.replace(
    hash_slots=set_at(graph.hash_slots, slot, graph.num_nodes, mode="drop"),
    dropped_inserts=graph.dropped_inserts + (create & (lookup.free_slot < 0)),
  )


def _write_rows(
  graph: Graph,
  parent: chex.Array,
  action: chex.Array,
  child: chex.Array,
  *,
  outcomes: _Outcomes,
  lookup: _Lookup,
  evaluation: Evaluation,
  embedding: types.Embedding,
  options: GraphOptions,
) -> Graph:
  """Writes a new node's rows at row `num_nodes` where `outcomes.create`, the edge
  `(parent [B], action [B])` to `child [B]` where it is created or linked, and in
  graph mode the new node's hash slot (`dropped_inserts` where the probe window was
  full). Leaves `num_nodes` and the other counters to the caller."""
  create = outcomes.create
  new_node = drop_unless(create, graph.num_nodes, graph.capacity)
  edge_parent = drop_unless(outcomes.linked | create, parent, graph.capacity)

  def set_node(table: chex.Array, values: chex.Array) -> chex.Array:
    return set_at(table, new_node, values, mode="drop")

  def set_edge(table: chex.Array, values: chex.Array) -> chex.Array:
    return set_at(table, (edge_parent, action), values, mode="drop")

  new_rows = _new_node_rows(graph, lookup, evaluation, options)
  graph = graph.replace(
    **{name: set_node(getattr(graph, name), row) for name, row in new_rows.items()},
    embeddings=jax.tree_util.tree_map(set_node, graph.embeddings, embedding),
    children_index=set_edge(graph.children_index, child),
    edge_rewards=set_edge(graph.edge_rewards, evaluation.reward),
    edge_discounts=set_edge(graph.edge_discounts, evaluation.discount),
    edge_non_finite=set_edge(graph.edge_non_finite, False),
  )
  if not options.transpositions:
    return graph
  return _insert_hash_slot(graph, create, lookup)


def _count_outcomes(
  graph: Graph,
  parent: chex.Array,
  action: chex.Array,
  child: chex.Array,
  outcomes: _Outcomes,
  dropped_actions: chex.Array,
) -> Graph:
  """Adds `outcomes` to the graph's counters (`num_nodes` included; the new nodes'
  `dropped_actions [B]` too) and marks the unexpanded edge `(parent [B], action
  [B])`, whose child is `child [B]`, in `edge_non_finite` where its output was not
  finite."""
  mark_non_finite = drop_unless(outcomes.non_finite & (child < 0), parent, graph.capacity)
  create = outcomes.create
  return graph.replace(
    edge_non_finite=set_at(graph.edge_non_finite, (mark_non_finite, action), True, mode="drop"),
    num_nodes=graph.num_nodes + create,
    transposition_hits=graph.transposition_hits + outcomes.linked,
    capacity_overflows=graph.capacity_overflows + outcomes.overflow,
    parallel_collisions=graph.parallel_collisions + outcomes.collided,
    non_finite_evaluations=graph.non_finite_evaluations + outcomes.non_finite,
    dropped_actions=graph.dropped_actions + jnp.where(create, dropped_actions, 0),
  )


def link(
  graph: Graph,
  path: Path,
  output: types.RecurrentFnOutput,
  embedding: types.Embedding,
  *,
  options: GraphOptions = DEFAULT_OPTIONS,
) -> tuple[Graph, Path]:
  """The second half of `expand`: links the last edge of every path to its child,
  given what `recurrent_fn` returned for that edge (`[B]` output, `[B, ...]`
  embedding). Reads the graph afresh, so paths linked one after another see each
  other's new nodes.

  Playouts dropped whole (length 0, `leaf` -1, nothing counted, so one playout is
  never counted twice and no bad number reaches a value):
  - a path whose last edge was unexpanded when selected but has a child now was
    beaten to it by another path of the same step (`num_parallel`): counted in
    `parallel_collisions`;
  - a path whose output is not finite (`finite_outputs`): counted in
    `non_finite_evaluations`; an unexpanded last edge gets no child and is marked
    in `edge_non_finite`, so selection avoids it from then on.

  With `options.fold_evaluations`, an evaluation of a state that already has a
  non-terminal, unproven node (a transposition hit, or a playout that stopped at an
  existing child) is added to that node: `k(n) += 1`, `U(n)` becomes the mean of
  its `k(n)` evaluations (`path.leaf_folded`; backup recomputes the node), counted
  in `folded_evaluations`. Without it that evaluation is dropped (`k(n)` stays 1).
  """
  parent, action = last_edge(path)
  child = take(graph.children_index, (parent, action))
  collided, non_finite = _dropped_playouts(path, child, output)
  dropped = collided | non_finite
  path = path.replace(length=jnp.where(dropped, 0, path.length))
  evaluation = stored_evaluation(graph, output, options)
  lookup = _look_up(graph, embedding, options)
  outcomes = _outcomes(graph, path, child, lookup, collided=collided, non_finite=non_finite)
  linked, create = outcomes.linked, outcomes.create
  new_child = jnp.where(linked, lookup.found, graph.num_nodes)
  leaf = jnp.where(
    path.length == 0,
    jnp.where(dropped, -1, ROOT_INDEX),
    jnp.where(outcomes.needs_node, jnp.where(outcomes.overflow, -1, new_child), child),
  )
  graph = _write_rows(
    graph,
    parent,
    action,
    new_child,
    outcomes=outcomes,
    lookup=lookup,
    evaluation=evaluation,
    embedding=embedding,
    options=options,
  )
  graph = _count_outcomes(graph, parent, action, child, outcomes, evaluation.dropped_actions)
  folded = jnp.zeros((graph.batch_size,), jnp.bool_)
  if options.fold_evaluations:
    graph, folded = fold_evaluation(
      graph,
      jnp.where(linked, lookup.found, child),
      (path.length > 0) & (linked | (child >= 0)),
      evaluation.terminal,
      evaluation.value,
    )
  return graph, path.replace(leaf=leaf.astype(jnp.int32), leaf_is_new=create, leaf_folded=folded)
