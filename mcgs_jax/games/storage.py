"""How a node stores a pgx state in fewer bytes, rebuilt bit for bit before `step`.

The search keeps one embedding per node. For the games of `STORED_AS`, some leaves
of pgx's state are kept in a smaller form that holds every value pgx writes there:

* `"bits"`: a bool leaf packed 8 to a byte along its last axis (`[..., A]` ->
  uint8 `[..., ceil(A / 8)]`): the legal-action masks, which chess and shogi store
  twice (`legal_action_mask` and `_x.legal_action_mask`, 4,672 and 2,187 bools);
* a narrower integer dtype: boards and board histories, whose values are small
  (chess pieces -6..6, shogi pieces -1..27, go stone signs and history entries
  -1..2, go chain labels at most the number of points). This is exact for every
  state pgx's `init` and `step` produce; a state edited to hold other values would
  not come back the same.

`StateStorage.store` turns a batch of full states into stored ones and `restore` back,
leaf for leaf the same arrays (`tests/test_state_storage.py` plays random games
through both and compares with pgx). Both accept either form, leaf by leaf, so a
full state passes `restore` unchanged and a stored one passes `store` unchanged.
`state_bytes(game)` gives the bytes of one state of a game, full and stored.
"""

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

BITS = "bits"

# pgx env id -> {leaf path (as `jax.tree_util.keystr` writes it): how a node stores it}.
STORED_AS: dict[str, dict[str, str]] = {
  "chess": {
    ".legal_action_mask": BITS,
    "._x.legal_action_mask": BITS,
    "._x.board": "int8",  # pieces -6..6 (negative: the opponent's)
    "._x.board_history": "int8",  # the last 8 boards
  },
  "shogi": {
    ".legal_action_mask": BITS,
    "._x.legal_action_mask": BITS,
    "._x.board": "int8",  # -1 empty, 0-27 pieces
    "._x.hand": "int8",  # at most 18 of a kind
    "._x.cache_m2b": "int8",  # squares 0-80, -1 for none
  },
  "go_9x9": {
    ".legal_action_mask": BITS,
    "._x.board": "int8",  # chain labels, +-(1..81)
    "._x.board_history": "int8",  # stone signs -1..1, 2 before the game's start
  },
  "go_19x19": {
    ".legal_action_mask": BITS,
    "._x.board": "int16",  # chain labels, +-(1..361)
    "._x.board_history": "int8",  # stone signs -1..1, 2 before the game's start
  },
}


@dataclasses.dataclass(frozen=True)
class LeafStorage:
  """How one leaf of a pgx state is stored.

  Attributes:
    path: the leaf's `jax.tree_util.keystr` path, e.g. `"._x.board"`.
    stored_as: `"bits"` (a bool leaf, packed along its last axis) or the name of a
      narrower integer dtype.
    dtype: the leaf's dtype in pgx's state.
    length: the leaf's last axis in pgx's state (what `"bits"` unpacks to).
  """

  path: str
  stored_as: str
  dtype: str
  length: int

  def store(self, leaf: jax.Array) -> jax.Array:
    """`leaf` `[..., length]` as stored; a leaf already stored is returned as it is."""
    if leaf.dtype != jnp.dtype(self.dtype):
      return leaf
    if self.stored_as == BITS:
      return jnp.packbits(leaf, axis=-1)
    return leaf.astype(self.stored_as)

  def restore(self, leaf: jax.Array) -> jax.Array:
    """`leaf` as pgx holds it; a full leaf is returned as it is."""
    if leaf.dtype == jnp.dtype(self.dtype):
      return leaf
    if self.stored_as == BITS:
      return jnp.unpackbits(leaf, axis=-1, count=self.length).astype(self.dtype)
    return leaf.astype(self.dtype)


@dataclasses.dataclass(frozen=True)
class StateStorage:
  """The stored form of one pgx game's states (hashable, so a `Game` field).

  Attributes:
    leaves: one `LeafStorage` per leaf kept in a smaller form; the others are
      stored as they are.
  """

  leaves: tuple[LeafStorage, ...]

  def _map(self, method: str, state: Any) -> Any:
    by_path = {leaf.path: leaf for leaf in self.leaves}

    def convert(path, leaf):
      storage = by_path.get(jax.tree_util.keystr(path))
      return leaf if storage is None else getattr(storage, method)(leaf)

    return jax.tree_util.tree_map_with_path(convert, state)

  def store(self, state: Any) -> Any:
    """A state (any batch shape `[...]`) as a node stores it."""
    return self._map("store", state)

  def restore(self, state: Any) -> Any:
    """The state pgx's `step` takes, from a stored (or full) one, bit for bit."""
    return self._map("restore", state)


def storage_for(env_id: str | None, state) -> StateStorage | None:
  """The `StateStorage` of a pgx game whose id is in `STORED_AS`, else None.

  Args:
    env_id: the env's id (`env.id`), or None for an env without one.
    state: one unbatched state of the env, or its shapes (`jax.eval_shape`).

  Raises:
    ValueError: when a path of `STORED_AS` is not a leaf of the env's state, or a
      `"bits"` leaf is not bool (a pgx version with another state layout).
  """
  table = STORED_AS.get(env_id) if isinstance(env_id, str) else None
  if table is None:
    return None
  shapes = {
    jax.tree_util.keystr(path): leaf for path, leaf in jax.tree_util.tree_leaves_with_path(state)
  }
  leaves = []
  for path, stored_as in table.items():
    leaf = shapes.get(path)
    if leaf is None or (stored_as == BITS and leaf.dtype != jnp.bool_):
      raise ValueError(
        f"{env_id}'s state has no {'bool ' if stored_as == BITS else ''}leaf {path!r} "
        f"to store as {stored_as!r}: another pgx state layout? (STORED_AS[{env_id!r}])"
      )
    leaves.append(LeafStorage(path, stored_as, str(leaf.dtype), int(leaf.shape[-1])))
  return StateStorage(tuple(leaves))


def state_bytes(game) -> dict[str, int]:
  """Bytes of one state of `game` (a `Game` of `make_game`), as pgx holds it and as
  a node stores it.

  Returns:
    `{"full": ..., "without_observation": ..., "stored": ...}`: pgx's state, the
    same without its observation, and the embedding of a node (`game.stored`: by
    default no observation, and the leaves of `STORED_AS` in their smaller form).
  """
  state = jax.eval_shape(lambda key: game.init(key, 1), jax.random.PRNGKey(0))

  def size(tree) -> int:
    leaves = jax.tree_util.tree_leaves(tree)
    return sum(int(np.prod(leaf.shape)) * leaf.dtype.itemsize for leaf in leaves)

  observation = getattr(state, "observation", None)
  return {
    "full": size(state),
    "without_observation": size(state) - (0 if observation is None else size(observation)),
    "stored": size(jax.eval_shape(game.stored, state)),
  }
