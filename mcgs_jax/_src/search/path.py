"""`Path`, the contract between the steps of a simulation: `select` records the
edges each playout takes, `expand` links its leaf, `backup` updates along it."""

import chex
import jax.numpy as jnp

from mcgs_jax._src.batched import take


@chex.dataclass(frozen=True)
class Path:
  """The playout of one simulation in every game (`D` = longest path allowed).

  nodes: `[B, D]` int32, node at depth d, valid for `d < length`.
  actions: `[B, D]` int32, edge chosen at depth d (the action; with compact edges
    the slot, whose action is `graph.children_actions[node, slot]`), valid for
    `d < length`.
  length: `[B]` int32, edges taken; 0 when the root is terminal, and set to 0 by
    `link` for a playout it drops (see there).
  leaf: `[B]` int32, node where the playout ended, set by `link`: the child of the
    last edge; the root when the root is terminal; -1 for a dropped playout, and
    when the node the last edge needed did not fit in the graph (that edge is then
    not counted). `select` leaves the root where `length == 0`, else -1.
  leaf_is_new: `[B]` bool, the leaf was added to the graph by this simulation.
  last_edge_unexpanded: `[B]` bool, the last edge had no child when it was selected (the
    playout asks for a new node; `link` drops it when another path of the same step
    has linked that edge since).
  leaf_folded: `[B]` bool, the evaluation was added to the existing leaf as one
    more sample of its value (`fold_evaluations`); backup recomputes the leaf.
  legal: `[B, D, W]` bool or None: with the solver, the legal edges
    (`proofs.legal_edges`) of the node at depth d, valid for `d < length`, as
    selection found them (a node's prior never changes once it is in the graph), so
    that backup's proofs need not read the prior again. None without the solver or
    when `D * A > descent.MAX_RECORDED_LEGAL`: backup computes them.
  """

  nodes: chex.Array
  actions: chex.Array
  length: chex.Array
  leaf: chex.Array
  leaf_is_new: chex.Array
  last_edge_unexpanded: chex.Array
  leaf_folded: chex.Array
  legal: chex.Array | None = None


def last_edge_in(
  nodes: chex.Array, actions: chex.Array, length: chex.Array
) -> tuple[chex.Array, chex.Array]:
  """`last_edge` of the path held in `nodes [B, D]`, `actions [B, D]`, `length [B]`."""
  last = jnp.maximum(length - 1, 0)
  return take(nodes, last), take(actions, last)


def last_edge(path: Path) -> tuple[chex.Array, chex.Array]:
  """`(parent [B], action [B])`: the last edge of every path (garbage where
  `length == 0`)."""
  return last_edge_in(path.nodes, path.actions, path.length)
