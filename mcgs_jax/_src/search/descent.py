"""Selection, the first step of a simulation: every game's playout descends from the
root, one edge per depth, until it ends (`select`), recorded as a `Path`.

The selection rules it applies are in `action_selection`, written for one game and
lifted with `jax.vmap`; the stop rule (`stop_rule_ends_playout`) is here. The loop
over depth runs at batch level with a scalar trip condition, so XLA never selects
over the graph arrays per game.
"""

import functools
from typing import cast

import chex
import jax
import jax.numpy as jnp

from mcgs_jax._src import proofs, random_bits, types
from mcgs_jax._src.batched import drop_unless, set_at, take
from mcgs_jax._src.graph import ROOT_INDEX, Graph
from mcgs_jax._src.options import DEFAULT_OPTIONS, GraphOptions
from mcgs_jax._src.search.path import Path, last_edge_in
from mcgs_jax._src.tie_break import masked_argmax

# Most entries `D * A` of one game's `Path.legal`. The buffer is cleared at every
# simulation and holds `D * A` bytes per game; past this size (chess: A = 4672) backup
# reads the prior again instead of clearing a larger buffer.
MAX_RECORDED_LEGAL = 1 << 14


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
  # [B] int32, the mark `node` held before this playout stamped it (restored when the
  # playout backs out of it: `_stale_proofs`).
  entered_marks: chex.Array
  legal: chex.Array | None  # [B, D, A] bool, `Path.legal` so far, or None.


def _usable_actions(
  graph: Graph, node: chex.Array, actions: chex.Array, *, at_root: bool
) -> chex.Array:
  """`actions [B]`, where a rule chose an edge marked `edge_non_finite`, an invalid
  root action, an empty slot (compact edges) or an edge outside `[0, W)`, replaced
  by the valid unmarked edge with the highest prior logit (edge 0 when there is
  none). The built-in rules
  choose none of these; this keeps rules that do not mask them (custom rules,
  Gumbel's interior rule) from spending every playout on a state that cannot be
  evaluated, or on an edge that does not exist."""
  blocked = take(graph.edge_non_finite, node)  # [B, W]
  if at_root:
    blocked |= graph.root_invalid_edges
  if graph.compact:
    blocked |= take(graph.children_actions, node) < 0
  fallback = masked_argmax(take(graph.children_prior_logits, node), blocked)
  in_range = (actions >= 0) & (actions < graph.max_children)
  replace = (take(blocked, actions) & jnp.any(~blocked, axis=-1)) | ~in_range
  return jnp.where(replace, fallback, actions)


def _checked_actions(name: str, actions: chex.Array) -> chex.Array:
  """`actions [B]`, the batched output of the rule `name`; TypeError at trace time
  unless the rule returned one integer scalar per game."""
  if actions.ndim != 1 or not jnp.issubdtype(actions.dtype, jnp.integer):
    raise TypeError(
      f"{name} must return one integer scalar (the action) for one game, got "
      f"{actions.dtype} of shape {actions.shape[1:]}"
    )
  return actions


def _split_keys(keys: chex.Array) -> tuple[chex.Array, chex.Array]:
  """`[B]` keys -> `([B] keys to go on with, [B] keys for this depth)`."""
  pairs = random_bits.split_each(keys)
  return pairs[:, 0], pairs[:, 1]


def _stale_proofs(graph: Graph, descent: _Descent, legal: chex.Array | None = None) -> chex.Array:
  """`[B]` bool: active playouts whose node, entered at the last step, is provable
  from its children though not marked proven (its proof is stale: the children were
  proven through other parents). Such a node counts as proven: the playout ends at
  the edge into it, and backup records the proof.

  The check is made here, one step after the edge was taken, rather than when it was
  taken: the selection rule at this node reads the same rows of the node and its
  children (`proofs.excluded_edges`), and XLA computes them once for both. `legal`
  `[B, A]`: the node's legal edges, if already computed."""
  provable, _ = jax.vmap(proofs.prove_node)(graph, descent.node, legal)
  return descent.active & provable


def _at_root(
  graph: Graph, keys: chex.Array, stamp: chex.Array, buffer_depth: int, record_legal: bool
) -> _Descent:
  """Every game's descent before its first edge: at the root, stamped, active
  unless the root is terminal; `keys [B]` its per-game keys."""
  batch_size = graph.batch_size
  legal = None
  if record_legal:
    root = jnp.full((batch_size,), ROOT_INDEX, jnp.int32)
    root_legal = jax.vmap(proofs.legal_edges)(graph, root)
    legal = jnp.zeros((batch_size, buffer_depth, graph.max_children), jnp.bool_)
    legal = legal.at[:, 0].set(root_legal)
  return _Descent(
    depth=jnp.int32(0),
    node=jnp.full((batch_size,), ROOT_INDEX, jnp.int32),
    active=~graph.node_terminal[:, ROOT_INDEX],
    keys=keys,
    nodes=jnp.zeros((batch_size, buffer_depth), jnp.int32),
    actions=jnp.zeros((batch_size, buffer_depth), jnp.int32),
    length=jnp.zeros((batch_size,), jnp.int32),
    path_marks=graph.path_marks.at[:, ROOT_INDEX].set(stamp),
    entered_marks=jnp.zeros((batch_size,), jnp.int32),
    legal=legal,
  )


def _back_out_of_stale_proofs(graph: Graph, descent: _Descent, stamp: chex.Array) -> _Descent:
  """After the loop: playouts as long as the path buffer may still be active, their
  last node unchecked (`_stale_proofs`); those that back out give it its mark back
  (their path, which counts the edge into it, is already right)."""
  path_marks = _stamp(
    descent,
    jnp.zeros_like(descent.active),
    descent.node,
    stamp=stamp,
    capacity=graph.capacity,
    backing_out=_stale_proofs(graph, descent),
  )
  return descent.replace(path_marks=path_marks)


def _stamp(
  descent: _Descent,
  proceed: chex.Array,
  child: chex.Array,
  *,
  stamp: chex.Array,
  capacity: int,
  backing_out: chex.Array | None,
) -> chex.Array:
  """`descent.path_marks` with `stamp` at the `child [B]` of every playout that
  proceeds there, and the mark it held given back to the node of every playout
  `backing_out` of it. No game does both, so one write per game does both."""
  marked = drop_unless(proceed, child, capacity)
  mark = stamp
  if backing_out is not None:
    marked = jnp.where(backing_out, descent.node, marked)
    mark = jnp.where(backing_out, descent.entered_marks, stamp)
  # One write per game, rows in order: declaring it lets XLA update the marks in
  # place; without it the table was copied at every step, and a simulation cost
  # more as the capacity grew. Written game by game, the other scatters of one row
  # per game get the same flags from XLA itself; these stay declared, since the
  # in-place update depends on them.
  return set_at(
    descent.path_marks, marked, mark, mode="drop", unique_indices=True, indices_are_sorted=True
  )


def _take_edges(
  graph: Graph,
  descent: _Descent,
  actions: chex.Array,
  *,
  stamp: chex.Array,
  max_depth: int,
  options: GraphOptions,
  at_root: bool = False,
  backing_out: chex.Array | None = None,
) -> _Descent:
  """`descent` one depth further: every game records `actions [B]` (made usable)
  at this depth, and an active playout moves to the child unless it ends there.
  `at_root`: the first step, where the root's invalid actions are blocked too.
  `backing_out [B]` bool (with the solver): inactive playouts that end at the edge
  into their current node (`_stale_proofs`), whose mark this step restores."""
  depth, node = descent.depth, descent.node
  rule = "root_action_selection_fn" if at_root else "interior_action_selection_fn"
  actions = _usable_actions(graph, node, _checked_actions(rule, actions), at_root=at_root)
  # From the row the rule read (XLA reads it once for both), not as an edge of its own:
  # one gather fewer per step.
  child = take(take(graph.children_index, node), actions)
  clamped_child = jnp.maximum(child, 0)
  proceed = (
    descent.active
    & (child >= 0)
    & ~take(graph.node_terminal, clamped_child)
    & (depth + 1 < max_depth)
  )
  if options.solver:
    # A stale proof is checked at the next step (`_stale_proofs`).
    proceed &= ~take(graph.node_proven, clamped_child)
  # Read only by the cycle guard and the solver (XLA drops it when neither is on).
  child_mark = take(descent.path_marks, clamped_child)
  if options.transpositions:
    proceed &= child_mark != stamp
    proceed &= ~stop_rule_ends_playout(graph, node, actions, clamped_child, descent.keys, options)
  entered_marks = descent.entered_marks
  if options.solver:
    entered_marks = jnp.where(proceed, child_mark, entered_marks)
  path_marks = _stamp(
    descent, proceed, clamped_child, stamp=stamp, capacity=graph.capacity, backing_out=backing_out
  )
  return descent.replace(
    depth=depth + 1,
    node=jnp.where(proceed, child, node),
    active=proceed,
    nodes=descent.nodes.at[:, depth].set(node),
    actions=descent.actions.at[:, depth].set(actions),
    length=jnp.where(descent.active, depth + 1, descent.length),
    path_marks=path_marks,
    entered_marks=entered_marks,
  )


def _solver_step(
  graph: Graph, descent: _Descent, *, record_legal: bool
) -> tuple[_Descent, chex.Array]:
  """The solver's part of an interior step: the playouts that back out of a stale
  proof at their current node stop (`_stale_proofs`), and with `record_legal` the
  legal edges `[B, A]` of every game's node are recorded at this depth in
  `descent.legal`. Returns `(descent, backing_out [B] bool)`."""
  legal = jax.vmap(proofs.legal_edges)(graph, descent.node)
  backing_out = _stale_proofs(graph, descent, legal)
  descent = descent.replace(active=descent.active & ~backing_out)
  if record_legal:
    descent = descent.replace(legal=cast(chex.Array, descent.legal).at[:, descent.depth].set(legal))
  return descent, backing_out


def _finished_path(graph: Graph, descent: _Descent) -> Path:
  """The `Path` a finished descent records: its nodes, actions and length (`[B, D]`,
  `[B, D]`, `[B]`), its `leaf` the root where the length is 0 (-1, unset, where not),
  and whether its last edge is unexpanded."""
  batch_size = graph.batch_size
  parent, action = last_edge_in(descent.nodes, descent.actions, descent.length)
  return Path(
    nodes=descent.nodes,
    actions=descent.actions,
    length=descent.length,
    leaf=jnp.where(descent.length == 0, ROOT_INDEX, -1).astype(jnp.int32),
    leaf_is_new=jnp.zeros((batch_size,), jnp.bool_),
    last_edge_unexpanded=(descent.length > 0) & (take(graph.children_index, (parent, action)) < 0),
    leaf_folded=jnp.zeros((batch_size,), jnp.bool_),
    legal=descent.legal,
  )


def select(
  rng_key: chex.PRNGKey,
  graph: Graph,
  *,
  root_action_selection_fn: types.RootActionSelectionFn,
  interior_action_selection_fn: types.InteriorActionSelectionFn,
  max_depth: int,
  options: GraphOptions = DEFAULT_OPTIONS,
) -> tuple[Graph, Path]:
  """Descends from the root of every game until the playout ends.

  A playout ends after choosing an edge whose child is not expanded, is terminal, is
  already on this path (cycle guard), is visited more often than the edge
  (`N(child) > N(n, a)`, as `options.stop_rule` says: `stop_rule_ends_playout`), is
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
  record_legal = options.solver and buffer_depth * graph.max_children <= MAX_RECORDED_LEGAL
  root_descent = _at_root(graph, keys, stamp, buffer_depth, record_legal)
  descent = take_edges(root_descent, root_actions, at_root=True)

  def keep_going(descent: _Descent) -> chex.Array:
    return (descent.depth < buffer_depth) & jnp.any(descent.active)

  def interior_step(descent: _Descent) -> _Descent:
    backing_out = None
    if options.solver:
      descent, backing_out = _solver_step(graph, descent, record_legal=record_legal)
    keys, selection_keys = _split_keys(descent.keys)
    actions = jax.vmap(interior_action_selection_fn, in_axes=(0, 0, 0, None))(
      selection_keys, graph, descent.node, descent.depth
    )
    return take_edges(descent.replace(keys=keys), actions, backing_out=backing_out)

  descent = jax.lax.while_loop(keep_going, interior_step, descent)
  if options.solver and buffer_depth < max_depth:
    descent = _back_out_of_stale_proofs(graph, descent, stamp)
  path = _finished_path(graph, descent)
  graph = graph.replace(path_marks=descent.path_marks, playouts_started=graph.playouts_started + 1)
  return graph, path


# `fold_in` constant that derives the stop_leak coin from a game's selection key at
# one depth, so the coin is independent of the key the selection rule receives.
_LEAK_STREAM = 0x6C65616B


def stop_rule_ends_playout(
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
  # From the row the selection rule read (one gather fewer per step, as `child`).
  caught_up = child_visits > take(take(graph.edge_visits, node), action)
  if options.stop_rule == "catch_up":
    if options.stop_leak == 0:
      return caught_up
    coins = jax.vmap(lambda key: jax.random.uniform(jax.random.fold_in(key, _LEAK_STREAM)))(keys)
    return caught_up & ~(coins < options.stop_leak)
  reward, discount = take(graph.edge_rewards, edge), take(graph.edge_discounts, edge)
  live = reward + discount * take(graph.node_values, child)
  lag = jnp.abs(take(graph.edge_values, edge) - live)
  return caught_up & (lag > options.stop_epsilon)
