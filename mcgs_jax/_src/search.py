"""One simulation is `select`, `expand`, `backup`; `search` runs many.

All three work on the whole batch. Per-game work (the selection rules, the hash
probe) is written for one game and lifted with `jax.vmap`; the loops over depth run
at batch level with a scalar trip condition, so XLA never selects over the graph
arrays per game, and the cost of one simulation does not grow with capacity.
"""

import chex
import jax
import jax.numpy as jnp

from mcgs_jax._src import checks, hashing, proofs, types
from mcgs_jax._src import options as options_lib
from mcgs_jax._src.graph import NODE_FIELDS, ROOT_INDEX, Graph, empty_graph
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
  leaf: `[B]` int32, node where the playout ended (set by `expand`): the child of
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


def _drop_unless(condition, index, out_of_bounds):
  """`index` where `condition`, else an index that a `mode='drop'` scatter ignores."""
  return jnp.where(condition, index, out_of_bounds)


def stops_at_transposition(graph: Graph, node, action, child, keys, options: GraphOptions):
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
  batch = jnp.arange(graph.batch_size)
  if options.stop_rule == "never":
    return jnp.zeros((graph.batch_size,), jnp.bool_)
  # k(child) = 1 without folding: then this is N(child) itself.
  child_visits = 1 + graph.node_visits[batch, child] - graph.node_evaluations[batch, child]
  caught_up = child_visits > graph.edge_visits[batch, node, action]
  if options.stop_rule == "catch_up":
    if options.stop_leak == 0:
      return caught_up
    coins = jax.vmap(lambda key: jax.random.uniform(jax.random.fold_in(key, _LEAK_STREAM)))(keys)
    return caught_up & ~(coins < options.stop_leak)
  live = (
    graph.edge_rewards[batch, node, action]
    + graph.edge_discounts[batch, node, action] * graph.node_values[batch, child]
  )
  lag = jnp.abs(graph.edge_values[batch, node, action] - live)
  return caught_up & (lag > options.stop_epsilon)


def _usable_actions(graph: Graph, node, actions, depth):
  """`actions [B]`, where a rule chose an edge marked `edge_non_finite`, replaced by
  the valid unmarked action with the highest prior logit (unchanged when there is
  none). The built-in rules never choose such edges; this keeps rules that do not
  mask them (custom rules, Gumbel's interior rule) from spending every playout on a
  state that cannot be evaluated."""
  batch = jnp.arange(graph.batch_size)
  non_finite = graph.edge_non_finite[batch, node]  # [B, A]
  blocked = non_finite | (graph.root_invalid_actions & (depth == 0))
  fallback = masked_argmax(graph.children_prior_logits[batch, node], blocked)
  replace = non_finite[batch, actions] & jnp.any(~blocked, axis=-1)
  return jnp.where(replace, fallback, actions)


def select(
  rng_key,
  graph: Graph,
  *,
  root_action_selection_fn,
  interior_action_selection_fn,
  max_depth: int,
  options: GraphOptions = _DEFAULT_OPTIONS,
):
  """Descends from the root of every game until the playout ends.

  A playout ends after choosing an edge whose child is not expanded, is terminal, is
  already on this path (cycle guard), is visited more often than the edge
  (`N(child) > N(n, a)`, as `options.stop_rule` says: `stops_at_transposition`), is
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
  batch_size, capacity = graph.batch_size, graph.capacity
  batch = jnp.arange(batch_size)
  buffer_depth = min(max_depth, capacity)
  # A stamp is never reused: root visits would be (a dropped playout does not
  # advance them), and the next playout would stop at nodes falsely on its path.
  stamp = graph.playouts_started
  root_terminal = graph.node_terminal[:, ROOT_INDEX]
  path_marks = graph.path_marks.at[:, ROOT_INDEX].set(stamp)

  def split_keys(keys):
    pairs = jax.vmap(jax.random.split)(keys)
    return pairs[:, 0], pairs[:, 1]

  def advance(carry, actions):
    depth, node, active, keys, nodes, path_actions, length, path_marks = carry
    actions = _usable_actions(graph, node, actions, depth)
    nodes = nodes.at[:, depth].set(node)
    path_actions = path_actions.at[:, depth].set(actions)
    length = jnp.where(active, depth + 1, length)
    child = graph.children_index[batch, node, actions]
    known_child = jnp.maximum(child, 0)
    proceed = (
      active & (child >= 0) & ~graph.node_terminal[batch, known_child] & (depth + 1 < max_depth)
    )
    if options.solver:
      # A child whose proof is only stale (its children settle it) counts as proven:
      # the playout stops there and backup records the proof.
      provable, _ = jax.vmap(proofs.prove_node)(graph, known_child)
      proceed &= ~(graph.node_proven[batch, known_child] | provable)
    if options.transpositions:
      proceed &= path_marks[batch, known_child] != stamp
      proceed &= ~stops_at_transposition(graph, node, actions, known_child, keys, options)
    # One write per game, rows in order: declaring it lets XLA update the marks in
    # place; without it the table was copied at every step (measured: the per-
    # simulation cost doubled from capacity 65 to 1025). The same flags on the other
    # scatters measured slower, so they are left off there.
    path_marks = path_marks.at[batch, _drop_unless(proceed, known_child, capacity)].set(
      stamp, mode="drop", unique_indices=True, indices_are_sorted=True
    )
    node = jnp.where(proceed, child, node)
    return (depth + 1, node, proceed, keys, nodes, path_actions, length, path_marks)

  keys, selection_keys = split_keys(jax.random.split(rng_key, batch_size))
  root = jnp.full((batch_size,), ROOT_INDEX, jnp.int32)
  root_actions = jax.vmap(root_action_selection_fn, in_axes=(0, 0, 0))(selection_keys, graph, root)
  carry = (
    jnp.int32(0),
    root,
    ~root_terminal,
    keys,
    jnp.zeros((batch_size, buffer_depth), jnp.int32),
    jnp.zeros((batch_size, buffer_depth), jnp.int32),
    jnp.zeros((batch_size,), jnp.int32),
    path_marks,
  )
  carry = advance(carry, root_actions)

  def keep_going(carry):
    depth, _, active = carry[:3]
    return (depth < buffer_depth) & jnp.any(active)

  def interior_step(carry):
    depth, node, active, keys = carry[:4]
    keys, selection_keys = split_keys(keys)
    actions = jax.vmap(interior_action_selection_fn, in_axes=(0, 0, 0, None))(
      selection_keys, graph, node, depth
    )
    return advance((depth, node, active, keys) + carry[4:], actions)

  carry = jax.lax.while_loop(keep_going, interior_step, carry)
  _, _, _, _, nodes, path_actions, length, path_marks = carry
  path = Path(
    nodes=nodes,
    actions=path_actions,
    length=length,
    leaf=jnp.where(length == 0, ROOT_INDEX, -1).astype(jnp.int32),
    leaf_is_new=jnp.zeros((batch_size,), jnp.bool_),
    expands=length > 0,
    leaf_folded=jnp.zeros((batch_size,), jnp.bool_),
  )
  parent, action = last_edge(path)
  path = path.replace(expands=(length > 0) & (graph.children_index[batch, parent, action] < 0))
  return graph.replace(path_marks=path_marks, playouts_started=graph.playouts_started + 1), path


def expand(
  params,
  rng_key,
  graph: Graph,
  path: Path,
  *,
  recurrent_fn,
  options: GraphOptions = _DEFAULT_OPTIONS,
):
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
  parent_embedding = jax.tree_util.tree_map(
    lambda x: x[jnp.arange(graph.batch_size), parent], graph.embeddings
  )
  output, embedding = checks.unpack_recurrent_result(
    recurrent_fn(params, rng_key, action, parent_embedding)
  )
  checks.check_recurrent_output(
    output, embedding, parent_embedding, graph.batch_size, graph.num_actions
  )
  return link(graph, path, output, embedding, options=options)


def last_edge(path: Path):
  """`(parent [B], action [B])`: the last edge of every path (garbage where
  `length == 0`)."""
  last = jnp.maximum(path.length - 1, 0)
  batch = jnp.arange(path.length.shape[0])
  return path.nodes[batch, last], path.actions[batch, last]


def summable(x):
  """`x` is finite and small enough that the search's sums of visit-weighted values
  cannot overflow: `|x| <= sqrt(largest float)` of its dtype (1.8e19 in float32).
  Larger values (a reward of 3e38 is finite, but twice it is not) count as
  non-finite."""
  x = jnp.asarray(x)
  dtype = x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else jnp.float32
  # `<=` is False for NaN too.
  return jnp.abs(x) <= jnp.sqrt(jnp.finfo(dtype).max).astype(dtype)


def finite_outputs(output: types.RecurrentFnOutput):
  """`[B]` bool: `recurrent_fn`'s output for a game can be used. Reward and discount
  must be finite; unless the discount is 0 (a terminal state, whose value and prior
  the search never reads), so must the value, `reward + discount * value` and the
  prior logits: no NaN, no +inf, and at least one finite logit (-inf is a zero
  prior, as an illegal action). "Finite" for the reward, discount and value means
  `summable`: no larger than sqrt(largest float), so that no Q computed from them
  overflows (with discounts in [-1, 1])."""
  reward, discount = jnp.asarray(output.reward), jnp.asarray(output.discount)
  value = jnp.asarray(output.value)
  logits = jnp.asarray(output.prior_logits)
  step = summable(reward) & summable(discount)
  # `logits < inf` is False for NaN too.
  evaluation = (
    summable(value)
    & summable(reward + discount * value)
    & jnp.all(logits < jnp.inf, axis=-1)
    & jnp.any(jnp.isfinite(logits), axis=-1)
  )
  return step & ((discount == 0) | evaluation)


def link(
  graph: Graph,
  path: Path,
  output: types.RecurrentFnOutput,
  embedding,
  *,
  options: GraphOptions = _DEFAULT_OPTIONS,
):
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
  batch_size, capacity = graph.batch_size, graph.capacity
  batch = jnp.arange(batch_size)
  parent, action = last_edge(path)
  child = graph.children_index[batch, parent, action]
  collided = path.expands & (child >= 0)
  non_finite = (path.length > 0) & ~collided & ~finite_outputs(output)
  path = path.replace(length=jnp.where(collided | non_finite, 0, path.length))
  needs_node = (path.length > 0) & (child < 0)
  discount = jnp.asarray(output.discount, graph.edge_discounts.dtype)
  terminal = discount == 0
  # A terminal state's value never reaches its parents (discount 0); store 0, and
  # no NaN or infinite logit either (a terminal node is never expanded).
  value = jnp.where(terminal, 0.0, output.value).astype(graph.raw_values.dtype)
  prior_logits = jnp.asarray(output.prior_logits, graph.children_prior_logits.dtype)
  prior_logits = jnp.where(terminal[:, None] & ~jnp.isfinite(prior_logits), 0.0, prior_logits)
  transpositions, solver = options.transpositions, options.solver
  # The table may be smaller than the window asked for (a small capacity).
  probe_window = min(options.probe_window, graph.hash_slots.shape[1])

  if transpositions:
    key = checks.check_key(options.resolved_hash_fn(embedding), batch_size)
    if key.shape[1] != graph.node_keys.shape[2]:
      raise ValueError(
        f"hash_fn returned {key.shape[1]} lanes; the root key has {graph.node_keys.shape[2]}"
      )
    found, free_slot = jax.vmap(hashing.probe, in_axes=(0, 0, 0, None))(
      graph.hash_slots, graph.node_keys, key, probe_window
    )
    linked = needs_node & (found >= 0)
  else:
    key = graph.node_keys[:, 0]
    found = jnp.full((batch_size,), -1, jnp.int32)
    linked = jnp.zeros((batch_size,), jnp.bool_)
  has_room = graph.num_nodes < capacity
  create = needs_node & ~linked & has_room
  overflow = needs_node & ~linked & ~has_room
  new_node = _drop_unless(create, graph.num_nodes, capacity)
  new_child = jnp.where(linked, found, graph.num_nodes)
  edge_parent = _drop_unless(linked | create, parent, capacity)

  def set_node(table, values):
    return table.at[batch, new_node].set(values, mode="drop")

  def set_edge(table, values):
    return table.at[batch, edge_parent, action].set(values, mode="drop")

  hash_slots = graph.hash_slots
  dropped = jnp.zeros((batch_size,), jnp.bool_)
  if transpositions:
    insert = create & (free_slot >= 0)
    dropped = create & (free_slot < 0)
    hash_slots = hash_slots.at[batch, _drop_unless(insert, free_slot, hash_slots.shape[1])].set(
      graph.num_nodes, mode="drop"
    )

  new_rows = {
    "node_visits": 1,
    "raw_values": value,
    "node_values": value,
    "node_keys": key,
    "node_terminal": terminal,
    "node_proven": terminal & solver,
    "proven_values": 0.0,
    "path_marks": NODE_FIELDS["path_marks"],
    "node_evaluations": 1,
    "children_prior_logits": prior_logits,
  }
  assert set(new_rows) | {"embeddings"} == set(NODE_FIELDS), "a node table is not set"
  graph = graph.replace(
    **{name: set_node(getattr(graph, name), row) for name, row in new_rows.items()},
    embeddings=jax.tree_util.tree_map(set_node, graph.embeddings, embedding),
    children_index=set_edge(graph.children_index, new_child),
    edge_rewards=set_edge(graph.edge_rewards, jnp.asarray(output.reward, graph.edge_rewards.dtype)),
    edge_discounts=set_edge(graph.edge_discounts, discount),
    edge_non_finite=set_edge(graph.edge_non_finite, False)
    .at[batch, _drop_unless(non_finite & (child < 0), parent, capacity), action]
    .set(True, mode="drop"),
    hash_slots=hash_slots,
    num_nodes=graph.num_nodes + create,
    transposition_hits=graph.transposition_hits + linked,
    dropped_inserts=graph.dropped_inserts + dropped,
    capacity_overflows=graph.capacity_overflows + overflow,
    parallel_collisions=graph.parallel_collisions + collided,
    non_finite_evaluations=graph.non_finite_evaluations + non_finite,
  )
  dropped_playout = collided | non_finite
  leaf = jnp.where(
    path.length == 0,
    jnp.where(dropped_playout, -1, ROOT_INDEX),
    jnp.where(needs_node, jnp.where(overflow, -1, new_child), child),
  )
  folded = jnp.zeros((batch_size,), jnp.bool_)
  if options.fold_evaluations:
    graph, folded = _fold_evaluation(
      graph,
      jnp.where(linked, found, child),
      (path.length > 0) & (linked | (child >= 0)),
      terminal,
      value,
    )
  return graph, path.replace(leaf=leaf.astype(jnp.int32), leaf_is_new=create, leaf_folded=folded)


def _fold_evaluation(graph: Graph, node, evaluated, terminal, value):
  """Adds `value [B]`, a new evaluation of the state of the existing `node [B]`, to
  its own value where `evaluated` (and neither the node nor the evaluation is
  terminal, nor the node proven: those values are exact): `k(n) += 1` and `U(n)`
  moves to the mean of the `k(n)` evaluations. Returns `(graph, folded [B])`."""
  batch = jnp.arange(graph.batch_size)
  known = jnp.maximum(node, 0)
  folded = (
    evaluated
    & (node >= 0)
    & ~terminal
    & ~graph.node_terminal[batch, known]
    & ~graph.node_proven[batch, known]
  )
  count = graph.node_evaluations[batch, known] + 1
  old_mean = graph.raw_values[batch, known]
  # Running mean; every operand is finite (non-finite evaluations never get here).
  mean = old_mean + (value - old_mean) / count.astype(old_mean.dtype)
  target = _drop_unless(folded, known, graph.capacity)
  return graph.replace(
    node_evaluations=graph.node_evaluations.at[batch, target].set(count, mode="drop"),
    raw_values=graph.raw_values.at[batch, target].set(mean, mode="drop"),
    folded_evaluations=graph.folded_evaluations + folded,
  ), folded


def recompute_node(graph: Graph, node_index):
  """`(N(n), Q(n))` of one game's node from its edges (the idempotent update):
  `N(n) = k(n) + sum_a N(n, a)`, `Q(n) = (k(n) U(n) + sum_a N(n, a) Q(n, a)) / N(n)`,
  with `k(n)` its own evaluations (1 unless `fold_evaluations`)."""
  visits, value, _ = recompute_node_and_edges(graph, node_index)
  return visits, value


def recompute_node_and_edges(graph: Graph, node_index):
  """`(N(n), Q(n), [A] Q(n, a))`: `recompute_node` and the live edge values it used
  (what backup stores in `edge_values`)."""
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
  batch = jnp.arange(graph.batch_size)
  leaf = jnp.maximum(path.leaf, 0)
  existing = (path.leaf >= 0) & ~path.leaf_is_new & ~graph.node_terminal[batch, leaf]
  proven, proven_value = jax.vmap(proofs.prove_node)(graph, leaf)
  target = _drop_unless(existing & proven & ~graph.node_proven[batch, leaf], leaf, graph.capacity)
  return graph.replace(
    node_proven=graph.node_proven.at[batch, target].set(True, mode="drop"),
    proven_values=graph.proven_values.at[batch, target].set(proven_value, mode="drop"),
    node_values=graph.node_values.at[batch, target].set(proven_value, mode="drop"),
  )


def backup(graph: Graph, path: Path, *, options: GraphOptions = _DEFAULT_OPTIONS) -> Graph:
  """Counts the playout on its edges and recomputes every node on the path.

  Walks the path from its end to the root: `N(n, a) += 1` on each edge (the last one
  only if its child exists), then the idempotent update of `n`, whose edge values it
  stores in `edge_values`. A playout that ended at a terminal node adds one to that
  node's visits; one whose evaluation was folded into its leaf (`path.leaf_folded`)
  recomputes the leaf first. With `options.solver`, each node on the path is also
  re-proven (`mcgs_jax.proofs.prove_node`); a proven node's `Q` is its proven value.
  """
  batch_size, capacity = graph.batch_size, graph.capacity
  batch = jnp.arange(batch_size)
  leaf = jnp.maximum(path.leaf, 0)
  arrived = (path.leaf >= 0) & graph.node_terminal[batch, leaf] & ~path.leaf_is_new
  graph = graph.replace(
    node_visits=graph.node_visits.at[batch, _drop_unless(arrived, leaf, capacity)].add(
      1, mode="drop"
    )
  )
  if options.fold_evaluations:
    visits, value, edge_values = jax.vmap(recompute_node_and_edges)(graph, leaf)
    folded = _drop_unless(path.leaf_folded, leaf, capacity)
    graph = graph.replace(
      node_visits=graph.node_visits.at[batch, folded].set(visits, mode="drop"),
      node_values=graph.node_values.at[batch, folded].set(value, mode="drop"),
      edge_values=graph.edge_values.at[batch, folded].set(edge_values, mode="drop"),
    )
  solver = options.solver
  if solver:
    graph = _record_leaf_proof(graph, path)
  longest = jnp.max(path.length)

  def update(step, graph):
    depth = longest - 1 - step
    on_path = depth < path.length
    node = path.nodes[:, depth]
    count_edge = on_path & ((depth < path.length - 1) | (path.leaf >= 0))
    edge_visits = graph.edge_visits.at[
      batch, _drop_unless(count_edge, node, capacity), path.actions[:, depth]
    ].add(1, mode="drop")
    graph = graph.replace(edge_visits=edge_visits)
    visits, value, edge_values = jax.vmap(recompute_node_and_edges)(graph, node)
    target = _drop_unless(on_path, node, capacity)
    if solver:
      proven, proven_value = jax.vmap(proofs.prove_node)(graph, node)
      value = jnp.where(proven, proven_value, value)
      graph = graph.replace(
        node_proven=graph.node_proven.at[batch, target].set(proven, mode="drop"),
        proven_values=graph.proven_values.at[batch, target].set(proven_value, mode="drop"),
      )
    return graph.replace(
      node_visits=graph.node_visits.at[batch, target].set(visits, mode="drop"),
      node_values=graph.node_values.at[batch, target].set(value, mode="drop"),
      edge_values=graph.edge_values.at[batch, target].set(edge_values, mode="drop"),
    )

  return jax.lax.fori_loop(0, longest, update, graph)


def add_path_visits(graph: Graph, path: Path, delta) -> Graph:
  """Adds `delta` to the visits of every node and edge on the paths (virtual visits
  of playouts in flight, so that the next selection in the same step goes elsewhere;
  the same call with `-delta` takes them back)."""
  batch = jnp.arange(graph.batch_size)

  def add(depth, graph):
    node = _drop_unless(depth < path.length, path.nodes[:, depth], graph.capacity)
    return graph.replace(
      edge_visits=graph.edge_visits.at[batch, node, path.actions[:, depth]].add(delta, mode="drop"),
      node_visits=graph.node_visits.at[batch, node].add(delta, mode="drop"),
    )

  return jax.lax.fori_loop(0, jnp.max(path.length), add, graph)


def add_path_losses(graph: Graph, path: Path) -> Graph:
  """Counts a playout in flight as a loss for every player on its path: each node
  entered below the root takes one virtual visit valued at what makes its edge worth
  -1 to the player who chose it (`r + discount * x = -1`). Call before
  `add_path_visits`; restore `node_values` afterwards."""
  batch = jnp.arange(graph.batch_size)

  def add(depth, graph):
    parent, action = path.nodes[:, depth - 1], path.actions[:, depth - 1]
    node = path.nodes[:, depth]
    discount = graph.edge_discounts[batch, parent, action]
    reward = graph.edge_rewards[batch, parent, action]
    safe_discount = jnp.where(discount == 0, 1.0, discount)
    loss = (-1.0 - reward) / safe_discount
    visits = graph.node_visits[batch, node]
    value = (visits * graph.node_values[batch, node] + loss) / (visits + 1)
    target = _drop_unless((depth < path.length) & (discount != 0), node, graph.capacity)
    return graph.replace(
      node_values=graph.node_values.at[batch, target].set(
        value.astype(graph.node_values.dtype), mode="drop"
      )
    )

  return jax.lax.fori_loop(1, jnp.max(path.length), add, graph)


def _check_continued_graph(
  graph: Graph, capacity, batch_size: int, num_actions: int, transpositions: bool, name: str
) -> int:
  """Checks that `graph` (the argument `name`, `graph` or `recycle`) fits a search
  with these arguments; returns its capacity."""
  if (graph.batch_size, graph.num_actions) != (batch_size, num_actions):
    raise ValueError(
      f"{name} holds B = {graph.batch_size} games of A = {graph.num_actions} "
      f"actions; root has B = {batch_size}, A = {num_actions}"
    )
  if capacity is not None and capacity != graph.capacity:
    raise ValueError(
      f"capacity = {capacity} differs from the capacity of {name} "
      f"({graph.capacity}); a search on {name} keeps its capacity"
    )
  if transpositions != (graph.hash_slots.shape[1] > 0):
    raise ValueError(
      f"transpositions = {transpositions}, but {name} was built with "
      f"transpositions = {not transpositions}"
    )
  return graph.capacity


def _check_recycled(recycle: Graph, expected: Graph) -> None:
  """ValueError naming the first table of `recycle` whose shape or dtype differs
  from those of the graph this search builds (`expected`, from `jax.eval_shape`)."""
  recycled = jax.tree_util.tree_leaves_with_path(recycle.replace(extra_data=None))
  wanted = jax.tree_util.tree_leaves_with_path(expected.replace(extra_data=None))
  if [path for path, _ in recycled] != [path for path, _ in wanted]:
    raise ValueError(
      "recycle holds other tables than this search builds (a different embedding "
      "structure?); pass a graph from a search with the same root, game and options"
    )
  for (path, old), (_, new) in zip(recycled, wanted, strict=True):
    if (old.shape, old.dtype) != (new.shape, new.dtype):
      raise ValueError(
        f"recycle{jax.tree_util.keystr(path)} has shape {old.shape} and dtype "
        f"{old.dtype}; this search needs {new.shape} {new.dtype} (same B, capacity, "
        f"A, transpositions and embedding)"
      )


def _continue(
  graph: Graph, fresh: Graph, root: types.RootFnOutput, invalid_actions, extra_data
) -> Graph:
  """`graph` with the new root evaluation's prior and masks; `fresh` where empty."""
  empty = graph.num_nodes == 0
  graph = jax.tree_util.tree_map(
    lambda new, old: jnp.where(empty.reshape((-1,) + (1,) * (old.ndim - 1)), new, old),
    fresh.replace(extra_data=None),
    graph.replace(extra_data=None),
  )
  return graph.replace(
    children_prior_logits=graph.children_prior_logits.at[:, ROOT_INDEX].set(
      fresh.children_prior_logits[:, ROOT_INDEX]
    ),
    root_invalid_actions=fresh.root_invalid_actions,
    node_terminal=graph.node_terminal.at[:, ROOT_INDEX].set(fresh.node_terminal[:, ROOT_INDEX]),
    # Stamps only grow, so old marks cannot match a new playout; cleared anyway so
    # that a graph edited by hand (or from an older version) starts clean.
    path_marks=jnp.full_like(graph.path_marks, -1),
    extra_data=extra_data,
  )


def finite_root(root: types.RootFnOutput, invalid_actions):
  """`(root, non_finite [B] bool)`: the root with a non-finite value (or one beyond
  `summable`) taken as 0 and prior logits holding a NaN or +inf, or no finite entry,
  taken as uniform over the valid actions, and which games needed either."""
  value, logits = jnp.asarray(root.value), jnp.asarray(root.prior_logits)
  bad_value = ~summable(value)
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


def search(
  params,
  rng_key,
  *,
  root: types.RootFnOutput,
  recurrent_fn,
  root_action_selection_fn,
  interior_action_selection_fn,
  num_simulations: int,
  max_depth: int | None = None,
  invalid_actions=None,
  options: GraphOptions = _DEFAULT_OPTIONS,
  extra_data=None,
  loop_fn=jax.lax.fori_loop,
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
      game's graph (see `mcgs_jax.selection`).
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

  With `options.num_parallel = K > 1`, the K paths of a step are selected one after
  another, each counting a virtual visit, valued as a loss for the player who chose
  each edge, on the nodes and edges it passes, so the next one spreads out (virtual
  loss; taken back before backup); one `recurrent_fn` call evaluates all `K * B`
  leaves; then the paths are linked and backed up one after another, so two paths
  that end on the same edge, or reach the same new state, share one node.
  `num_simulations` stays the total per game and must be a multiple of K. With
  `options.solver`, pair the search with selection rules built with `solver=True`
  so that they skip dominated proven edges.

  Returns:
    The `Graph`, with root statistics in `graph.summary()`.
  """
  batch_size, num_actions = checks.check_root(root)
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
  for name, value in (("graph", graph), ("recycle", recycle)):
    if value is not None and not isinstance(value, Graph):
      raise TypeError(
        f"{name} must be a mcgs_jax.Graph (a search_graph, or what reroot returns) "
        f"or None, got {type(value).__name__}"
      )
  options = options_lib.keyable(options, root.embedding)
  num_parallel, transpositions = options.num_parallel, options.transpositions
  capacity = options.capacity
  if num_simulations % num_parallel:
    raise ValueError(
      f"num_simulations ({num_simulations}) must be a multiple of num_parallel ({num_parallel})"
    )
  max_depth = checks.check_int(
    "max_depth", num_simulations if max_depth is None else max_depth, minimum=1
  )
  if graph is not None and recycle is not None:
    raise ValueError("pass graph (to continue it) or recycle (to reuse its arrays), not both")
  if graph is not None:
    capacity = _check_continued_graph(
      graph, capacity, batch_size, num_actions, transpositions, "graph"
    )
  if recycle is not None:
    if not isinstance(recycle, Graph):
      raise TypeError(f"recycle must be a mcgs_jax.Graph, got {type(recycle).__name__}")
    capacity = _check_continued_graph(
      recycle, capacity, batch_size, num_actions, transpositions, "recycle"
    )
  capacity = checks.check_int(
    "capacity", num_simulations + 1 if capacity is None else capacity, minimum=2
  )
  invalid_actions = checks.check_invalid_actions(invalid_actions, batch_size, num_actions)
  root, root_non_finite = finite_root(root, invalid_actions)
  if transpositions:
    root_key = checks.check_key(options.resolved_hash_fn(root.embedding), batch_size)
    num_slots = hashing.num_slots_for(capacity)
  else:
    root_key = jnp.zeros((batch_size, 0), jnp.uint32)
    num_slots = 0

  def new_graph(recycle):
    return empty_graph(
      root,
      capacity=capacity,
      num_slots=num_slots,
      root_key=root_key,
      root_invalid_actions=invalid_actions,
      value_bounds=options.value_bounds,
      extra_data=extra_data,
      recycle=recycle,
    )

  if recycle is not None:
    _check_recycled(recycle, jax.eval_shape(new_graph, None))
  fresh = new_graph(recycle)
  graph = fresh if graph is None else _continue(graph, fresh, root, invalid_actions, extra_data)
  graph = graph.replace(non_finite_roots=graph.non_finite_roots + root_non_finite)

  def simulate(unused_index, carry):
    rng_key, graph = carry
    rng_key, select_key, expand_key = jax.random.split(rng_key, 3)
    graph, path = select(
      select_key,
      graph,
      root_action_selection_fn=root_action_selection_fn,
      interior_action_selection_fn=interior_action_selection_fn,
      max_depth=max_depth,
      options=options,
    )
    graph, path = expand(
      params, expand_key, graph, path, recurrent_fn=recurrent_fn, options=options
    )
    return rng_key, backup(graph, path, options=options)

  def simulate_in_parallel(unused_index, carry):
    rng_key, graph = carry
    rng_key, select_key, expand_key = jax.random.split(rng_key, 3)

    def select_one(graph, key):
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
    graph, paths = jax.lax.scan(select_one, graph, jax.random.split(select_key, num_parallel))
    graph, _ = jax.lax.scan(
      lambda g, path: (add_path_visits(g, path, -1), None),
      graph.replace(node_values=node_values),
      paths,
    )
    parents, actions = jax.vmap(last_edge)(paths)  # [K, B]
    batch = jnp.arange(batch_size)
    flat = lambda x: x.reshape((num_parallel * batch_size,) + x.shape[2:])
    unflat = lambda x: x.reshape((num_parallel, batch_size) + x.shape[1:])
    parent_embedding = jax.tree_util.tree_map(
      lambda x: flat(x[batch[None], parents]), graph.embeddings
    )
    output, embedding = checks.unpack_recurrent_result(
      recurrent_fn(params, expand_key, flat(actions), parent_embedding)
    )
    checks.check_recurrent_output(
      output, embedding, parent_embedding, num_parallel * batch_size, num_actions
    )
    output, embedding = jax.tree_util.tree_map(unflat, (output, embedding))

    def link_and_backup(graph, inputs):
      path, output, embedding = inputs
      graph, path = link(graph, path, output, embedding, options=options)
      return backup(graph, path, options=options), None

    graph, _ = jax.lax.scan(link_and_backup, graph, (paths, output, embedding))
    return rng_key, graph

  if num_parallel == 1:
    _, graph = loop_fn(0, num_simulations, simulate, (rng_key, graph))
  else:
    _, graph = loop_fn(0, num_simulations // num_parallel, simulate_in_parallel, (rng_key, graph))
  return graph
