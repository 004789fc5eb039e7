"""One simulation is `select`, `expand`, `backup`; `search` runs many.

All three work on the whole batch. Per-game work (the selection rules, the hash
probe) is written for one game and lifted with `jax.vmap`; the loops over depth run
at batch level with a scalar trip condition, so XLA never selects over the graph
arrays per game, and the cost of one simulation does not grow with capacity. Every
read and write of a table at a row that differs per game goes through `batched`
(game by game), so a batch sharded over devices on its games axis searches with no
gather of the tables between devices.
"""

import functools

import chex
import jax
import jax.numpy as jnp

from mcgs_jax._src import checks, hashing, proofs, random_bits, types
from mcgs_jax._src import options as options_lib
from mcgs_jax._src.batched import add_at, set_at, take
from mcgs_jax._src.graph import NODE_FIELDS, ROOT_INDEX, Graph
from mcgs_jax._src.initial import check_inputs, initial_graph, summable
from mcgs_jax._src.options import GraphOptions
from mcgs_jax._src.selection import masked_argmax

_DEFAULT_OPTIONS = GraphOptions()

# `fold_in` constant that derives the stop_leak coin from a game's selection key at
# one depth, so the coin is independent of the key the selection rule receives.
_LEAK_STREAM = 0x6C65616B


@chex.dataclass(frozen=True)
class Path:
  """The playout of one simulation in every game (`D` = longest path allowed).

  nodes: `[B, D]` int32, node at depth d, valid for `d < length`.
  actions: `[B, D]` int32, action chosen at depth d, valid for `d < length`.
  length: `[B]` int32, edges taken; 0 when the root is terminal.
  leaf: `[B]` int32, node where the playout ended (set by `link`): the child of
    the last edge, the root when `length == 0`, -1 when the node the last edge needed
    did not fit in the graph (that edge is then not counted).
  leaf_is_new: `[B]` bool, the leaf was added to the graph by this simulation.
  expands: `[B]` bool, the last edge had no child when it was selected.
  leaf_folded: `[B]` bool, the evaluation was added to the existing leaf as one
    more sample of its value (`fold_evaluations`); backup recomputes the leaf.
  """

  nodes: chex.Array
  actions: chex.Array
  length: chex.Array
  leaf: chex.Array
  leaf_is_new: chex.Array
  expands: chex.Array
  leaf_folded: chex.Array


@chex.dataclass(frozen=True)
class _Descent:
  """Where `select` is in every game after `depth` steps (`D` = longest path
  allowed, `N` = capacity)."""

  depth: chex.Array  # [] int32, edges chosen so far (the same in every game).
  node: chex.Array  # [B] int32, node the next edge leaves from.
  active: chex.Array  # [B] bool, the playout goes on from `node`.
  keys: chex.Array  # [B] per-game keys, split once per depth.
  nodes: chex.Array  # [B, D] int32, `Path.nodes` so far.
  actions: chex.Array  # [B, D] int32, `Path.actions` so far.
  length: chex.Array  # [B] int32, `Path.length` so far.
  path_marks: chex.Array  # [B, N] int32, `graph.path_marks` with this path stamped.


def _drop_unless(condition: chex.Array, index: chex.Array, out_of_bounds: int) -> chex.Array:
  """`index` where `condition`, else an index that a `mode='drop'` scatter ignores."""
  return jnp.where(condition, index, out_of_bounds)


def _stop_rule_ends_playout(
  graph: Graph,
  node: chex.Array,
  action: chex.Array,
  child: chex.Array,
  keys: chex.Array,
  options: GraphOptions,
) -> chex.Array:
  """`[B]` bool: the playout ends at `child`, reached from `node` by `action`, by
  `options.stop_rule` (see `GraphOptions`). Every rule needs `N(child) > N(n, a)`
  (visits came through other parents) before it stops, where `N(child)` counts
  `1 + sum_b N(child, b)`: the child's folded evaluations (`fold_evaluations`) are
  left out, or a stop, which folds one more, would never let the edge catch up.

  - `"catch_up"` stops there, except that with probability `stop_leak` (a coin per
    game per depth, drawn from that game's selection key) the playout continues;
  - `"value_lag"` stops there only when `|edge_values(n, a) - Q(n, a)| >
    stop_epsilon`: `Q(n)` still reflects an edge value the child has since moved
    away from. The backup that follows recomputes `n` from the live `Q(n, a)`, which
    is the correction;
  - `"never"` does not stop.

  Args:
    graph: the batch of graphs.
    node, action, child: `[B]` int32, the edge and its (existing) child.
    keys: `[B]` per-game keys of this depth.
    options: `GraphOptions`.
  """
  if options.stop_rule == "never":
    return jnp.zeros((graph.batch_size,), jnp.bool_)
  # k(child) = 1 without folding: then this is N(child) itself.
  edge = (node, action)
  child_visits = 1 + take(graph.node_visits, child) - take(graph.node_evaluations, child)
  caught_up = child_visits > take(graph.edge_visits, edge)
  if options.stop_rule == "catch_up":
    if options.stop_leak == 0:
      return caught_up
    coins = jax.vmap(lambda key: jax.random.uniform(jax.random.fold_in(key, _LEAK_STREAM)))(keys)
    return caught_up & ~(coins < options.stop_leak)
  reward, discount = take(graph.edge_rewards, edge), take(graph.edge_discounts, edge)
  live = reward + discount * take(graph.node_values, child)
  lag = jnp.abs(take(graph.edge_values, edge) - live)
  return caught_up & (lag > options.stop_epsilon)


def _usable_actions(
  graph: Graph, node: chex.Array, actions: chex.Array, depth: chex.Array
) -> chex.Array:
  """`actions [B]`, where a rule chose an edge marked `edge_non_finite`, replaced by
  the valid unmarked action with the highest prior logit (unchanged when there is
  none). The built-in rules never choose such edges; this keeps rules that do not
  mask them (custom rules, Gumbel's interior rule) from spending every playout on a
  state that cannot be evaluated."""
  non_finite = take(graph.edge_non_finite, node)  # [B, A]
  blocked = non_finite | (graph.root_invalid_actions & (depth == 0))
  fallback = masked_argmax(take(graph.children_prior_logits, node), blocked)
  replace = take(non_finite, actions) & jnp.any(~blocked, axis=-1)
  return jnp.where(replace, fallback, actions)


def _split_keys(keys: chex.Array) -> tuple[chex.Array, chex.Array]:
  """`[B]` keys -> `([B] keys to go on with, [B] keys for this depth)`."""
  pairs = random_bits.split_each(keys)
  return pairs[:, 0], pairs[:, 1]


def _take_edges(
  graph: Graph,
  descent: _Descent,
  actions: chex.Array,
  *,
  stamp: chex.Array,
  max_depth: int,
  options: GraphOptions,
) -> _Descent:
  """`descent` one depth further: every game records `actions [B]` (made usable)
  at this depth, and an active playout moves to the child unless it ends there."""
  depth, node = descent.depth, descent.node
  actions = _usable_actions(graph, node, actions, depth)
  child = take(graph.children_index, (node, actions))
  known_child = jnp.maximum(child, 0)
  proceed = (
    descent.active
    & (child >= 0)
    & ~take(graph.node_terminal, known_child)
    & (depth + 1 < max_depth)
  )
  if options.solver:
    # A child whose proof is only stale (its children settle it) counts as proven:
    # the playout stops there and backup records the proof.
    provable, _ = jax.vmap(proofs.prove_node)(graph, known_child)
    proceed &= ~(take(graph.node_proven, known_child) | provable)
  if options.transpositions:
    proceed &= take(descent.path_marks, known_child) != stamp
    proceed &= ~_stop_rule_ends_playout(graph, node, actions, known_child, descent.keys, options)
  # One write per game, rows in order: declaring it lets XLA update the marks in
  # place; without it the table was copied at every step (measured: the per-
  # simulation cost doubled from capacity 65 to 1025). Written game by game, the
  # other scatters of one row per game get the same flags from XLA itself; these
  # stay declared, since the in-place update depends on them.
  path_marks = set_at(
    descent.path_marks,
    _drop_unless(proceed, known_child, graph.capacity),
    stamp,
    mode="drop",
    unique_indices=True,
    indices_are_sorted=True,
  )
  return descent.replace(
    depth=depth + 1,
    node=jnp.where(proceed, child, node),
    active=proceed,
    nodes=descent.nodes.at[:, depth].set(node),
    actions=descent.actions.at[:, depth].set(actions),
    length=jnp.where(descent.active, depth + 1, descent.length),
    path_marks=path_marks,
  )


def select(
  rng_key: chex.PRNGKey,
  graph: Graph,
  *,
  root_action_selection_fn: types.RootActionSelectionFn,
  interior_action_selection_fn: types.InteriorActionSelectionFn,
  max_depth: int,
  options: GraphOptions = _DEFAULT_OPTIONS,
) -> tuple[Graph, Path]:
  """Descends from the root of every game until the playout ends.

  A playout ends after choosing an edge whose child is not expanded, is terminal, is
  already on this path (cycle guard), is visited more often than the edge
  (`N(child) > N(n, a)`, as `options.stop_rule` says: `_stop_rule_ends_playout`), is
  proven (`options.solver`), or at `max_depth` edges. An edge marked
  `edge_non_finite` is taken only when every valid action is marked
  (`_usable_actions`); its playout is then dropped again.

  Args:
    rng_key: one key; split into one per game (as mctx does).
    graph: the batch of graphs.
    root_action_selection_fn: `(key, graph, node) -> action`, on one game.
    interior_action_selection_fn: `(key, graph, node, depth) -> action`, on one game.
    max_depth: most edges in a path.
    options: `GraphOptions`; `transpositions` enables the cycle guard and the stop
      rule, `solver` ends playouts at proven children (their value is exact).

  Returns:
    `(graph, path)`: the graph with the path's nodes stamped in `path_marks` and
    `playouts_started` advanced, and the `Path` (its `leaf` still unset).
  """
  batch_size = graph.batch_size
  buffer_depth = min(max_depth, graph.capacity)
  # A stamp is never reused: root visits would be (a dropped playout does not
  # advance them), and the next playout would stop at nodes falsely on its path.
  stamp = graph.playouts_started
  take_edges = functools.partial(
    _take_edges, graph, stamp=stamp, max_depth=max_depth, options=options
  )
  keys, selection_keys = _split_keys(random_bits.split(rng_key, batch_size))
  root = jnp.full((batch_size,), ROOT_INDEX, jnp.int32)
  root_actions = jax.vmap(root_action_selection_fn, in_axes=(0, 0, 0))(selection_keys, graph, root)
  descent = _Descent(
    depth=jnp.int32(0),
    node=root,
    active=~graph.node_terminal[:, ROOT_INDEX],
    keys=keys,
    nodes=jnp.zeros((batch_size, buffer_depth), jnp.int32),
    actions=jnp.zeros((batch_size, buffer_depth), jnp.int32),
    length=jnp.zeros((batch_size,), jnp.int32),
    path_marks=graph.path_marks.at[:, ROOT_INDEX].set(stamp),
  )
  descent = take_edges(descent, root_actions)

  def keep_going(descent: _Descent) -> chex.Array:
    return (descent.depth < buffer_depth) & jnp.any(descent.active)

  def interior_step(descent: _Descent) -> _Descent:
    keys, selection_keys = _split_keys(descent.keys)
    actions = jax.vmap(interior_action_selection_fn, in_axes=(0, 0, 0, None))(
      selection_keys, graph, descent.node, descent.depth
    )
    return take_edges(descent.replace(keys=keys), actions)

  descent = jax.lax.while_loop(keep_going, interior_step, descent)
  parent, action = _last_edge(descent.nodes, descent.actions, descent.length)
  path = Path(
    nodes=descent.nodes,
    actions=descent.actions,
    length=descent.length,
    leaf=jnp.where(descent.length == 0, ROOT_INDEX, -1).astype(jnp.int32),
    leaf_is_new=jnp.zeros((batch_size,), jnp.bool_),
    expands=(descent.length > 0) & (take(graph.children_index, (parent, action)) < 0),
    leaf_folded=jnp.zeros((batch_size,), jnp.bool_),
  )
  graph = graph.replace(path_marks=descent.path_marks, playouts_started=graph.playouts_started + 1)
  return graph, path


def expand(
  params: types.Params,
  rng_key: chex.PRNGKey,
  graph: Graph,
  path: Path,
  *,
  recurrent_fn: types.RecurrentFn,
  options: GraphOptions = _DEFAULT_OPTIONS,
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
  parent, action = last_edge(path)
  parent_embedding = jax.tree_util.tree_map(lambda x: take(x, parent), graph.embeddings)
  output, embedding = checks.unpack_recurrent_result(
    recurrent_fn(params, rng_key, action, parent_embedding)
  )
  checks.check_recurrent_output(
    output, embedding, parent_embedding, graph.batch_size, graph.num_actions
  )
  return link(graph, path, output, embedding, options=options)


def _last_edge(
  nodes: chex.Array, actions: chex.Array, length: chex.Array
) -> tuple[chex.Array, chex.Array]:
  """`last_edge` of the path held in `nodes [B, D]`, `actions [B, D]`, `length [B]`."""
  last = jnp.maximum(length - 1, 0)
  return take(nodes, last), take(actions, last)


def last_edge(path: Path) -> tuple[chex.Array, chex.Array]:
  """`(parent [B], action [B])`: the last edge of every path (garbage where
  `length == 0`)."""
  return _last_edge(path.nodes, path.actions, path.length)


def finite_outputs(output: types.RecurrentFnOutput) -> chex.Array:
  """`[B]` bool: `recurrent_fn`'s output for a game can be used. Reward and discount
  must be finite; unless the discount is 0 (a terminal state, whose value and prior
  the search never reads), so must the value, `reward + discount * value` and the
  prior logits: no NaN, no +inf, and at least one finite logit (-inf is a zero
  prior, as an illegal action). "Finite" for the reward and value means `summable`:
  no larger than sqrt(largest float); the discount must lie in [-1, 1] (a finite
  discount of 1e10 would compound along a path until Q overflowed). Within those,
  no Q computed from them overflows."""
  reward, discount = jnp.asarray(output.reward), jnp.asarray(output.discount)
  value = jnp.asarray(output.value)
  logits = jnp.asarray(output.prior_logits)
  # `<= 1` is False for NaN too.
  step = summable(reward) & (jnp.abs(discount) <= 1)
  # `logits < inf` is False for NaN too.
  evaluation = (
    summable(value)
    & summable(reward + discount * value)
    & jnp.all(logits < jnp.inf, axis=-1)
    & jnp.any(jnp.isfinite(logits), axis=-1)
  )
  return step & ((discount == 0) | evaluation)


@chex.dataclass(frozen=True)
class _Evaluation:
  """What the graph stores of `recurrent_fn`'s output for the last edge of every
  path, in the graph's dtypes."""

  reward: chex.Array  # [B], the edge's reward.
  discount: chex.Array  # [B], the edge's discount.
  terminal: chex.Array  # [B] bool, the state is terminal (discount 0).
  value: chex.Array  # [B], the state's value; 0 when terminal.
  prior_logits: chex.Array  # [B, A]; no NaN or infinity when terminal.


def _stored_evaluation(graph: Graph, output: types.RecurrentFnOutput) -> _Evaluation:
  """`output` as the graph stores it."""
  discount = jnp.asarray(output.discount, graph.edge_discounts.dtype)
  terminal = discount == 0
  # A terminal state's value never reaches its parents (discount 0); store 0, and
  # no NaN or infinite logit either (a terminal node is never expanded).
  value = jnp.where(terminal, 0.0, output.value).astype(graph.raw_values.dtype)
  prior_logits = jnp.asarray(output.prior_logits, graph.children_prior_logits.dtype)
  return _Evaluation(
    reward=jnp.asarray(output.reward, graph.edge_rewards.dtype),
    discount=discount,
    terminal=terminal,
    value=value,
    prior_logits=jnp.where(terminal[:, None] & ~jnp.isfinite(prior_logits), 0.0, prior_logits),
  )


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


def _write_rows(
  graph: Graph,
  parent: chex.Array,
  action: chex.Array,
  child: chex.Array,
  *,
  create: chex.Array,
  linked: chex.Array,
  lookup: _Lookup,
  evaluation: _Evaluation,
  embedding: types.Embedding,
  options: GraphOptions,
) -> Graph:
  """Writes a new node's rows at row `num_nodes` where `create [B]`, the edge
  `(parent [B], action [B])` to `child [B]` where `create | linked`, and in graph
  mode the new node's hash slot (`dropped_inserts` where the probe window was
  full). Leaves `num_nodes` and the other counters to the caller."""
  new_node = _drop_unless(create, graph.num_nodes, graph.capacity)
  edge_parent = _drop_unless(linked | create, parent, graph.capacity)

  def set_node(table: chex.Array, values: chex.Array) -> chex.Array:
    return set_at(table, new_node, values, mode="drop")

  def set_edge(table: chex.Array, values: chex.Array) -> chex.Array:
    return set_at(table, (edge_parent, action), values, mode="drop")

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
  assert set(new_rows) | {"embeddings"} == set(NODE_FIELDS), "a node table is not set"
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
  insert = create & (lookup.free_slot >= 0)
  slot = _drop_unless(insert, lookup.free_slot, graph.hash_slots.shape[1])
  return graph.replace(
    hash_slots=set_at(graph.hash_slots, slot, graph.num_nodes, mode="drop"),
    dropped_inserts=graph.dropped_inserts + (create & (lookup.free_slot < 0)),
  )


def link(
  graph: Graph,
  path: Path,
  output: types.RecurrentFnOutput,
  embedding: types.Embedding,
  *,
  options: GraphOptions = _DEFAULT_OPTIONS,
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
  collided = path.expands & (child >= 0)
  non_finite = (path.length > 0) & ~collided & ~finite_outputs(output)
  path = path.replace(length=jnp.where(collided | non_finite, 0, path.length))
  needs_node = (path.length > 0) & (child < 0)
  evaluation = _stored_evaluation(graph, output)
  lookup = _look_up(graph, embedding, options)
  linked = needs_node & (lookup.found >= 0)
  has_room = graph.num_nodes < graph.capacity
  create = needs_node & ~linked & has_room
  overflow = needs_node & ~linked & ~has_room
  new_child = jnp.where(linked, lookup.found, graph.num_nodes)
  leaf = jnp.where(
    path.length == 0,
    jnp.where(collided | non_finite, -1, ROOT_INDEX),
    jnp.where(needs_node, jnp.where(overflow, -1, new_child), child),
  )
  graph = _write_rows(
    graph,
    parent,
    action,
    new_child,
    create=create,
    linked=linked,
    lookup=lookup,
    evaluation=evaluation,
    embedding=embedding,
    options=options,
  )
  mark_non_finite = _drop_unless(non_finite & (child < 0), parent, graph.capacity)
  graph = graph.replace(
    edge_non_finite=set_at(graph.edge_non_finite, (mark_non_finite, action), True, mode="drop"),
    num_nodes=graph.num_nodes + create,
    transposition_hits=graph.transposition_hits + linked,
    capacity_overflows=graph.capacity_overflows + overflow,
    parallel_collisions=graph.parallel_collisions + collided,
    non_finite_evaluations=graph.non_finite_evaluations + non_finite,
  )
  folded = jnp.zeros((graph.batch_size,), jnp.bool_)
  if options.fold_evaluations:
    graph, folded = _fold_evaluation(
      graph,
      jnp.where(linked, lookup.found, child),
      (path.length > 0) & (linked | (child >= 0)),
      evaluation.terminal,
      evaluation.value,
    )
  return graph, path.replace(leaf=leaf.astype(jnp.int32), leaf_is_new=create, leaf_folded=folded)


def _fold_evaluation(
  graph: Graph,
  node: chex.Array,
  evaluated: chex.Array,
  terminal: chex.Array,
  value: chex.Array,
) -> tuple[Graph, chex.Array]:
  """Adds `value [B]`, a new evaluation of the state of the existing `node [B]`, to
  its own value where `evaluated` (and neither the node nor the evaluation is
  terminal, nor the node proven: those values are exact): `k(n) += 1` and `U(n)`
  moves to the mean of the `k(n)` evaluations. Returns `(graph, folded [B])`."""
  known = jnp.maximum(node, 0)
  folded = (
    evaluated
    & (node >= 0)
    & ~terminal
    & ~take(graph.node_terminal, known)
    & ~take(graph.node_proven, known)
  )
  count = take(graph.node_evaluations, known) + 1
  old_mean = take(graph.raw_values, known)
  # Running mean; every operand is finite (non-finite evaluations never get here).
  mean = old_mean + (value - old_mean) / count.astype(old_mean.dtype)
  target = _drop_unless(folded, known, graph.capacity)
  return graph.replace(
    node_evaluations=set_at(graph.node_evaluations, target, count, mode="drop"),
    raw_values=set_at(graph.raw_values, target, mean, mode="drop"),
    folded_evaluations=graph.folded_evaluations + folded,
  ), folded


def recompute_node_and_edges(
  graph: Graph, node_index: chex.Array
) -> tuple[chex.Array, chex.Array, chex.Array]:
  """`(N(n), Q(n), [A] Q(n, a))` of one game's node from its edges (the idempotent
  update): `N(n) = k(n) + sum_a N(n, a)`, `Q(n) = (k(n) U(n) + sum_a N(n, a) Q(n, a))
  / N(n)`, with `k(n)` its own evaluations (1 unless `fold_evaluations`), and the
  live edge values `Q(n, a)` it used (what backup stores in `edge_values`)."""
  edge_visits = graph.edge_visits[node_index]
  evaluations = graph.node_evaluations[node_index]
  visits = evaluations + jnp.sum(edge_visits)
  qvalues = graph.qvalues(node_index)
  # Unvisited edges weigh 0; where() keeps a NaN in an unexpanded slot out of the sum.
  weighted = jnp.where(edge_visits > 0, edge_visits * qvalues, 0.0)
  own = evaluations.astype(graph.raw_values.dtype) * graph.raw_values[node_index]
  # max(., 1): an unused row (k = 0, read for a game off the path and then dropped)
  # would divide 0 by 0.
  value = (own + jnp.sum(weighted)) / jnp.maximum(visits, 1)
  return (
    visits.astype(jnp.int32),
    value.astype(graph.node_values.dtype),
    qvalues.astype(graph.edge_values.dtype),
  )


def _record_leaf_proof(graph: Graph, path: Path) -> Graph:
  """Re-proves the existing non-terminal node a playout stopped at, so a proof its
  children already hold moves up even though the leaf is not re-entered."""
  leaf = jnp.maximum(path.leaf, 0)
  existing = (path.leaf >= 0) & ~path.leaf_is_new & ~take(graph.node_terminal, leaf)
  proven, proven_value = jax.vmap(proofs.prove_node)(graph, leaf)
  target = _drop_unless(existing & proven & ~take(graph.node_proven, leaf), leaf, graph.capacity)
  return graph.replace(
    node_proven=set_at(graph.node_proven, target, True, mode="drop"),
    proven_values=set_at(graph.proven_values, target, proven_value, mode="drop"),
    node_values=set_at(graph.node_values, target, proven_value, mode="drop"),
  )


def backup(graph: Graph, path: Path, *, options: GraphOptions = _DEFAULT_OPTIONS) -> Graph:
  """Counts the playout on its edges and recomputes every node on the path.

  Walks the path from its end to the root: `N(n, a) += 1` on each edge (the last one
  only if its child exists), then the idempotent update of `n`, whose edge values it
  stores in `edge_values`. A playout that ended at a terminal node adds one to that
  node's visits; one whose evaluation was folded into its leaf (`path.leaf_folded`)
  recomputes the leaf first. With `options.solver`, each node on the path is also
  re-proven (`proofs.prove_node`); a proven node's `Q` is its proven value.
  """
  capacity = graph.capacity
  leaf = jnp.maximum(path.leaf, 0)
  arrived = (path.leaf >= 0) & take(graph.node_terminal, leaf) & ~path.leaf_is_new
  graph = graph.replace(
    node_visits=add_at(graph.node_visits, _drop_unless(arrived, leaf, capacity), 1, mode="drop")
  )
  if options.fold_evaluations:
    visits, value, edge_values = jax.vmap(recompute_node_and_edges)(graph, leaf)
    folded = _drop_unless(path.leaf_folded, leaf, capacity)
    graph = graph.replace(
      node_visits=set_at(graph.node_visits, folded, visits, mode="drop"),
      node_values=set_at(graph.node_values, folded, value, mode="drop"),
      edge_values=set_at(graph.edge_values, folded, edge_values, mode="drop"),
    )
  solver = options.solver
  if solver:
    graph = _record_leaf_proof(graph, path)
  longest = jnp.max(path.length)

  def update(step: chex.Array, graph: Graph) -> Graph:
    depth = longest - 1 - step
    on_path = depth < path.length
    node = path.nodes[:, depth]
    count_edge = on_path & ((depth < path.length - 1) | (path.leaf >= 0))
    edge_visits = add_at(
      graph.edge_visits,
      (_drop_unless(count_edge, node, capacity), path.actions[:, depth]),
      1,
      mode="drop",
    )
    graph = graph.replace(edge_visits=edge_visits)
    visits, value, edge_values = jax.vmap(recompute_node_and_edges)(graph, node)
    target = _drop_unless(on_path, node, capacity)
    if solver:
      proven, proven_value = jax.vmap(proofs.prove_node)(graph, node)
      value = jnp.where(proven, proven_value, value)
      graph = graph.replace(
        node_proven=set_at(graph.node_proven, target, proven, mode="drop"),
        proven_values=set_at(graph.proven_values, target, proven_value, mode="drop"),
      )
    return graph.replace(
      node_visits=set_at(graph.node_visits, target, visits, mode="drop"),
      node_values=set_at(graph.node_values, target, value, mode="drop"),
      edge_values=set_at(graph.edge_values, target, edge_values, mode="drop"),
    )

  return jax.lax.fori_loop(0, longest, update, graph)


def add_path_visits(graph: Graph, path: Path, delta: int) -> Graph:
  """Adds `delta` to the visits of every node and edge on the paths (virtual visits
  of playouts in flight, so that the next selection in the same step goes elsewhere;
  the same call with `-delta` takes them back)."""

  def add(depth: chex.Array, graph: Graph) -> Graph:
    node = _drop_unless(depth < path.length, path.nodes[:, depth], graph.capacity)
    return graph.replace(
      edge_visits=add_at(graph.edge_visits, (node, path.actions[:, depth]), delta, mode="drop"),
      node_visits=add_at(graph.node_visits, node, delta, mode="drop"),
    )

  return jax.lax.fori_loop(0, jnp.max(path.length), add, graph)


def add_path_losses(graph: Graph, path: Path) -> Graph:
  """Counts a playout in flight as a loss for every player on its path: each node
  entered below the root takes one virtual visit valued at what makes its edge worth
  -1 to the player who chose it (`r + discount * x = -1`). Call before
  `add_path_visits`; restore `node_values` afterwards."""

  def add(depth: chex.Array, graph: Graph) -> Graph:
    parent, action = path.nodes[:, depth - 1], path.actions[:, depth - 1]
    node = path.nodes[:, depth]
    discount = take(graph.edge_discounts, (parent, action))
    reward = take(graph.edge_rewards, (parent, action))
    safe_discount = jnp.where(discount == 0, 1.0, discount)
    loss = (-1.0 - reward) / safe_discount
    visits = take(graph.node_visits, node)
    value = (visits * take(graph.node_values, node) + loss) / (visits + 1)
    target = _drop_unless((depth < path.length) & (discount != 0), node, graph.capacity)
    return graph.replace(
      node_values=set_at(
        graph.node_values, target, value.astype(graph.node_values.dtype), mode="drop"
      )
    )

  return jax.lax.fori_loop(1, jnp.max(path.length), add, graph)


def simulate(
  params: types.Params,
  rng_key: chex.PRNGKey,
  graph: Graph,
  *,
  recurrent_fn: types.RecurrentFn,
  root_action_selection_fn: types.RootActionSelectionFn,
  interior_action_selection_fn: types.InteriorActionSelectionFn,
  max_depth: int,
  options: GraphOptions,
) -> tuple[chex.PRNGKey, Graph]:
  """One playout in every game: `select`, `expand`, `backup`. Returns the key for
  the next step and the graph."""
  rng_key, select_key, expand_key = random_bits.split(rng_key, 3)
  graph, path = select(
    select_key,
    graph,
    root_action_selection_fn=root_action_selection_fn,
    interior_action_selection_fn=interior_action_selection_fn,
    max_depth=max_depth,
    options=options,
  )
  graph, path = expand(params, expand_key, graph, path, recurrent_fn=recurrent_fn, options=options)
  return rng_key, backup(graph, path, options=options)


def simulate_in_parallel(
  params: types.Params,
  rng_key: chex.PRNGKey,
  graph: Graph,
  *,
  recurrent_fn: types.RecurrentFn,
  root_action_selection_fn: types.RootActionSelectionFn,
  interior_action_selection_fn: types.InteriorActionSelectionFn,
  max_depth: int,
  options: GraphOptions,
) -> tuple[chex.PRNGKey, Graph]:
  """`K = options.num_parallel` playouts in every game (see `search`).

  The K paths are selected one after another, each counting a virtual visit, valued
  as a loss for the player who chose each edge, on the nodes and edges it passes, so
  the next one spreads out (virtual loss; taken back before backup); one
  `recurrent_fn` call evaluates all `K * B` leaves; then the paths are linked and
  backed up one after another, so two paths that end on the same edge, or reach the
  same new state, share one node. Returns the key for the next step and the graph.
  """
  rng_key, select_key, expand_key = random_bits.split(rng_key, 3)

  def select_one(graph: Graph, key: chex.PRNGKey) -> tuple[Graph, Path]:
    graph, path = select(
      key,
      graph,
      root_action_selection_fn=root_action_selection_fn,
      interior_action_selection_fn=interior_action_selection_fn,
      max_depth=max_depth,
      options=options,
    )
    return add_path_visits(add_path_losses(graph, path), path, 1), path

  node_values = graph.node_values
  graph, paths = jax.lax.scan(select_one, graph, jax.random.split(select_key, options.num_parallel))
  graph, _ = jax.lax.scan(
    lambda g, path: (add_path_visits(g, path, -1), None),
    graph.replace(node_values=node_values),
    paths,
  )
  output, embedding = _evaluate_in_parallel(params, expand_key, graph, paths, recurrent_fn)

  def link_and_backup(graph: Graph, inputs: tuple) -> tuple[Graph, None]:
    path, output, embedding = inputs
    graph, path = link(graph, path, output, embedding, options=options)
    return backup(graph, path, options=options), None

  graph, _ = jax.lax.scan(link_and_backup, graph, (paths, output, embedding))
  return rng_key, graph


def _evaluate_in_parallel(
  params: types.Params,
  rng_key: chex.PRNGKey,
  graph: Graph,
  paths: Path,
  recurrent_fn: types.RecurrentFn,
) -> tuple[types.RecurrentFnOutput, types.Embedding]:
  """`recurrent_fn`'s output and embedding for the last edges of `K` paths per game
  (`paths`' leaves `[K, B, ...]`), from one call on all `K * B` of them; returned
  `[K, B, ...]`. The call's batch is path-major, the order of its outputs and of the
  keys an evaluator splits per row: with the games sharded over devices, these `K *
  B` rows (not the tables) move between devices, there and back."""
  num_parallel, batch_size = paths.length.shape
  parents, actions = jax.vmap(last_edge)(paths)  # [K, B]
  flat = lambda x: x.reshape((num_parallel * batch_size,) + x.shape[2:])
  unflat = lambda x: x.reshape((num_parallel, batch_size) + x.shape[1:])
  parent_embedding = jax.tree_util.tree_map(
    lambda x: flat(jax.vmap(lambda game_parents: take(x, game_parents))(parents)),
    graph.embeddings,
  )
  output, embedding = checks.unpack_recurrent_result(
    recurrent_fn(params, rng_key, flat(actions), parent_embedding)
  )
  checks.check_recurrent_output(
    output, embedding, parent_embedding, num_parallel * batch_size, graph.num_actions
  )
  return jax.tree_util.tree_map(unflat, (output, embedding))


def _check_arguments(
  num_simulations: int,
  max_depth: int | None,
  options: GraphOptions,
  recurrent_fn: types.RecurrentFn,
  root_action_selection_fn: types.RootActionSelectionFn,
  interior_action_selection_fn: types.InteriorActionSelectionFn,
) -> tuple[int, int]:
  """Checks `search`'s arguments but the ones `check_inputs` and `initial_graph`
  check, naming the first at fault; returns `(num_simulations, max_depth)` (its
  default filled in)."""
  num_simulations = checks.check_int("num_simulations", num_simulations, minimum=1)
  if not isinstance(options, GraphOptions):
    raise TypeError(f"options must be a mcgs_jax.GraphOptions, got {type(options).__name__}")
  checks.check_callable(
    "recurrent_fn",
    recurrent_fn,
    "(params, key, action [B], embedding) -> (RecurrentFnOutput, embedding)",
  )
  checks.check_callable(
    "root_action_selection_fn", root_action_selection_fn, "(key, graph, node) -> action"
  )
  checks.check_callable(
    "interior_action_selection_fn",
    interior_action_selection_fn,
    "(key, graph, node, depth) -> action",
  )
  if num_simulations % options.num_parallel:
    raise ValueError(
      f"num_simulations ({num_simulations}) must be a multiple of num_parallel "
      f"({options.num_parallel})"
    )
  max_depth = checks.check_int(
    "max_depth", num_simulations if max_depth is None else max_depth, minimum=1
  )
  return num_simulations, max_depth


def search(
  params: types.Params,
  rng_key: chex.PRNGKey,
  *,
  root: types.RootFnOutput,
  recurrent_fn: types.RecurrentFn,
  root_action_selection_fn: types.RootActionSelectionFn,
  interior_action_selection_fn: types.InteriorActionSelectionFn,
  num_simulations: int,
  max_depth: int | None = None,
  invalid_actions: chex.Array | None = None,
  options: GraphOptions = _DEFAULT_OPTIONS,
  extra_data: chex.ArrayTree = None,
  loop_fn: types.LoopFn = jax.lax.fori_loop,
  graph: Graph | None = None,
  recycle: Graph | None = None,
) -> Graph:
  """Runs `num_simulations` playouts in every game and returns the graph.

  Args:
    params: passed to `recurrent_fn`.
    rng_key: one key for the whole search (same key, same graph).
    root: `RootFnOutput` with `[B, A]` logits, `[B]` value and `[B, ...]` embedding.
    recurrent_fn: `(params, key, action [B], embedding) -> (RecurrentFnOutput,
      embedding)`, as in mctx.
    root_action_selection_fn, interior_action_selection_fn: selection rules on one
      game's graph (e.g. `mcgs_jax.muzero_action_selection`).
    num_simulations: playouts per game, >= 1.
    max_depth: most edges in one playout (default: `num_simulations`, as mctx).
    invalid_actions: `[B, A]` bool, actions the root may not choose. A row that is
      all True makes that root terminal: nothing is expanded, every playout ends at
      the root, and its visit counts stay zero. A non-finite root value or prior is
      replaced (`finite_root`) and counted in `non_finite_roots`.
    options: `GraphOptions` (transpositions, key, stop rule, capacity, probe
      window, solver, parallel playouts, folding of evaluations). `capacity`
      defaults to `num_simulations + 1`, or to the capacity of `graph`.
    extra_data: stored as `graph.extra_data` (read by selection rules).
    loop_fn: the loop over simulations (`jax.lax.fori_loop`, or `hk.fori_loop`).
    graph: a graph to continue (e.g. from `mcgs_jax.reroot`): its nodes, edges and
      statistics are kept; the root's prior logits and invalid actions are replaced by
      `root`'s. A game whose graph is empty (`num_nodes == 0`, as `reroot` leaves a
      finished game) starts afresh from `root`. Playouts that find the graph full are
      counted in `capacity_overflows`.
    recycle: a finished graph of the same shapes (e.g. the previous move's
      `search_graph`) whose arrays this search overwrites instead of allocating and
      filling new ones, so that setting up costs what the old graph used, not its
      capacity. The result is exactly that of a search without it; the old graph's
      contents are lost. Donate it (carry it through `jax.lax.scan`, or
      `jax.jit(..., donate_argnums=...)`), or XLA copies it first. Rows from
      `num_nodes` up must hold the empty values, as in every graph that a search,
      `mcgs_jax.reroot` or `mcgs_jax.empty_like` returns. Not with `graph`.

  With `options.num_parallel = K > 1`, each step runs K playouts per game under
  virtual loss, with one `recurrent_fn` call for all of them (`simulate_in_parallel`);
  `num_simulations` stays the total per game and must be a multiple of K. With
  `options.solver`, pair the search with selection rules built with `solver=True`
  so that they skip dominated proven edges.

  Returns:
    The `Graph`, with root statistics in `graph.summary()`.
  """
  root, invalid_actions = check_inputs(root, invalid_actions, graph, recycle)
  return search_checked(
    params,
    rng_key,
    root=root,
    recurrent_fn=recurrent_fn,
    root_action_selection_fn=root_action_selection_fn,
    interior_action_selection_fn=interior_action_selection_fn,
    num_simulations=num_simulations,
    max_depth=max_depth,
    invalid_actions=invalid_actions,
    options=options,
    extra_data=extra_data,
    loop_fn=loop_fn,
    graph=graph,
    recycle=recycle,
  )


def search_checked(
  params: types.Params,
  rng_key: chex.PRNGKey,
  *,
  root: types.RootFnOutput,
  recurrent_fn: types.RecurrentFn,
  root_action_selection_fn: types.RootActionSelectionFn,
  interior_action_selection_fn: types.InteriorActionSelectionFn,
  num_simulations: int,
  max_depth: int | None,
  invalid_actions: chex.Array,
  options: GraphOptions,
  extra_data: chex.ArrayTree,
  loop_fn: types.LoopFn,
  graph: Graph | None,
  recycle: Graph | None,
) -> Graph:
  """`search` on a root, `invalid_actions [B, A]` bool, `graph` and `recycle` that
  `check_inputs` returned or checked (the policy skeleton checks them before its
  setup reads them); checks the other arguments, once, at trace time."""
  num_simulations, max_depth = _check_arguments(
    num_simulations,
    max_depth,
    options,
    recurrent_fn,
    root_action_selection_fn,
    interior_action_selection_fn,
  )
  options = options_lib.keyable(options, root.embedding)
  graph = initial_graph(
    root,
    invalid_actions,
    num_simulations=num_simulations,
    options=options,
    extra_data=extra_data,
    graph=graph,
    recycle=recycle,
  )
  simulate_step = functools.partial(
    simulate if options.num_parallel == 1 else simulate_in_parallel,
    params,
    recurrent_fn=recurrent_fn,
    root_action_selection_fn=root_action_selection_fn,
    interior_action_selection_fn=interior_action_selection_fn,
    max_depth=max_depth,
    options=options,
  )
  num_steps = num_simulations // options.num_parallel
  _, graph = loop_fn(0, num_steps, lambda _, carry: simulate_step(*carry), (rng_key, graph))
  return graph
