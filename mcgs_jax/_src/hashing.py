"""Transposition keys and the per-game open-addressing table that finds them.

A key is `L` lanes of uint32 (`L = 2`, 64 bits, by default). Two different states
merge only when all lanes agree. With 64-bit keys and `n` nodes in one game's graph
the chance of any false merge is about `n**2 / 2**65` (3e-12 for n = 10,000);
`lanes=4` makes it about `n**2 / 2**129`. A false merge makes one node stand for two
states; it cannot hang or crash the search (the path-membership check ends cycles).

The table of a game has `C` slots (a power of two, at least twice the capacity). A key
may live in the `probe_window` slots that follow `key[0] mod C`; lookup reads the whole
window with one gather, so it costs the same whatever the table holds.
`rebuild_hash_slots` builds a game's table anew from the keys of the nodes `reroot`
keeps.
"""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax._src.batched import min_at, set_at, take

DEFAULT_LANES = 2
DEFAULT_PROBE_WINDOW = 16

_GOLDEN = np.uint32(0x9E3779B9)
_LANE_SEEDS = (
  0x243F6A88,
  0x85A308D3,
  0x13198A2E,
  0x03707344,
  0xA4093822,
  0x299F31D0,
  0x082EFA98,
  0xEC4E6C89,
)


def _fmix32(x: jax.Array) -> jax.Array:
  """MurmurHash3's finaliser: a bijection on uint32 with full avalanche."""
  x = x ^ (x >> 16)
  x = x * jnp.uint32(0x85EBCA6B)
  x = x ^ (x >> 13)
  x = x * jnp.uint32(0xC2B2AE35)
  return x ^ (x >> 16)


def _fmix32_np(x: np.ndarray) -> np.ndarray:
  x = np.asarray(x, dtype=np.uint64) & 0xFFFFFFFF
  x ^= x >> 16
  x = (x * 0x85EBCA6B) & 0xFFFFFFFF
  x ^= x >> 13
  x = (x * 0xC2B2AE35) & 0xFFFFFFFF
  x ^= x >> 16
  return x.astype(np.uint32)


def hash_words(words: jax.Array, *, lanes: int = DEFAULT_LANES) -> jax.Array:
  """Hashes rows of uint32 words: `[B, W] -> [B, lanes]` uint32.

  Every (position, word) pair is mixed with a per-lane, per-position salt and the
  results are XOR-ed (Zobrist hashing with computed instead of tabled randoms), then
  mixed once more. Any change to any word changes every lane with probability
  `1 - 2**-32` each.
  """
  if not 1 <= lanes <= len(_LANE_SEEDS):
    raise ValueError(f"lanes must be in [1, {len(_LANE_SEEDS)}], got {lanes}")
  words = jnp.asarray(words)
  if words.ndim != 2 or words.dtype != jnp.uint32:
    raise TypeError(f"words must be uint32 [B, W], got {words.dtype}{words.shape}")
  width = words.shape[1]
  positions = np.arange(1, width + 1, dtype=np.uint64) * np.uint64(_GOLDEN)
  salts = np.stack(
    [_fmix32_np(positions ^ np.uint64(seed)) for seed in _LANE_SEEDS[:lanes]]
  )  # [lanes, W]
  mixed = _fmix32(words[:, None, :] ^ jnp.asarray(salts)[None])  # [B, lanes, W]
  folded = jax.lax.reduce(mixed, jnp.uint32(0), jax.lax.bitwise_xor, (2,))
  return _fmix32(folded ^ jnp.uint32(width))


def leaf_to_words(leaf: Any, batch_size: int) -> jax.Array:
  """A `[B, ...]` array of any dtype as uint32 words `[B, W]`, without loss."""
  leaf = jnp.asarray(leaf).reshape(batch_size, -1)
  dtype = leaf.dtype
  if dtype == jnp.bool_:
    return leaf.astype(jnp.uint32)
  if jnp.issubdtype(dtype, jnp.integer) and dtype.itemsize < 4:
    leaf = leaf.astype(jnp.int32)  # sign-extends, so distinct values stay distinct
  if jnp.issubdtype(dtype, jnp.floating):
    if dtype.itemsize < 4:
      leaf = leaf.astype(jnp.float32)
    leaf = leaf + jnp.zeros((), leaf.dtype)  # -0.0 + 0.0 == +0.0: one key for both zeros
  if leaf.dtype.itemsize == 4:
    return jax.lax.bitcast_convert_type(leaf, jnp.uint32)
  if leaf.dtype.itemsize == 8:
    return jax.lax.bitcast_convert_type(leaf, jnp.uint32).reshape(batch_size, -1)
  raise TypeError(f"cannot hash a leaf of dtype {dtype}")


def hash_pytree(embedding: Any, *, lanes: int = DEFAULT_LANES) -> jax.Array:
  """The default transposition key: every leaf of a `[B, ...]` pytree, bit for bit.

  Returns uint32 `[B, lanes]`. Correct only when the embedding holds nothing but the
  game state; pgx states also carry step counters and history, so use the game's own
  key from `mcgs_jax.games` for them.
  """
  leaves = jax.tree_util.tree_leaves(embedding)
  if not leaves:
    raise ValueError("hash_pytree: the embedding has no array leaves")
  batch_size = jnp.shape(leaves[0])[0]
  words = jnp.concatenate([leaf_to_words(leaf, batch_size) for leaf in leaves], axis=1)
  return hash_words(words, lanes=lanes)


def num_slots_for(capacity: int) -> int:
  """The smallest power of two that is at least `2 * capacity`."""
  return 1 << max(1, int(2 * capacity - 1).bit_length())


def probe(
  slots: jax.Array, node_keys: jax.Array, key: jax.Array, probe_window: int
) -> tuple[jax.Array, jax.Array]:
  """Looks `key` up in one game's table.

  Args:
    slots: `[C]` int32, node index per slot, -1 when empty.
    node_keys: `[N, L]` uint32, the key of every node.
    key: `[L]` uint32.
    probe_window: number of slots read, starting at `key[0] mod C`.

  Returns:
    `(node, free_slot)`: the node holding `key` or -1, and the first empty slot of
    the window or -1 when the window is full.
  """
  num_slots = slots.shape[0]
  start = (key[0] & jnp.uint32(num_slots - 1)).astype(jnp.int32)
  window = (start + jnp.arange(probe_window, dtype=jnp.int32)) & (num_slots - 1)
  candidates = slots[window]
  candidate_keys = node_keys[jnp.maximum(candidates, 0)]
  matches = (candidates >= 0) & jnp.all(candidate_keys == key, axis=-1)
  node = jnp.where(jnp.any(matches), candidates[jnp.argmax(matches)], -1)
  empty = candidates < 0
  free_slot = jnp.where(jnp.any(empty), window[jnp.argmax(empty)], -1)
  return node, free_slot


def _first_free(
  slots: jax.Array, start: jax.Array, pending: jax.Array, offset: jax.Array, window_size: int
) -> tuple[jax.Array, jax.Array]:
  """Where each pending node of a `rebuild_hash_slots` round finds its first free
  slot: `offset [B, N]` moved on, one slot per step, past the filled slots of
  `slots [B, C]` (to `window_size` where the window, starting at slot `start [B,
  N]`, has none free), and the slot `[B, N]` at that offset."""
  num_slots = slots.shape[1]

  def slot_at(offset: jax.Array) -> jax.Array:
    """`[B, N]` slot at `offset` in every node's window."""
    return (start + offset) & (num_slots - 1)

  def blocked(offset: jax.Array) -> jax.Array:
    return pending & (offset < window_size) & (take(slots, slot_at(offset)) >= 0)

  offset = jax.lax.while_loop(
    lambda offset: jnp.any(blocked(offset)),
    lambda offset: offset + blocked(offset).astype(jnp.int32),
    offset,
  )
  return offset, slot_at(offset)


def rebuild_hash_slots(
  node_keys: jax.Array, num_nodes: jax.Array, num_slots: int, probe_window: int
) -> tuple[jax.Array, jax.Array]:
  """A hash table holding nodes `0 .. num_nodes - 1` of every game.

  Args:
    node_keys: `[B, N, L]` uint32 keys.
    num_nodes: `[B]` int32, nodes to insert per game.
    num_slots: `C`, a power of two.
    probe_window: slots a key may use, starting at `key[0] mod C`.

  Returns:
    `(hash_slots [B, C] int32, dropped [B] int32)`: the table (-1 = empty) and the
    number of nodes left out because their window was full.

  Every round, each node not yet placed claims the first free slot of its window;
  the smallest node index claiming a slot gets it. A node whose window has no free
  slot is dropped. Each round places or drops at least one node of every game that
  has any left, so the loop ends; with a table at most half full it takes a few.

  Slots are only ever filled, so a node's first free slot never moves back: each
  node keeps the offset in its window where the last round found it, and a round
  moves that offset on past the slots filled since, one slot per step, instead of
  reading the whole window again (`[B, N]` reads per step, not `[B, N, W]`).
  """
  batch_size, capacity, _ = node_keys.shape
  window_size = min(probe_window, num_slots)
  nodes = jnp.broadcast_to(jnp.arange(capacity, dtype=jnp.int32)[None], (batch_size, capacity))
  start = (node_keys[:, :, 0] & jnp.uint32(num_slots - 1)).astype(jnp.int32)

  def insert_round(
    carry: tuple[jax.Array, jax.Array, jax.Array, jax.Array],
  ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    slots, pending, offset, dropped = carry
    offset, free_slot = _first_free(slots, start, pending, offset, window_size)
    has_free = offset < window_size
    claiming = pending & has_free
    claims = min_at(
      jnp.full((batch_size, num_slots), capacity, jnp.int32),
      jnp.where(claiming, free_slot, num_slots),
      nodes,
      mode="drop",
    )
    won = claiming & (take(claims, free_slot) == nodes)
    slots = set_at(slots, jnp.where(won, free_slot, num_slots), nodes, mode="drop")
    dropped_now = pending & ~has_free
    return (
      slots,
      pending & ~won & ~dropped_now,
      offset,
      dropped + jnp.sum(dropped_now, axis=1, dtype=jnp.int32),
    )

  slots = jnp.full((batch_size, num_slots), -1, jnp.int32)
  pending = nodes < num_nodes[:, None]
  offset = jnp.zeros((batch_size, capacity), jnp.int32)
  dropped = jnp.zeros((batch_size,), jnp.int32)
  slots, _, _, dropped = jax.lax.while_loop(
    lambda carry: jnp.any(carry[1]), insert_round, (slots, pending, offset, dropped)
  )
  return slots, dropped
