"""The search graph: fixed-capacity node, edge and hash-slot arrays per game, the
field lists read from their declared roles, and the root statistics it reads out
(`SearchSummary`)."""

import dataclasses
from typing import Any, ClassVar

import chex
import jax
import jax.numpy as jnp

from mcgs_jax._src import compact

ROOT_INDEX = 0
UNEXPANDED = -1  # `children_index` of an edge whose child is not known yet


# Every `Graph` field declares in its metadata its role and its empty value, the value
# of a row no node uses: `empty_graph` (in `initial`) fills with it (`clear_used_rows`
# writes it over a recycled graph's used rows), `expand` writes a new node's row of
# every node table, `reroot` moves rows and refills freed ones, `empty_like` fills
# every field with it, `mcgs_jax.testing` checks that unused rows hold it; the field
# lists (`NODE_FIELDS`, ...) below the class are read from this metadata.
def _node_table(empty: Any) -> dict[str, Any]:
  """A `[B, N, ...]` table, one row per node, written whole when the node is created."""
  return {"role": "node", "empty": empty}


def _edge_table(empty: Any) -> dict[str, Any]:
  """A `[B, N, W]` table, one entry per edge (an action; with compact edges a slot)."""
  return {"role": "edge", "empty": empty}


_COUNTER = {"role": "counter", "empty": 0}  # a `[B]` int32 count of events


def _other(empty: Any) -> dict[str, Any]:
  """Any other field (per game, per hash slot, per root action)."""
  return {"role": "other", "empty": empty}


@chex.dataclass(frozen=True)
class SearchSummary:
  """Statistics at the root of every game, as `mctx.SearchSummary`.

  visit_counts: `[B, A]` float, edge visits `N(root, a)`.
  visit_probs: `[B, A]` float, `visit_counts` normalised to sum to one (all zero when
    the root has no visited edge, e.g. every action invalid).
  value: `[B]` float, `Q(root)`.
  qvalues: `[B, A]` float, `r(root, a) + discount(root, a) * Q(child)`; 0 for an
    unexpanded action.
  """

  visit_counts: chex.Array
  visit_probs: chex.Array
  value: chex.Array
  qvalues: chex.Array


@chex.dataclass(frozen=True)
class Graph:
  """A batch of search graphs. `B` games, capacity `N` nodes, `A` actions, `L` key
  lanes (0 in tree mode), `C` hash slots (0 in tree mode), `W` edges per node: `A`
  (dense, as mctx's tree), or `K` with compact edges (`GraphOptions.max_children`).

  Edge tables are `[B, N, W]`. In a dense graph column `a` is action `a`. With
  compact edges a node keeps the `K` valid actions of highest prior in its `K`
  slots (`children_actions` says which action each slot holds, -1 for an empty
  slot), and every per-node row (`children_prior_logits`, every edge table, what a
  selection rule reads and returns) is indexed by slot. `summary()` and the
  policies' outputs are in actions, `[B, A]`, either way.

  Node 0 is the root; new nodes take the next free index. Every field has a leading
  batch axis; selection functions receive one game's graph (under `jax.vmap`).

  node_visits: `[B, N]` int32, `N(n) = k(n) + sum_a N(n, a)` for a non-terminal
    node; for a terminal node, the number of playouts that ended there.
  node_evaluations: `[B, N]` int32, `k(n)`, the evaluations averaged in `U(n)`: 1
    when the node is created (the root too); with `fold_evaluations`, one more for
    every later evaluation of its state that a playout brought back (0 for unused
    rows).
  raw_values: `[B, N]` float, `U(n)`, the mean of the node's own evaluations (0 for
    terminal nodes, whose reward is on the edge that leads there).
  node_values: `[B, N]` float,
    `Q(n) = (k(n) U(n) + sum_a N(n, a) Q(n, a)) / N(n)`.
  node_keys: `[B, N, L]` uint32, transposition key of the node's state.
  node_terminal: `[B, N]` bool, no playout continues below this node.
  node_proven: `[B, N]` bool, the node's exact value is known (`solver=True` only).
  proven_values: `[B, N]` float, that exact value for the player to move.
  path_marks: `[B, N]` int32, `playouts_started` stamp of the last playout that
    passed through the node (the cycle guard reads it); -1 when never.
  children_index: `[B, N, W]` int32, child node of each edge, `UNEXPANDED` (-1) if
    the action was never expanded.
  children_prior_logits: `[B, N, W]` float, prior logits at the node (with compact
    edges those of the slots' actions, the lowest float for an empty slot).
  children_actions: `[B, N, K]` int32, the action each slot of a node holds, in
    increasing action order, -1 for an empty slot; None in a dense graph.
  node_dropped_actions: `[B, N]` int32, the node's valid actions that got no slot
    (it had more than `K`): never searched, so the solver proves such a node only
    by a winning edge, never by every edge being proven; None in a dense graph.
  node_unproven_edges: `[B, N]` int32, the node's legal edges into no proven child when
    it was last recomputed (`GraphOptions.proof_first`); None without it.
  edge_visits: `[B, N, W]` int32, `N(n, a)`: how often selection at n chose a.
  edge_rewards: `[B, N, W]` float, reward of the transition.
  edge_discounts: `[B, N, W]` float, discount of the transition.
  edge_values: `[B, N, W]` float, the `Q(n, a)` that `n` used when it was last
    recomputed, so `Q(n) = (k(n) U(n) + sum_a N(n, a) edge_values(n, a)) / N(n)`
    holds at every node, shared or not; the live `Q(n, a)` may have moved since
    (stop_rule `"value_lag"` compares the two).
  edge_non_finite: `[B, N, W]` bool, the edge's evaluation was not finite (NaN or
    infinite value, reward, discount or prior logit): it has no child, and the
    built-in selection rules never choose it again.
  embeddings: pytree of `[B, N, ...]`, the recurrent state of every node.
  hash_slots: `[B, C]` int32, node index held by each slot, -1 when empty.
  num_nodes: `[B]` int32, nodes in use.

  Counters of the graph search, each `[B]` int32, none of them in mctx:

  transposition_hits: `[B]` int32, expansions that found their state already in
    the graph and linked to it.
  dropped_inserts: `[B]` int32, new nodes not entered in the hash table because
    their probe window was full (they stay unshared: a transposition may be missed,
    never a wrong merge).
  capacity_overflows: `[B]` int32, playouts that needed a new node when all `N`
    were in use; they stopped one edge short and added nothing.
  parallel_collisions: `[B]` int32, playouts dropped because another playout of the
    same step (`num_parallel > 1`) expanded their last edge first.
  folded_evaluations: `[B]` int32, evaluations added to an existing node as one
    more sample of its value (`fold_evaluations=True`).
  non_finite_evaluations: `[B]` int32, playouts dropped because `recurrent_fn`
    returned a non-finite value, reward, discount or prior logit, or a discount
    outside [-1, 1], for their last edge (nothing of them is counted; an unexpanded
    edge is marked in `edge_non_finite`).
  non_finite_roots: `[B]` int32, searches whose root value or prior logits were not
    finite (the value was taken as 0, the logits as uniform over valid actions).
  playouts_started: `[B]` int32, playouts selected, dropped ones included. It only
    grows, and stamps `path_marks`.
  dropped_actions: `[B]` int32, valid actions (positive prior; at the root, not
    invalid) left out of a node's slots because it had more than `K` (compact
    edges only; 0 in a dense graph), summed over the nodes added and the roots of
    the searches. Selection never reaches them.
  root_key_mismatches: `[B]` int32, searches continued from a graph whose root held
    another state's key than the searched root (under `jit`; outside it such a
    `graph=` is refused), or, with chance nodes, an afterstate (a graph rerooted by
    an action only): the game started afresh from the searched root.

  root_invalid_actions: `[B, A]` bool, actions the root may not select.
  value_bounds: `[B, 2]` float, the lowest and highest value the game allows
    (`GraphOptions.value_bounds`; -inf and +inf when not given), read by the solver.
  extra_data: anything a policy keeps beside the graph (e.g. Gumbel noise).

  Names: a `children_*` table means in a graph what mctx's field of that name means
  in a tree (which child an action leads to, the prior of each action), and keeps
  mctx's name; an `edge_*` table holds what in a graph belongs to the edge and not
  to its child (a child reached by several edges has one `node_visits` and one
  `edge_visits` per edge).

  Code written for `mctx.Tree` reads the same statistics under mctx's names:
  `children_visits` (= `edge_visits`), `children_rewards`, `children_discounts`,
  `children_values` (the child's `Q`, 0 for an unexpanded edge), `node_visits`,
  `raw_values`, `node_values`, `children_prior_logits`, `children_index`,
  `ROOT_INDEX`, `UNVISITED`, `num_simulations`, `qvalues` and `summary()`. A graph
  has no `parents` / `action_from_parent`: a shared node has several parents.
  """

  ROOT_INDEX: ClassVar[int] = ROOT_INDEX
  UNVISITED: ClassVar[int] = UNEXPANDED

  node_visits: chex.Array = dataclasses.field(metadata=_node_table(0))
  node_evaluations: chex.Array = dataclasses.field(metadata=_node_table(0))
  raw_values: chex.Array = dataclasses.field(metadata=_node_table(0.0))
  node_values: chex.Array = dataclasses.field(metadata=_node_table(0.0))
  node_keys: chex.Array = dataclasses.field(metadata=_node_table(0))
  node_terminal: chex.Array = dataclasses.field(metadata=_node_table(False))
  node_proven: chex.Array = dataclasses.field(metadata=_node_table(False))
  proven_values: chex.Array = dataclasses.field(metadata=_node_table(0.0))
  path_marks: chex.Array = dataclasses.field(metadata=_node_table(-1))
  children_index: chex.Array = dataclasses.field(metadata=_edge_table(UNEXPANDED))
  children_prior_logits: chex.Array = dataclasses.field(metadata=_node_table(0.0))
  children_actions: chex.Array | None = dataclasses.field(metadata=_node_table(-1))
  node_dropped_actions: chex.Array | None = dataclasses.field(metadata=_node_table(0))
  node_unproven_edges: chex.Array | None = dataclasses.field(metadata=_node_table(0))
  edge_visits: chex.Array = dataclasses.field(metadata=_edge_table(0))
  edge_rewards: chex.Array = dataclasses.field(metadata=_edge_table(0.0))
  edge_discounts: chex.Array = dataclasses.field(metadata=_edge_table(0.0))
  edge_values: chex.Array = dataclasses.field(metadata=_edge_table(0.0))
  edge_non_finite: chex.Array = dataclasses.field(metadata=_edge_table(False))
  embeddings: Any = dataclasses.field(metadata=_node_table(0))
  hash_slots: chex.Array = dataclasses.field(metadata=_other(-1))
  num_nodes: chex.Array = dataclasses.field(metadata=_other(0))

  # Counters of the graph search, none of them in mctx.
  transposition_hits: chex.Array = dataclasses.field(metadata=_COUNTER)
  dropped_inserts: chex.Array = dataclasses.field(metadata=_COUNTER)
  capacity_overflows: chex.Array = dataclasses.field(metadata=_COUNTER)
  parallel_collisions: chex.Array = dataclasses.field(metadata=_COUNTER)
  folded_evaluations: chex.Array = dataclasses.field(metadata=_COUNTER)
  non_finite_evaluations: chex.Array = dataclasses.field(metadata=_COUNTER)
  non_finite_roots: chex.Array = dataclasses.field(metadata=_COUNTER)
  playouts_started: chex.Array = dataclasses.field(metadata=_COUNTER)
  root_key_mismatches: chex.Array = dataclasses.field(metadata=_COUNTER)
  dropped_actions: chex.Array = dataclasses.field(metadata=_COUNTER)

  root_invalid_actions: chex.Array = dataclasses.field(metadata=_other(False))
  value_bounds: chex.Array = dataclasses.field(metadata=_other(0.0))
  extra_data: Any = dataclasses.field(default=None, metadata=_other(0))

  @property
  def batch_size(self) -> int:
    return self.children_index.shape[0]

  @property
  def capacity(self) -> int:
    return self.children_index.shape[-2]

  @property
  def num_actions(self) -> int:
    """`A`, the actions of the game (the width of `root_invalid_actions`)."""
    return self.root_invalid_actions.shape[-1]

  @property
  def max_children(self) -> int:
    """`W`, the edges per node: `K` with compact edges, `A` in a dense graph."""
    return self.children_index.shape[-1]

  @property
  def compact(self) -> bool:
    """Whether edges are kept in slots (`GraphOptions.max_children`)."""
    return self.children_actions is not None

  def edge_actions(self, node_index: chex.Array) -> chex.Array:
    """The action of each edge of one game's node: `[W]` int32 (`arange(A)` in a
    dense graph; a slot's action, -1 for an empty slot, with compact edges)."""
    if self.children_actions is None:
      return jnp.arange(self.max_children, dtype=jnp.int32)
    return self.children_actions[node_index]

  @property
  def root_invalid_edges(self) -> chex.Array:
    """`[..., W]` bool, the root's edges a search may not select: its invalid actions
    (`root_invalid_actions`) by edge, and with compact edges its empty slots. Works on
    one game and on the batch."""
    if self.children_actions is None:
      return self.root_invalid_actions
    actions = self.children_actions[..., ROOT_INDEX, :]
    return compact.gather_from_actions(self.root_invalid_actions, actions, True)

  def root_edge_actions(self, edge: chex.Array) -> chex.Array:
    """`[B]` int32, the action of each game's root edge `edge [B]`: `edge` itself in a
    dense graph, the slot's action with compact edges (0 for an empty slot)."""
    if self.children_actions is None:
      return edge
    actions = self.children_actions[:, ROOT_INDEX]
    return jnp.maximum(jnp.take_along_axis(actions, edge[:, None], axis=-1)[:, 0], 0)

  def root_row_to_actions(self, values: chex.Array, fill: chex.Numeric) -> chex.Array:
    """`values [B, W]`, one per root edge, as `[B, A]`, one per action: `fill` for
    actions no slot holds (compact edges); `values` itself in a dense graph."""
    if self.children_actions is None:
      return values
    return compact.scatter_to_actions(
      values, self.children_actions[:, ROOT_INDEX], self.num_actions, fill
    )

  def actions_to_root_row(self, values: chex.Array, fill: chex.Numeric) -> chex.Array:
    """`values [..., A]`, one per action, as one per root edge `[..., W]` (`fill` at
    empty slots); `values` itself in a dense graph. Works on one game and on the
    batch."""
    if self.children_actions is None:
      return values
    return compact.gather_from_actions(values, self.children_actions[..., ROOT_INDEX, :], fill)

  @property
  def num_simulations(self) -> int:
    """As `mctx.Tree.num_simulations`: capacity minus the root."""
    return self.capacity - 1

  @property
  def children_visits(self) -> chex.Array:
    """mctx's name of `edge_visits`: `[B, N, W]` int32."""
    return self.edge_visits

  @property
  def children_rewards(self) -> chex.Array:
    """mctx's name of `edge_rewards`: `[B, N, W]` float."""
    return self.edge_rewards

  @property
  def children_discounts(self) -> chex.Array:
    """mctx's name of `edge_discounts`: `[B, N, W]` float."""
    return self.edge_discounts

  @property
  def children_values(self) -> chex.Array:
    """`[B, N, W]` float, `Q` of each edge's child (0 where unexpanded), as mctx's
    `children_values`; `qvalues = children_rewards + children_discounts *
    children_values`."""
    children = self.children_index
    batch_axes = children.ndim - 2
    if batch_axes:
      values = jax.vmap(lambda v, c: v[jnp.maximum(c, 0)])(self.node_values, children)
    else:
      values = self.node_values[jnp.maximum(children, 0)]
    return jnp.where(children >= 0, values, 0.0)

  def infer_batch_size(self) -> int:
    """As `mctx.tree.infer_batch_size`."""
    if self.node_values.ndim != 2:
      raise ValueError("the graph is not batched")
    return self.batch_size

  def qvalues(self, node_index: chex.Array) -> chex.Array:
    """`Q(n, a) = r(n, a) + discount(n, a) * Q(child)`, 0 for unexpanded actions.

    Works on one game (`node_index` a scalar, returns `[W]`, by edge) and on the
    batch (`node_index` `[B]`, returns `[B, W]`).
    """
    if self.children_index.ndim == 2:
      return _edge_qvalues(self, node_index)
    return jax.vmap(_edge_qvalues)(self, node_index)

  def summary(self) -> SearchSummary:
    """Root statistics of every game, as `mctx.Tree.summary()`: `[B, A]` visit
    counts, probabilities and Q-values (0 for actions no slot holds), `[B]` value."""
    root = jnp.full((self.batch_size,), ROOT_INDEX)
    value = self.node_values[:, ROOT_INDEX]
    visit_counts = self.root_row_to_actions(self.edge_visits[:, ROOT_INDEX].astype(value.dtype), 0)
    total = jnp.sum(visit_counts, axis=-1, keepdims=True)
    # A root with no visited edge (every action invalid) gets all-zero probabilities
    # rather than 0/0.
    visit_probs = visit_counts / jnp.maximum(total, 1)
    return SearchSummary(
      visit_counts=visit_counts,
      visit_probs=visit_probs,
      value=value,
      qvalues=self.root_row_to_actions(self.qvalues(root), 0),
    )


def edges_by_action(graph: Graph, table: chex.Array, fill: chex.Numeric) -> chex.Array:
  """An edge table of `graph` (`[B, N, W]`, e.g. `graph.edge_visits`) by action,
  `[B, N, A]`: with compact edges each slot's entry at its action and `fill` at
  actions no slot holds; `table` itself in a dense graph (for inspection, tests and
  pictures: it is `A` wide)."""
  if graph.children_actions is None:
    return table
  return compact.scatter_to_actions(table, graph.children_actions, graph.num_actions, fill)


def _edge_qvalues(graph: Graph, node_index: chex.Array) -> chex.Array:
  children = graph.children_index[node_index]
  child_values = graph.node_values[jnp.maximum(children, 0)]
  child_values = jnp.where(children >= 0, child_values, 0.0)
  return graph.edge_rewards[node_index] + graph.edge_discounts[node_index] * child_values


def _fields_of_role(role: str) -> dict[str, Any]:
  """Empty value of every `Graph` field of `role`, by name, in declaration order."""
  return {
    field.name: field.metadata["empty"]
    for field in dataclasses.fields(Graph)
    if field.metadata["role"] == role
  }


NODE_FIELDS: dict[str, Any] = _fields_of_role("node")  # [B, N, ...]: one row per node
EDGE_FIELDS: dict[str, Any] = _fields_of_role("edge")  # [B, N, A]: one column per action
ROW_FIELDS: dict[str, Any] = {**NODE_FIELDS, **EDGE_FIELDS}  # every [B, N, ...] table
COUNTER_FIELDS: tuple[str, ...] = tuple(_fields_of_role("counter"))  # [B] int32
# Every field's value in a graph whose games are all empty (`empty_like`).
EMPTY_VALUES: dict[str, Any] = {
  field.name: field.metadata["empty"] for field in dataclasses.fields(Graph)
}
