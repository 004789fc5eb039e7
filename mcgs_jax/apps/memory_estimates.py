"""Memory estimates made before a command allocates, and the check that refuses a run
that cannot fit.

What a search holds is mostly its graphs: `B` games of `capacity` nodes, each node
with its `A` edges, its own fields and its embedding (the stored state). The
estimates are made from shapes alone (`jax.eval_shape`), so nothing is allocated:

  * `estimated_search_bytes(game, agent, state)`: one arena agent's searches (a match
    of `mcgs-jax arena`, `arena.play_match`);
  * `estimated_self_play_bytes(game, config)`: self-play of `mcgs_jax.apps.train`
    (its searches' graphs, the trajectories of one iteration and the replay buffer);
  * `mcgs-jax bench` estimates each group it times with `graph_bytes`
    (`benchmark.check_run_memory`).

`check_memory(parts, ...)` compares an estimate with `available_bytes()` (the first
device's limit on an accelerator, the host's available memory on the CPU; self-play
compares each part with the memory that holds it, `check_self_play_memory`): above
it it raises `InsufficientMemoryError` (a `ValueError`) naming the estimate; above
`WARN_FRACTION` of it it warns on stderr.

This module imports neither the arena nor the training loop (agents and configs are
read by their attributes), so both can import it.
"""

import sys
from collections.abc import Mapping

import jax
import numpy as np

from mcgs_jax.apps import engines, registry

# A search holds about three graphs at once: the one it continues, the rerooted copy
# and the one it returns (XLA's temporaries are smaller).
GRAPHS_PER_SEARCH = 3
WARN_FRACTION = 0.7  # of the memory available: an estimate above it warns
# Per edge: child, visits, reward, discount, value, prior and a flag.
EDGE_BYTES = 25
# Per node: its own fields with a 4-lane key, and two hash slots of 4 bytes.
NODE_FIELD_BYTES = 64
HASH_SLOT_BYTES = 8
# Per slot of compact edges, beside its edge: the action it holds.
SLOT_ACTION_BYTES = 4


class InsufficientMemoryError(ValueError):
  """An estimate larger than the memory available; the message holds both."""


def _bytes_per_game(tree) -> int:
  """Bytes of one game of a batched pytree of arrays or shapes (leading axis: the
  games)."""
  leaves = jax.tree_util.tree_leaves(tree)
  total = sum(int(np.prod(leaf.shape)) * np.dtype(leaf.dtype).itemsize for leaf in leaves)
  return total // int(leaves[0].shape[0])


def _batch_size(state) -> int:
  return int(state.current_player.shape[0])


def node_bytes(game, state, max_children: int | None = None) -> int:
  """Bytes of one node of `game`'s graph: its `A` edges (with compact edges its
  `min(K, A)` slots, each with its action), its own fields and the stored state of
  one game of `state` (a batch of states or their shapes)."""
  stored = jax.eval_shape(game.stored, state)
  num_actions = int(game.num_actions)
  if max_children is None:
    edges = EDGE_BYTES * num_actions
  else:
    edges = (EDGE_BYTES + SLOT_ACTION_BYTES) * min(int(max_children), num_actions)
  return edges + NODE_FIELD_BYTES + _bytes_per_game(stored) + HASH_SLOT_BYTES


def graph_bytes(
  game, state, capacity: int, batch_size: int | None = None, max_children: int | None = None
) -> int:
  """Bytes of one graph of `capacity` nodes for each of `batch_size` games (default:
  the games of `state`), with `max_children` slots per node (None: dense)."""
  games = _batch_size(state) if batch_size is None else int(batch_size)
  return games * int(capacity) * node_bytes(game, state, max_children)


def estimated_search_bytes(game, agent, state) -> int:
  """Bytes one arena agent's searches hold at once, estimated from the batch,
  capacity, actions and the stored state's size without allocating:
  `GRAPHS_PER_SEARCH` graphs of `B` games of `capacity` nodes (mctx's tree: `S + 1`
  nodes), each node with its `A` edges (`EDGE_BYTES` each), its own fields
  (`NODE_FIELD_BYTES`), its embedding and its hash slots."""
  engine = engines.get_engine(agent.engine)
  capacity = engine.capacity(agent.num_simulations, agent.search_capacity)
  max_children = getattr(agent, "max_children", None)
  return GRAPHS_PER_SEARCH * graph_bytes(game, state, capacity, max_children=max_children)


def self_play_parts(game, config) -> dict[str, int]:
  """Bytes self-play of `mcgs_jax.apps.train` holds, by part, from `config`
  (`num_games`, `num_simulations`, `engine`, `search_capacity`, `buffer_size`) and
  `game`'s shapes, without allocating:

    * `"graphs"`: `GRAPHS_PER_SEARCH` graphs of `num_games` games of
      `search_capacity` nodes (mctx: `num_simulations + 1`), as an arena search;
    * `"trajectories"`: one iteration's records, `[T, num_games]` (T the game's
      longest length) of observation, policy and legal actions per move;
    * `"replay buffer"`: `buffer_size` positions of observation (in its own dtype),
      policy (`A` float32) and value (float32).
  """
  state = jax.eval_shape(lambda key: game.init(key, config.num_games), jax.random.PRNGKey(0))
  engine = engines.get_engine(config.engine)
  search_capacity = engine.capacity(config.num_simulations, config.search_capacity)
  graphs = GRAPHS_PER_SEARCH * graph_bytes(game, state, search_capacity)
  observation = getattr(state, "observation", None)
  observation_bytes = 0 if observation is None else _bytes_per_game(observation)
  num_actions = int(game.num_actions)
  num_players = int(state.rewards.shape[-1])
  # Per move and game: observation, policy (float32) and legal actions (bool) `[A]`,
  # player, carried visits and overflows (int32), rewards (float32) per player, a
  # validity flag.
  record_bytes = observation_bytes + 5 * num_actions + 12 + 4 * num_players + 1
  length = registry.max_game_length(game) or 0  # `train` refuses a game without one
  trajectories = length * int(config.num_games) * record_bytes
  buffer = int(config.buffer_size) * (observation_bytes + 4 * num_actions + 4)
  return {"graphs": graphs, "trajectories": trajectories, "replay buffer": buffer}


def estimated_self_play_bytes(game, config) -> int:
  """Bytes self-play of `mcgs_jax.apps.train` holds at once for `config` (a
  `train.Config`) on `game` (`registry.game_from_spec(config.game)`): its searches'
  graphs, one iteration's trajectories and the replay buffer (`self_play_parts`).
  Linear in `config.num_games` apart from the buffer."""
  return sum(self_play_parts(game, config).values())


def check_self_play_memory(
  game, config, *, available: int | None = None, warn: bool = True, devices=None
) -> None:
  """`InsufficientMemoryError` (a `ValueError`) naming the estimate when self-play of
  `config` on `game` cannot fit in the memory available; a warning on stderr above
  `WARN_FRACTION` of it (unless `warn` is False).

  Where the parts are held decides what each is compared with. On the CPU every part
  is in the host's memory: their sum against `available` (default: the host's
  available memory). On accelerators the graphs and trajectories are split over
  `devices` (default: the `config.devices` first of `jax.devices()`, all of them for
  None; `mcgs_jax.apps.train.data_parallel`), so one device's share of them is compared
  with `available` (default: one device's limit), and the replay buffer, numpy on
  the host, with the host's memory.
  """
  parts = self_play_parts(game, config)
  devices = jax.devices()[: config.devices] if devices is None else devices
  advice = "fewer games, simulations, capacity or a smaller buffer"
  if devices[0].platform == "cpu":
    check_memory(
      parts,
      owner="self-play",
      users="graphs, trajectories and replay buffer",
      held="its searches' graphs, its trajectories and its replay buffer",
      advice=advice,
      available=host_available_bytes() if available is None else available,
      warn=warn,
    )
    return
  count = len(devices)
  share = {name: -(-parts[name] // count) for name in ("graphs", "trajectories")}
  # Under `jax.distributed` the limit is read from one of this process's devices.
  local = next((d for d in devices if d.process_index == jax.process_index()), devices[0])
  check_memory(
    share,
    owner=f"self-play on each of its {count} device(s)",
    users="graphs and trajectories",
    held=f"its share (1/{count}) of the searches' graphs and trajectories",
    advice=advice,
    available=device_limit_bytes(local) if available is None else available,
    warn=warn,
  )
  host = host_available_bytes()
  if host is not None:
    check_memory(
      {"replay buffer": parts["replay buffer"]},
      owner="the replay buffer",
      users="positions",
      held="its positions, in the host's memory",
      advice="a smaller buffer",
      available=host,
      warn=warn,
    )


def available_bytes() -> int | None:
  """Memory a command can use: the first device's limit on an accelerator, the
  host's available memory on the CPU (None when neither can be read)."""
  device = jax.local_devices()[0]
  return host_available_bytes() if device.platform == "cpu" else device_limit_bytes(device)


def device_limit_bytes(device) -> int | None:
  """`device`'s memory limit (`memory_stats()["bytes_limit"]`), None where unknown."""
  stats = device.memory_stats() or {}
  limit = stats.get("bytes_limit")
  return int(limit) if limit else None


def host_available_bytes() -> int | None:
  """The host's available memory (`MemAvailable` of /proc/meminfo), None where it
  cannot be read."""
  try:
    with open("/proc/meminfo") as handle:
      for line in handle:
        if line.startswith("MemAvailable:"):
          return int(line.split()[1]) * 1024
  except OSError:
    return None
  return None


def _gigabytes(count: float) -> str:
  return f"{count / 1e9:.1f}"


def check_memory(
  parts: Mapping[str, int],
  *,
  owner: str = "the match",
  users: str = "searches",
  held: str = "its searches' graphs",
  advice: str = "fewer games, simulations or capacity",
  available: int | None = None,
  warn: bool = True,
) -> None:
  """`InsufficientMemoryError` when the estimate `parts` (bytes by label; their sum is
  what `owner` needs) cannot fit in `available` bytes (default `available_bytes()`;
  nothing is checked where it cannot be read):

      {owner} needs about N GB for {held} (label n, ...) and M GB are available: {advice}

  and, with `warn`, a warning on stderr above `WARN_FRACTION` of it:

      warning: {owner}'s {users} need about N GB of the M GB available
  """
  available = available_bytes() if available is None else available
  if available is None:
    return
  needed = sum(parts.values())
  if needed > available:
    detail = ", ".join(f"{label} {_gigabytes(count)}" for label, count in parts.items())
    raise InsufficientMemoryError(
      f"{owner} needs about {_gigabytes(needed)} GB for {held} ({detail}) and "
      f"{_gigabytes(available)} GB are available: {advice}"
    )
  if warn and needed > WARN_FRACTION * available:
    print(
      f"warning: {owner}'s {users} need about {_gigabytes(needed)} GB of the "
      f"{_gigabytes(available)} GB available",
      file=sys.stderr,
      flush=True,
    )
