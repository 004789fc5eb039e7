"""Reads and writes of batched tables, game by game, and the choice between two
batched pytrees game by game (`where_per_game`).

Every table of a `Graph` holds the `B` games on its leading axis, and the engine
reads and writes it at a different row in every game. Written with an explicit batch
index, `table[jnp.arange(B), node]` or `table.at[jnp.arange(B), node].set(...)`,
that lowers to a gather or scatter whose game index is data: with the games sharded
over a `jax.sharding.Mesh`, XLA's SPMD partitioner cannot see that each game touches
only its own rows, and gathers the whole table onto every device, at every
simulation. The same access lifted over the games with `jax.vmap` (these functions)
lowers to a gather or scatter with a batching dimension, which partitions over the
games with no communication; on one device XLA lowers it as the explicit form.
Gathers and scatters move values exactly, so the results are the same, bit for bit.

Every function takes a table `[B, N, ...]` and a per-game index into the axes after
`B`: one `[B]` array (one row per game) or `[B, K, ...]` (several), or a tuple of
such arrays for the axes after it in order (`(node, action)` picks an edge of
`[B, N, A, ...]`). Out-of-range indices behave as in NumPy-style indexing of one
game: negative ones count from the end, gathers clamp, `mode="drop"` scatters skip.
"""

import chex
import jax
import jax.numpy as jnp

Index = chex.Array | tuple[chex.Array, ...]


def _as_tuple(index: Index) -> tuple[chex.Array, ...]:
  return index if isinstance(index, tuple) else (index,)


def take(table: chex.Array, index: Index) -> chex.Array:
  """`table[b, index[b]]` for every game `b`: `[B, ...]` for a `[B]` index, `[B, K,
  ...]` for a `[B, K]` one (`index[b]` picks along the axes after `B`)."""
  return jax.vmap(lambda rows, at: rows[at])(table, _as_tuple(index))


def _scatter(
  update: str,
  table: chex.Array,
  index: Index,
  values: chex.Numeric,
  mode: str | None,
  unique_indices: bool,
  indices_are_sorted: bool,
) -> chex.Array:
  """`table` with game `b`'s `values[b]` (or the scalar `values`, in every game)
  combined into `table[b, index[b]]` by `update` (an `.at[]` method name)."""
  flags = dict(mode=mode, unique_indices=unique_indices, indices_are_sorted=indices_are_sorted)

  def one_game(
    rows: chex.Array, at: tuple[chex.Array, ...], game_values: chex.Numeric
  ) -> chex.Array:
    return getattr(rows.at[at], update)(game_values, **flags)

  index = _as_tuple(index)
  if jnp.ndim(values) == 0:
    return jax.vmap(lambda rows, at: one_game(rows, at, values))(table, index)
  return jax.vmap(one_game)(table, index, values)


def set_at(
  table: chex.Array,
  index: Index,
  values: chex.Numeric,
  *,
  mode: str | None = None,
  unique_indices: bool = False,
  indices_are_sorted: bool = False,
) -> chex.Array:
  """`table.at[b, index[b]].set(values[b])` for every game `b`; `values` is a scalar
  (the same in every game) or `[B, ...]`. The flags are those of `.at[].set`, for
  one game's indices (`mode="drop"` skips an out-of-range row)."""
  return _scatter("set", table, index, values, mode, unique_indices, indices_are_sorted)


def add_at(
  table: chex.Array, index: Index, values: chex.Numeric, *, mode: str | None = None
) -> chex.Array:
  """`table.at[b, index[b]].add(values[b])` for every game `b` (see `set_at`)."""
  return _scatter("add", table, index, values, mode, False, False)


def min_at(
  table: chex.Array, index: Index, values: chex.Numeric, *, mode: str | None = None
) -> chex.Array:
  """`table.at[b, index[b]].min(values[b])` for every game `b` (see `set_at`)."""
  return _scatter("min", table, index, values, mode, False, False)


def drop_unless(condition: chex.Array, index: chex.Array, out_of_bounds: int) -> chex.Array:
  """`index` where `condition`, else `out_of_bounds`, an index that a `mode="drop"`
  scatter ignores (pass the length of the axis it indexes)."""
  return jnp.where(condition, index, out_of_bounds)


def where_per_game(
  mask: chex.Array, on_true: chex.ArrayTree, on_false: chex.ArrayTree
) -> chex.ArrayTree:
  """Per game, the leaves of `on_true` where `mask [B]` is set, else `on_false`'s.

  Both trees have the same structure and leaves of shape `[B, ...]`; the mask is
  broadcast over each leaf's trailing axes.
  """

  def pick(true_leaf: chex.Array, false_leaf: chex.Array) -> chex.Array:
    return jnp.where(
      jnp.reshape(mask, mask.shape + (1,) * (true_leaf.ndim - 1)), true_leaf, false_leaf
    )

  return jax.tree_util.tree_map(pick, on_true, on_false)
