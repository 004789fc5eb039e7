"""A small, complete AlphaZero loop on top of `mcgs_jax`'s graph search.

One iteration of `train(config)`:

1. **Self-play.** `config.num_games` games are played to the end in one jitted
   `lax.scan` over the longest possible game. Every move is chosen by a search in
   graph mode (`hash_fn=game.hash_fn`, `transpositions=True`) guided by the current
   network, and by default each game keeps its graph between moves (`reuse`: the
   next search continues the graph rerooted by the move played, with new Dirichlet
   noise at its root). Each position yields `(observation, policy target = the
   search's action_weights, value target = the game's final outcome for the player
   to move)`, plus a mask that is False for the padding after a game has ended.
   `engine="mctx"` runs the same loop with DeepMind's mctx search instead (a tree
   from scratch at every move), for comparisons.
2. **Replay.** The valid positions go into a fixed-size ring buffer
   (`ReplayBuffer`, numpy on the host).
3. **Training.** `config.train_steps` Adam steps on minibatches drawn uniformly from
   the buffer. Loss = policy cross-entropy + value MSE + `l2` times the sum of
   squared weights (`loss_fn`).
4. **Checkpoint.** Params and optimiser state are written with
   `flax.serialization.to_bytes` to `checkpoint_dir/iteration_XXXX.msgpack`: every
   `checkpoint_every` iterations, at the iterations in `checkpoint_at` (0 is the
   initial network) and after the last one.
5. **Evaluation** (every `eval_every` iterations, `eval_games > 0`). With
   `mcgs_jax.arena.play_match`, the network agent (same policy, same number of
   simulations, graph mode, reuse) plays the uniform-prior MCTS baseline
   (`Agent(policy="muzero", evaluator="uniform", transpositions=False, reuse=False,
   solver=False)`)
   and the network of the previous evaluation (at the first one: the initial
   network).

`train` returns the history: one dict per iteration (losses, timings, scores).
`plot_history(history, path)` draws the learning curve. From the shell:

    python -m mcgs_jax.apps.train --quick            # tic_tac_toe, ~30 s on 2 cores
    python -m mcgs_jax.apps.train --iterations 10 --plot curve.png
    python -m mcgs_jax.apps.train --history h.json --checkpoint-dir ck --checkpoint-at 0,1,5

`benchmarks/training_tables.py` prints RESULTS' tables from the `--history` file,
`benchmarks/checkpoint_matches.py` and `benchmarks/tic_tac_toe_accuracy.py` measure
the checkpoints.
"""

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import optax

import mcgs_jax as mg
from mcgs_jax.apps import data_parallel, files, memory, registry
from mcgs_jax.apps.cli_args import OneLineErrorParser, missing_extra, progress_bar
from mcgs_jax.apps.registry import POLICIES, make_evaluator, mctx_policy
from mcgs_jax.games import evaluators, networks
from mcgs_jax.games.adapter import Game

# Policies whose `action_weights` are a training target (see `make_self_play`).
TRAINING_POLICIES = ("muzero", "gumbel")


@dataclasses.dataclass
class Config:
  """Everything one training run needs.

  Attributes:
    game: pgx env id (`"connect_four"`, `"tic_tac_toe"`).
    num_games: self-play games per iteration, played as one batch.
    num_simulations: search playouts per move (self-play and evaluation).
    policy: `"muzero"` (PUCT, Dirichlet noise, move sampled from the visit counts
      at `temperature`) or `"gumbel"` (Gumbel MuZero).
    engine: `"mcgs"` (this library) or `"mctx"` (self-play searches with DeepMind's
      `mctx.muzero_policy` / `gumbel_muzero_policy`: a tree from scratch at every
      move, the baseline a switching user compares with; `transpositions` and
      `reuse` must then be False).
    transpositions: search a graph (True, the point of this package) or a tree.
    reuse: each self-play game keeps its searched graph between moves
      (`mcgs_jax.reroot` by the move played) and the next search continues it;
      Dirichlet noise is mixed into every new root's prior all the same. A game
      that ends gets an empty graph.
    capacity: nodes per game of the self-play graph (default `num_simulations +
      1`, or `4 * num_simulations + 1` with `reuse`); playouts that find it full
      are counted per iteration (`capacity_overflows`).
    policy_target: with `reuse`, what the muzero policy target counts at a reused
      root: `"new"` (only this search's `num_simulations` root visits; the default,
      measured: +124 Elo over `"all"` at equal wall time, `benchmarks/RESULTS.md`)
      or `"all"` (the visit distribution over every root edge visit, those the
      previous searches left included: `action_weights`). Without reuse both are
      the same. Gumbel's target is its improved policy whatever this says.
    solver: self-play searches prove exact values (`GraphOptions.solver`, the
      MCTS-solver; engine `"mcgs"` only): a proven root plays its best proven move,
      and its policy target stays the search's visits (selection spends no playout
      on edges proven worse, so the target leaves them out).
    full_search_probability: playout cap randomization (KataGo, "Accelerating
      Self-Play Learning in Go", Wu 2019): each move of the batch is searched with
      `num_simulations` with this probability, else with `fast_simulations`
      without root noise; only full-search positions are policy targets, every
      position is a value target. 1.0 (default): every move is a full search. The
      coin is drawn once per move for the whole batch (the games move together).
    forced_playouts: KataGo's forced playouts with policy target pruning (muzero
      only; `k`, 2 in the paper; 0: off): the full searches give each root child
      `sqrt(k * P(c) * sum N)` playouts at least
      (`mcgs_jax.muzero_policy(..., forced_playouts=k)`), and the policy target is
      `mcgs_jax.prune_forced_playouts` of the visits it counts (`policy_target`).
    fast_simulations: simulations of a fast search (default `num_simulations // 4`,
      at least 1); used only with `full_search_probability < 1`.
    temperature: self-play move temperature of the muzero policy.
    hidden: widths of the MLP policy-value network's hidden layers.
    learning_rate: Adam step size.
    l2: weight of the sum of squared weights in the loss.
    buffer_size: positions the replay buffer holds (oldest overwritten first).
    train_batch_size: positions per training step.
    train_steps: training steps per iteration.
    iterations: self-play / training iterations.
    eval_games: arena games per opponent per evaluation (0: no evaluation).
    eval_every: evaluate every this many iterations (and after the last one).
    eval_opening_moves: uniformly random opening plies of each arena game. Arena
      agents play greedily without noise, so this is what makes games differ;
      each opening is played once with each colour.
    seed: seeds everything.
    checkpoint_dir: where checkpoints go (None: none written).
    checkpoint_every: with `checkpoint_dir`, write a checkpoint every this many
      iterations (0: only at `checkpoint_at` and after the last iteration).
    checkpoint_at: with `checkpoint_dir`, iterations that also get a checkpoint;
      0 means the initial network, before any training.
    max_seconds: a wall-time budget (compilation included): no iteration starts
      when the time since the start plus the last iteration's time would pass it
      (None: run every iteration). With it, runs that differ in speed can be
      compared at equal wall time.
    progress: show a tqdm bar (where tqdm is installed; else a line per iteration).
    devices: devices to train on, data-parallel (`mcgs_jax.apps.data_parallel`):
      None for every device of every process (`jax.devices()`), 1 for one device.
      With several, `num_games` and `train_batch_size` must be multiples of the
      count; self-play plays the same games as on one device, and the params agree
      with one device's to rounding (a step sums its batch in another order).
  """

  game: str = "connect_four"
  num_games: int = 64
  num_simulations: int = 32
  policy: str = "muzero"
  engine: str = "mcgs"
  transpositions: bool = True
  reuse: bool = True
  capacity: int | None = None
  policy_target: str = "new"
  solver: bool = False
  full_search_probability: float = 1.0
  fast_simulations: int | None = None
  forced_playouts: float = 0.0
  temperature: float = 1.0
  hidden: Sequence[int] = (128, 128)
  learning_rate: float = 1e-3
  l2: float = 1e-4
  buffer_size: int = 20_000
  train_batch_size: int = 256
  train_steps: int = 100
  iterations: int = 10
  eval_games: int = 32
  eval_every: int = 1
  eval_opening_moves: int = 2
  seed: int = 0
  checkpoint_dir: str | None = None
  checkpoint_every: int = 1
  checkpoint_at: Sequence[int] = ()
  max_seconds: float | None = None
  progress: bool = True
  devices: int | None = None

  def __post_init__(self):
    check_config(self)

  @property
  def search_capacity(self) -> int:
    """Nodes per game of the self-play graph (`capacity` or its default)."""
    if self.capacity is not None:
      return int(self.capacity)
    return 4 * self.num_simulations + 1 if self.reuse else self.num_simulations + 1

  @property
  def playout_cap(self) -> bool:
    """Whether some moves get the fast search (`full_search_probability < 1`)."""
    return float(self.full_search_probability) < 1.0

  @property
  def fast_search_simulations(self) -> int:
    """Simulations of a fast search (`fast_simulations` or its default)."""
    if self.fast_simulations is not None:
      return int(self.fast_simulations)
    return max(1, self.num_simulations // 4)

  @classmethod
  def quick(cls, **overrides) -> "Config":
    """A tic_tac_toe run small enough for a test or a notebook (~30 s on 2 cores)."""
    values: dict[str, Any] = dict(
      game="tic_tac_toe",
      num_games=32,
      num_simulations=16,
      hidden=(64, 64),
      buffer_size=5_000,
      train_batch_size=128,
      train_steps=30,
      iterations=3,
      eval_games=8,
      learning_rate=3e-3,
    )
    values.update(overrides)
    return cls(**values)


# ----------------------------------------------------------------------------------
# Self-play


def max_game_length(game: Game, game_id: str) -> int:
  """Moves after which every game is over (the length of the self-play scan)."""
  length = registry.max_game_length(game)
  if length is None:
    raise ValueError(f"unknown game length for {game_id!r}; add it to registry.MAX_GAME_LENGTH")
  return length


ENGINES = ("mcgs", "mctx")
POLICY_TARGETS = ("all", "new")
MAX_SIMULATIONS = 1_000_000
MAX_SEED = 2**32 - 1


def check_config(config: "Config") -> None:
  """ValueError naming the first field of `config` out of its range (what every
  `Config` runs at construction; `mcgs-jax train` reports it with the flag)."""

  def need(ok: bool, field: str, expected: str) -> None:
    if not ok:
      raise ValueError(f"{field} must be {expected}, got {getattr(config, field)!r}")

  def integer(field: str, minimum: int, maximum: int | None = None) -> None:
    value = getattr(config, field)
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    ok = ok and value >= minimum and (maximum is None or value <= maximum)
    expected = (
      f"an integer >= {minimum}" if maximum is None else (f"an integer from {minimum} to {maximum}")
    )
    need(ok, field, expected)

  def real(field: str, low: float, *, strict: bool) -> None:
    value = getattr(config, field)
    ok = isinstance(value, (int, float, np.floating)) and math.isfinite(float(value))
    ok = ok and (float(value) > low if strict else float(value) >= low)
    need(ok, field, f"a finite number {'>' if strict else '>='} {low:g}")

  need(isinstance(config.game, str) and bool(config.game), "game", "a pgx game id")
  integer("num_games", 1)
  integer("num_simulations", 1, MAX_SIMULATIONS)
  need(config.policy in TRAINING_POLICIES, "policy", f"one of {TRAINING_POLICIES}")
  need(config.engine in ENGINES, "engine", f"one of {ENGINES}")
  need(config.policy_target in POLICY_TARGETS, "policy_target", f"one of {POLICY_TARGETS}")
  if config.engine == "mctx":
    need(not config.transpositions, "transpositions", "False with engine 'mctx' (a tree)")
    need(not config.reuse, "reuse", "False with engine 'mctx' (mctx cannot keep its tree)")
    need(config.capacity is None, "capacity", "None with engine 'mctx'")
    need(not config.solver, "solver", "False with engine 'mctx' (mctx has no solver)")
  if config.capacity is not None:
    integer("capacity", 2)
  real("temperature", 0.0, strict=False)
  real("forced_playouts", 0.0, strict=False)
  need(
    config.forced_playouts == 0 or config.policy == "muzero",
    "forced_playouts",
    "0 with policy 'gumbel' (forced playouts are a PUCT root rule)",
  )
  real("full_search_probability", 0.0, strict=True)
  need(config.full_search_probability <= 1.0, "full_search_probability", "in (0, 1]")
  if config.fast_simulations is not None:
    integer("fast_simulations", 1, max(1, config.num_simulations - 1))
    need(
      config.fast_simulations < config.num_simulations,
      "fast_simulations",
      f"fewer than num_simulations ({config.num_simulations})",
    )
  hidden = tuple(config.hidden)
  need(
    len(hidden) > 0
    and all(isinstance(width, (int, np.integer)) and width >= 1 for width in hidden),
    "hidden",
    "one or more positive layer widths",
  )
  real("learning_rate", 0.0, strict=True)
  real("l2", 0.0, strict=False)
  integer("buffer_size", 1)
  integer("train_batch_size", 1)
  integer("train_steps", 1)
  integer("iterations", 1)
  integer("eval_games", 0)
  need(
    config.eval_games == 0 or config.eval_games % 2 == 0,
    "eval_games",
    "0 or even (each arena opening is played with both colours)",
  )
  integer("eval_every", 1)
  integer("eval_opening_moves", 0)
  integer("seed", 0, MAX_SEED)
  integer("checkpoint_every", 0)
  need(
    all(isinstance(at, (int, np.integer)) and at >= 0 for at in config.checkpoint_at),
    "checkpoint_at",
    "iterations >= 0",
  )
  if config.max_seconds is not None:
    real("max_seconds", 0.0, strict=True)
  if config.devices is not None:
    integer("devices", 1)


def _search_policy(game: Game, config: Config, *, fast: bool = False):
  """`policy(params, key, root, invalid, graph) -> PolicyOutput` of self-play: the
  full search, or with `fast` the playout cap's fast one (`fast_search_simulations`,
  no root noise)."""
  # muzero explores by sampling its move at `temperature`; gumbel by its own noise.
  extra: dict[str, Any] = {}
  if config.policy == "muzero":
    extra["temperature"] = config.temperature
    if fast:
      extra["dirichlet_fraction"] = 0.0
  simulations = config.fast_search_simulations if fast else config.num_simulations
  if config.engine == "mctx":
    mctx_search = mctx_policy(config.policy, game.recurrent_fn, **extra)
    return lambda params, key, root, invalid, graph: mctx_search(
      params, key, root, simulations, invalid
    )
  search_policy = POLICIES[config.policy]
  if config.solver:
    extra["solver"] = True
  if config.forced_playouts > 0 and not fast:  # a fast search has no noise to force
    extra["forced_playouts"] = float(config.forced_playouts)

  def search(params, key, root, invalid, graph):
    return search_policy(
      params,
      key,
      root,
      game.recurrent_fn,
      simulations,
      invalid_actions=invalid,
      hash_fn=game.hash_fn,
      transpositions=config.transpositions,
      capacity=config.search_capacity,
      graph=graph,
      **extra,
    )

  return search


def _capped_search_policy(game: Game, config: Config):
  """Playout cap randomization: `policy(params, key, root, invalid, graph) ->
  (action, action_weights, search_graph or None, full)`, the full search with
  probability `config.full_search_probability` (one coin for the batch), else the
  fast one; `full` is the coin (a scalar bool)."""
  full_search = _search_policy(game, config)
  fast_search = _search_policy(game, config, fast=True)
  keep_graph = config.engine == "mcgs"

  def outputs(search):
    def run(params, key, root, invalid, graph):
      output = search(params, key, root, invalid, graph)
      return output.action, output.action_weights, output.search_graph if keep_graph else None

    return run

  def search(params, key, root, invalid, graph):
    search_key, coin_key = jax.random.split(key)
    full = jax.random.uniform(coin_key) < config.full_search_probability
    action, weights, searched = jax.lax.cond(
      full, outputs(full_search), outputs(fast_search), params, search_key, root, invalid, graph
    )
    return action, weights, searched, full

  return search


def make_self_play(game: Game, config: Config, mesh: jax.sharding.Mesh | None = None):
  """Returns `self_play(params, rng_key) -> dict of [T, B, ...] arrays` (jitted).

  With a `mesh` (`data_parallel.training_mesh`) the games are split over its
  devices (params and key replicated, the records sharded on `B`); the games are
  the same, bit for bit, as on one device.

  With `config.reuse` each game keeps its graph from move to move: the search of
  move `t` continues the graph of move `t - 1` rerooted by the move played (fresh
  Dirichlet noise on the root's prior every move; a game over gets an empty graph).

  The returned dict holds, for move `t` of game `b`:
    * `observation` `[T, B, ...]`: the position before the move, from the mover's
      point of view (pgx observations);
    * `policy` `[T, B, A]`: the policy target: the search's `action_weights`
      (visit distribution for muzero, improved policy for gumbel), or with
      `policy_target="new"` the distribution of this search's own root visits;
      sums to 1 over legal actions;
    * `value` `[T, B]`: the final outcome (+1 win, 0 draw, -1 loss) for the player
      who moves at `t`;
    * `legal` `[T, B, A]`: the legal actions at `t`;
    * `valid` `[T, B]`: False for padding (the game had already ended);
    * `carried_visits` `[T, B]`: root visits the search started with (kept from
      the previous move with `reuse`; 0 otherwise);
    * `capacity_overflows` `[T, B]`: playouts of this search that found the graph
      full (0 for mctx);
    * `new_root_visits` `[T, B]`: root edge visits this search added (one per
      simulation that took a root edge; 0 for mctx);
    * with playout cap randomization (`config.full_search_probability < 1`),
      `policy_weight` `[T, B]` float: 1 for a full search, 0 for a fast one (not a
      policy target).
  """
  length = max_game_length(game, config.game)
  full_search = _search_policy(game, config)
  search = _capped_search_policy(game, config) if config.playout_cap else full_search
  keep_graph = config.reuse and config.engine == "mcgs"

  def move(carry, key):
    params, state, graph = carry
    root_key, search_key = jax.random.split(key)
    invalid = game.invalid_actions(state)
    root = game.root(params, root_key, state)
    if config.playout_cap:
      action, target, searched, full = search(params, search_key, root, invalid, graph)
    else:
      output = search(params, search_key, root, invalid, graph)
      action, target = output.action, output.action_weights
      searched = output.search_graph if config.engine == "mcgs" else None
    valid = ~evaluators.is_finished(state)
    carried = jnp.zeros(valid.shape, jnp.int32)
    overflows = jnp.zeros(valid.shape, jnp.int32)
    new_root_visits = jnp.zeros(valid.shape, jnp.int32)
    if config.engine == "mcgs":
      new_root_visits = jnp.sum(searched.edge_visits[:, 0], axis=-1)
      if graph is not None:
        new_root_visits -= jnp.sum(graph.edge_visits[:, 0], axis=-1)
      earlier_overflows = 0 if graph is None else graph.capacity_overflows
      overflows = searched.capacity_overflows - earlier_overflows
      if graph is not None:
        carried = graph.node_visits[:, 0]
        if config.policy_target == "new" and config.policy == "muzero":
          new_visits = searched.edge_visits[:, 0] - graph.edge_visits[:, 0]
          total = jnp.sum(new_visits, axis=-1, keepdims=True)
          # A search always adds visits to a live root; the guard keeps a
          # finished game's row finite (it is masked out below).
          target = jnp.where(total > 0, new_visits / jnp.maximum(total, 1), target)
      if config.forced_playouts > 0:
        counted = searched.edge_visits[:, 0]
        if graph is not None and config.policy_target == "new":
          counted = counted - graph.edge_visits[:, 0]
        target = mg.prune_forced_playouts(searched, counted, forced_playouts=config.forced_playouts)
    # Finished games are still searched (the batch moves together), but stepping
    # them is a no-op and their records are masked out by `valid`.
    next_state = data_parallel.shard_games(game.step(state, action), mesh)
    next_graph = mg.reroot(searched, action) if keep_graph else None
    next_graph = data_parallel.shard_games(next_graph, mesh)
    record = dict(
      observation=state.observation,
      policy=target,
      legal=state.legal_action_mask & valid[:, None],
      player=state.current_player,
      valid=valid,
      rewards=jnp.asarray(next_state.rewards, jnp.float32),
      carried_visits=jnp.where(valid, carried, 0),
      capacity_overflows=jnp.where(valid, overflows, 0),
      new_root_visits=jnp.where(valid, new_root_visits, 0),
    )
    if config.playout_cap:
      record["policy_weight"] = (full & valid).astype(jnp.float32)
    return (params, next_state, next_graph), record

  def self_play(params, rng_key):
    init_key, moves_key = jax.random.split(rng_key)
    state = data_parallel.shard_games(game.init(init_key, config.num_games), mesh)
    graph = None
    if keep_graph:
      shapes = jax.eval_shape(
        lambda: (
          full_search(
            params, init_key, game.root(params, init_key, state), game.invalid_actions(state), None
          ).search_graph
        )
      )
      graph = data_parallel.shard_games(mg.empty_like(shapes), mesh)
    _, trajectory = jax.lax.scan(move, (params, state, graph), jax.random.split(moves_key, length))
    returns = jnp.sum(trajectory.pop("rewards"), axis=0)  # [B, players]
    player = trajectory.pop("player")  # [T, B]
    value = jnp.take_along_axis(returns[None], player[..., None], axis=-1)[..., 0]
    trajectory["value"] = jnp.where(trajectory["valid"], value, 0.0)
    trajectory["policy"] = jnp.where(trajectory["valid"][..., None], trajectory["policy"], 0.0)
    return trajectory

  if mesh is None:
    return jax.jit(self_play)
  return jax.jit(
    self_play,
    in_shardings=data_parallel.replicated(mesh),
    out_shardings=data_parallel.batch_sharded(mesh, axis=1),
  )


# ----------------------------------------------------------------------------------
# Replay buffer


class ReplayBuffer:
  """A fixed-size ring buffer of training positions (numpy, on the host)."""

  # What a position holds: `policy_weight` only with playout cap randomization.
  FIELDS = ("observation", "policy", "value", "policy_weight")

  def __init__(self, capacity: int):
    self.capacity = int(capacity)
    self.data: dict[str, np.ndarray] = {}
    self.size = 0
    self.cursor = 0

  def add(self, trajectory: dict[str, Any]) -> int:
    """Adds the valid positions of a self-play batch (observation, policy and value
    targets, and `policy_weight` where self-play records it); returns how many."""
    valid = np.asarray(trajectory["valid"]).reshape(-1)
    names = [name for name in self.FIELDS if name in trajectory]
    items = {
      name: np.asarray(trajectory[name]).reshape((valid.size,) + np.shape(trajectory[name])[2:])[
        valid
      ]
      for name in names
    }
    count = int(valid.sum())
    if not self.data:
      self.data = {
        name: np.zeros((self.capacity,) + item.shape[1:], item.dtype)
        for name, item in items.items()
      }
    for start in range(0, count, self.capacity):  # in chunks if count > capacity
      chunk = {name: item[start : start + self.capacity] for name, item in items.items()}
      n = len(chunk["value"])
      index = (self.cursor + np.arange(n)) % self.capacity
      for name, item in chunk.items():
        self.data[name][index] = item
      self.cursor = (self.cursor + n) % self.capacity
      self.size = min(self.size + n, self.capacity)
    return count

  def sample(self, rng: np.random.Generator, batch_size: int) -> dict[str, np.ndarray]:
    """`batch_size` positions drawn uniformly with replacement."""
    if self.size == 0:
      raise ValueError("the replay buffer is empty")
    index = rng.integers(0, self.size, batch_size)
    return {name: item[index] for name, item in self.data.items()}


# ----------------------------------------------------------------------------------
# Network and training step


def loss_fn(params, apply_fn, batch, l2: float):
  """`(total, (policy_loss, value_loss))` on a batch of positions.

  policy: cross-entropy `-sum(target * log_softmax(logits))` (targets are 0 on illegal
  actions, so their logits do not matter), averaged over the positions, or with a
  `policy_weight` in the batch (playout cap randomization) over the weighted ones
  (0 when none is); value: squared error against the final outcome, over every
  position; plus `l2 * sum(w^2)` over all weights. Every term is finite.
  """
  logits, value = apply_fn(params, batch["observation"])
  cross_entropy = -jnp.sum(batch["policy"] * jax.nn.log_softmax(logits), -1)
  if "policy_weight" in batch:
    weight = batch["policy_weight"]
    policy_loss = jnp.sum(weight * cross_entropy) / jnp.maximum(jnp.sum(weight), 1.0)
  else:
    policy_loss = jnp.mean(cross_entropy)
  value_loss = jnp.mean((value - batch["value"]) ** 2)
  weights = sum(jnp.sum(w**2) for w in jax.tree_util.tree_leaves(params))
  return policy_loss + value_loss + l2 * weights, (policy_loss, value_loss)


def make_train_step(apply_fn, optimizer, l2: float, mesh: jax.sharding.Mesh | None = None):
  """Returns the jitted `train_step(params, opt_state, batch) -> (params, opt_state,
  metrics)` with metrics `loss`, `policy_loss`, `value_loss` (before the update).

  With a `mesh` the batch is split over its devices and everything else replicated:
  the loss's mean, and so the gradient, is reduced across the devices."""

  def train_step(params, opt_state, batch):
    (loss, (policy_loss, value_loss)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
      params, apply_fn, batch, l2
    )
    updates, opt_state = optimizer.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return params, opt_state, dict(loss=loss, policy_loss=policy_loss, value_loss=value_loss)

  if mesh is None:
    return jax.jit(train_step)
  replicated = data_parallel.replicated(mesh)
  return jax.jit(
    train_step,
    in_shardings=(replicated, replicated, data_parallel.batch_sharded(mesh)),
    out_shardings=replicated,
  )


# ----------------------------------------------------------------------------------
# Checkpoints


def save_checkpoint(path: str, params, opt_state=None, iteration: int = 0, run_state=None) -> str:
  """Writes params (and optimiser state) with `flax.serialization.to_bytes`, sealed
  with its length and SHA-256 and written atomically (`mcgs_jax.apps.files`): a kill
  during the write leaves the old file or none, never a part of one.

  Without `opt_state` the file holds the network only (about a third of the size
  with Adam's state), which is all an arena agent or an evaluation needs.
  """
  payload = dict(params=params, opt_state=opt_state, iteration=iteration)
  if run_state is not None:  # what `train(..., resume=True)` needs besides
    payload["run_state"] = run_state
  return files.write_atomically(path, files.seal(flax.serialization.to_bytes(payload)))


def _read_state(path: str) -> dict:
  """The state dict stored in the checkpoint `path` (verified by `files.unseal`)."""
  payload = files.unseal(path)
  try:
    state = flax.serialization.msgpack_restore(payload)
  except Exception:  # msgpack's and flax's many error types: all mean the same here
    raise files.CheckpointError(f"checkpoint {path!r} is not a flax checkpoint") from None
  if not isinstance(state, dict) or "params" not in state:
    raise files.CheckpointError(f"checkpoint {path!r} holds no params (not written by train)")
  return state


def _shape_mismatch(template, restored) -> str | None:
  """The first leaf whose shape differs, as `'path: file (..) vs expected (..)'`."""
  expected = jax.tree_util.tree_leaves_with_path(template)
  found = jax.tree_util.tree_leaves(restored)
  for (leaf_path, want), got in zip(expected, found, strict=True):
    if np.shape(want) != np.shape(got):
      name = jax.tree_util.keystr(leaf_path)
      return f"{name}: {np.shape(got)} in the file, {np.shape(want)} expected"
  return None


def load_checkpoint(path: str, params_template, opt_state_template=None):
  """Reads a checkpoint into the given templates; returns `(params, opt_state,
  iteration)`.

  Raises:
    files.CheckpointError (a ValueError) naming `path` when the file is missing,
    empty, truncated or damaged, holds another network (other layers or widths than
    `params_template`), or holds no optimiser state while `opt_state_template` asks
    for one.
  """
  state = _read_state(path)
  if opt_state_template is not None and state.get("opt_state") is None:
    raise files.CheckpointError(
      f"checkpoint {path!r} holds no optimiser state (written with params only, e.g. "
      "by --save-params); load it without opt_state_template"
    )
  template = dict(params=params_template, opt_state=opt_state_template, iteration=0)
  if opt_state_template is None:
    state = dict(state, opt_state=None)
  try:
    payload = flax.serialization.from_state_dict(template, state)
  except (ValueError, KeyError, TypeError) as error:
    raise files.CheckpointError(
      f"checkpoint {path!r} holds another network or optimiser: {error}"
    ) from None
  for name in ("params", "opt_state"):
    mismatch = _shape_mismatch(template[name], payload[name])
    if mismatch:
      raise files.CheckpointError(
        f"checkpoint {path!r} holds {name} of other shapes (another width or game?): {mismatch}"
      )
  return payload["params"], payload["opt_state"], int(payload["iteration"])


_NETWORKS: dict[Any, Any] = {}  # (env, hidden) -> (apply_fn, params template)


def load_network(path: str, env):
  """`(apply_fn, params, iteration)` of the `MLPPolicyValueNet` in a checkpoint.

  The hidden widths are read from the file (the kernels' shapes), so no `Config` is
  needed; `env` gives the observation shape and the number of actions. Checkpoints of
  the same architecture share one `apply_fn` (so arena agents built from them share
  compiled steps).
  """
  payload = _read_state(path)
  layers = payload["params"].get("params", {}) if isinstance(payload["params"], dict) else {}
  if "Dense_0" not in layers or "policy_head" not in layers:
    raise files.CheckpointError(f"checkpoint {path!r} holds no MLPPolicyValueNet")
  hidden: list[int] = []
  while f"Dense_{len(hidden)}" in layers:
    hidden.append(int(np.shape(layers[f"Dense_{len(hidden)}"]["kernel"])[-1]))
  cache_key = (id(env), tuple(hidden))
  if cache_key not in _NETWORKS:
    _NETWORKS[cache_key] = (env,) + networks.init_network(env, jax.random.PRNGKey(0), hidden=hidden)
  _, apply_fn, template = _NETWORKS[cache_key]
  params = flax.serialization.from_state_dict(template, payload["params"])
  expected = jax.tree_util.tree_map(np.shape, template)
  found = jax.tree_util.tree_map(np.shape, params)
  if expected != found:
    size = lambda shapes: (
      shapes["params"]["Dense_0"]["kernel"][0],
      shapes["params"]["policy_head"]["kernel"][-1],
    )
    raise files.CheckpointError(
      f"checkpoint {path!r}: the network does not fit this game (observation size and "
      f"actions {size(found)}, the game has {size(expected)})"
    )
  return apply_fn, params, int(payload.get("iteration", 0))


def checkpoint_path(directory: str, iteration: int) -> str:
  """`directory/iteration_XXXX.msgpack`, where `train` writes iteration's checkpoint."""
  return os.path.join(directory, f"iteration_{iteration:04d}.msgpack")


# ----------------------------------------------------------------------------------
# Evaluation


def network_agent(policy: str, num_simulations: int, apply_fn, name: str = "network"):
  """The arena agent of a trained network: `policy` in graph mode, keeping its graph
  between moves, without the solver (as self-play searches), with the network as
  evaluator (playing greedily, no noise: see `mcgs_jax.apps.arena`)."""
  from mcgs_jax.apps import arena

  return arena.Agent(
    policy=policy,
    evaluator="network",
    num_simulations=num_simulations,
    transpositions=True,
    solver=False,
    apply_fn=apply_fn,
    name=name,
  )


def uniform_baseline(num_simulations: int, name: str = "uniform-mcts"):
  """The baseline the networks are measured against: muzero MCTS (a tree, no solver)
  with a uniform prior and value 0."""
  from mcgs_jax.apps import arena

  return arena.Agent(
    policy="muzero",
    evaluator="uniform",
    num_simulations=num_simulations,
    transpositions=False,
    reuse=False,
    solver=False,
    name=name,
  )


def evaluate(config: Config, apply_fn, params, previous_params, seed: int) -> dict:
  """Arena scores of the network against the uniform MCTS baseline and against the
  previous network (`play_match` of `config.game`, whose `Game` is the one `train`
  plays: `registry.game_from_spec` builds it once). Returns a dict with
  `vs_baseline` and `vs_previous` (each with `wins`, `draws`, `losses`, `score`,
  `elo`; `vs_previous` is None when `previous_params` is) and `eval_first_ply_s`,
  the time of the matches' first plies (which compile the match steps when they are
  new).
  """
  from mcgs_jax.apps import arena

  network = network_agent(config.policy, config.num_simulations, apply_fn)
  baseline = uniform_baseline(config.num_simulations)
  results: dict[str, Any] = {"eval_first_ply_s": 0.0}
  opponents = [("vs_baseline", baseline, None)]
  if previous_params is not None:
    previous = dataclasses.replace(network, name="previous")
    opponents.append(("vs_previous", previous, previous_params))
  for label, opponent, opponent_params in opponents:
    result = arena.play_match(
      config.game,
      network,
      opponent,
      num_games=config.eval_games,
      seed=seed,
      params_a=params,
      params_b=opponent_params,
      opening_moves=config.eval_opening_moves,
    )
    results["eval_first_ply_s"] += result.first_ply_seconds
    results[label] = dict(
      wins=int(result.wins),
      draws=int(result.draws),
      losses=int(result.losses),
      score=float(result.score),
      elo=float(result.elo),
    )
  results.setdefault("vs_previous", None)
  return results


# ----------------------------------------------------------------------------------
# The loop


class History(list):
  """The list of per-iteration dicts that `train` returns, plus the final network:
  `params`, `apply_fn` (`apply_fn(params, observation) -> (logits, value)`) and the
  `config` of the run."""

  params: Any = None
  apply_fn: Any = None
  config: Config | None = None
  initial_checkpoint: str | None = None


def _wants_checkpoint(config: Config, iteration: int) -> bool:
  """Whether `train` writes a checkpoint after `iteration` (0: before training)."""
  if not config.checkpoint_dir:
    return False
  every = int(config.checkpoint_every)
  return (
    iteration in tuple(config.checkpoint_at)
    or iteration == config.iterations
    or (every > 0 and iteration > 0 and iteration % every == 0)
  )


def existing_checkpoints(directory: str | None) -> list[str]:
  """The `iteration_XXXX.msgpack` files already in `directory` (sorted; none when it
  does not exist)."""
  if not directory or not os.path.isdir(directory):
    return []
  return sorted(
    name
    for name in os.listdir(directory)
    if name.startswith("iteration_") and name.endswith(".msgpack")
  )


def _claim_checkpoint_dir(directory: str | None, overwrite: bool) -> None:
  """Refuses (ValueError) a `checkpoint_dir` that holds another run's checkpoints,
  unless `overwrite`, which deletes them first (so no file of the old run is left to
  be mistaken for this one's)."""
  found = existing_checkpoints(directory)
  if not found or directory is None:
    return
  if not overwrite:
    shown = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
    raise ValueError(
      f"checkpoint_dir {directory!r} already holds {len(found)} checkpoint(s) of another "
      f"run ({shown}); pass overwrite=True (--overwrite) to replace them, or choose "
      "another directory"
    )
  for name in found:
    os.unlink(os.path.join(directory, name))


def _check_params(params, fresh_params) -> None:
  """ValueError naming `params` when its tree or shapes are not the network's."""
  paths = lambda tree: [
    jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(tree)
  ]
  if paths(params) != paths(fresh_params):
    raise ValueError(
      "params: another network structure than Config.hidden and the game give "
      f"(arrays {paths(params)[:3]}..., expected {paths(fresh_params)[:3]}...)"
    )
  mismatch = _shape_mismatch(fresh_params, params)
  if mismatch:
    raise ValueError(
      f"params: another width or game than Config.hidden and the game give: {mismatch}"
    )


def train(
  config: Config, *, params=None, on_iteration=None, overwrite: bool = False, resume: bool = False
) -> History:
  """Runs the AlphaZero loop; returns the history (one dict per iteration).

  Each history entry holds `iteration`, `positions` (new valid positions),
  `carried_visits` (mean root visits a self-play search started with, kept from the
  previous move with `reuse`), `capacity_overflows` (self-play playouts that found the
  graph full, summed over the iteration), `buffer_size`, `loss`, `policy_loss`,
  `value_loss` (means over the iteration's training steps), `first_loss` / `last_loss`
  (first and last step), `selfplay_s`, `train_s`, `eval_s` (`eval_compiles`: True at the
  first evaluation, whose time includes compiling the arena; `eval_first_ply_s`: the
  part spent on the matches' first plies, which is where that compiling happens),
  `compile_s` (iteration 1 only: compiling self-play and the train step, ahead of time
  and apart from `selfplay_s` and `train_s`), `elapsed_s` (wall time since the start of
  `train`, compilation included), `checkpoint` (its path, when one was written) and,
  when evaluated, `vs_baseline` / `vs_previous` (see `evaluate`). The final network is
  `history.params` / `history.apply_fn`; `on_iteration(history)`, called after each
  iteration, finds the network of that iteration there.

  Args:
    config: the run's `Config`.
    params: initial network weights (default: a fresh `MLPPolicyValueNet`); of
      the shapes `config.hidden` and the game give, or ValueError naming `params`.
    on_iteration: called as `on_iteration(history)` after every iteration (e.g. to
      save the history so far).
    overwrite: with `config.checkpoint_dir` holding another run's
      `iteration_XXXX.msgpack` files, delete them and start; without it such a
      directory is refused (ValueError) before any work.
    resume: continue the run whose checkpoints are in `config.checkpoint_dir` from
      its last complete checkpoint (params, optimiser state, keys, replay buffer,
      history; a run killed before its first checkpoint starts afresh). The result
      is the run's uninterrupted result, bit for bit on the same machine
      (tests/test_checkpoint_files.py). `config` must be the run's, except
      `iterations`, `max_seconds`, `progress`, `eval_games`, `eval_every` and
      `devices`; a budget counts from the resumed start.

  With several devices (`config.devices`, default all of them) self-play and the
  training steps are data-parallel (`mcgs_jax.apps.data_parallel`); under
  `jax.distributed` every process calls `train` with the same config, and process 0
  writes the files (checkpoints, a resumed run reads them: a shared directory).
  """
  started = time.perf_counter()
  mesh = data_parallel.training_mesh(
    config.devices, num_games=config.num_games, train_batch_size=config.train_batch_size
  )
  key = jax.random.PRNGKey(config.seed)
  init_key, key = jax.random.split(key)
  board = registry.game_from_spec(config.game)  # the one the arena's matches play
  memory.check_self_play_memory(board, config)
  apply_fn, fresh_params = networks.init_network(board.env, init_key, hidden=config.hidden)
  if params is not None:
    _check_params(params, fresh_params)
  params = fresh_params if params is None else params
  if resume and not config.checkpoint_dir:
    raise ValueError("resume=True needs config.checkpoint_dir, where the run left its checkpoints")
  if not resume and data_parallel.writes_files():
    _claim_checkpoint_dir(config.checkpoint_dir, overwrite)
  game = dataclasses.replace(
    board, evaluator=make_evaluator("network", board.env, apply_fn=apply_fn)
  )
  optimizer = optax.adam(config.learning_rate)
  run = _Run(
    params=params,
    opt_state=optimizer.init(params),
    previous_params=params,  # the opponent of "vs_previous": the last evaluated net
    key=key,
    rng=np.random.default_rng(config.seed),
    buffer=ReplayBuffer(config.buffer_size),
    history=History(),
  )
  run.history.apply_fn, run.history.config = apply_fn, config
  first = _resume(config, run) + 1 if resume else 1
  if first == 1 and _wants_checkpoint(config, 0):
    run.history.initial_checkpoint = checkpoint_path(str(config.checkpoint_dir), 0)
    _save_run(run.history.initial_checkpoint, run, 0)
  if mesh is not None:
    run.params, run.opt_state = data_parallel.put(
      (run.params, run.opt_state), data_parallel.replicated(mesh)
    )
  self_play = make_self_play(game, config, mesh)
  train_step = make_train_step(apply_fn, optimizer, config.l2, mesh)
  iterations: Any = range(first, config.iterations + 1)
  bar = (
    progress_bar(iterable=iterations, desc=f"alphazero {config.game}") if config.progress else None
  )
  last_iteration_s = 0.0
  for iteration in iterations if bar is None else bar:
    elapsed = time.perf_counter() - started
    if (
      iteration > first
      and config.max_seconds is not None
      and (elapsed + last_iteration_s > config.max_seconds)
    ):
      break
    iteration_started = time.perf_counter()
    entry: dict[str, Any] = dict(iteration=iteration)
    run.key, play_key = jax.random.split(run.key)
    if mesh is not None:
      play_key = data_parallel.put(play_key, data_parallel.replicated(mesh))
    self_play = _self_play_iteration(
      entry, self_play, run.buffer, run.params, play_key, iteration == first
    )
    run.params, run.opt_state, train_step = _training_iteration(
      entry, config, train_step, run, mesh, iteration == first
    )
    if _wants_checkpoint(config, iteration):
      entry["checkpoint"] = checkpoint_path(str(config.checkpoint_dir), iteration)
    if config.eval_games > 0 and (
      iteration % config.eval_every == 0 or iteration == config.iterations
    ):
      # On the host: the arena places its own arrays (over the devices it uses).
      params = run.params if mesh is None else data_parallel.fetch(run.params)
      _timed_evaluation(entry, config, apply_fn, params, run.previous_params, run.history)
      run.previous_params = params
    entry["elapsed_s"] = time.perf_counter() - started
    last_iteration_s = time.perf_counter() - iteration_started
    run.history.append(entry)
    if "checkpoint" in entry:  # after the iteration is whole: a resume starts after it
      _save_run(entry["checkpoint"], run, iteration)
    if on_iteration is not None:  # it may read the network so far
      run.history.params = run.params if mesh is None else data_parallel.fetch(run.params)
      on_iteration(run.history)
    _report(bar, entry)
  run.history.params = run.params if mesh is None else data_parallel.fetch(run.params)
  return run.history


@dataclasses.dataclass
class _Run:
  """What a training run carries from one iteration to the next (all of it goes into
  every checkpoint `train` writes, so that `resume` continues exactly)."""

  params: Any
  opt_state: Any
  previous_params: Any
  key: Any  # the jax key the next iteration splits
  rng: np.random.Generator  # draws the training minibatches
  buffer: ReplayBuffer
  history: History


def _save_run(path: str, run: _Run, iteration: int) -> None:
  """The checkpoint of `iteration`: params, optimiser state and the rest of `run`
  (written by process 0 alone under `jax.distributed`)."""
  if not data_parallel.writes_files():
    return
  config = run.history.config
  run_state = dict(
    config=json.dumps(dataclasses.asdict(config) if config is not None else {}),
    key=np.asarray(run.key),
    rng=json.dumps(run.rng.bit_generator.state),
    buffer=dict(size=run.buffer.size, cursor=run.buffer.cursor, data=dict(run.buffer.data)),
    previous_params=run.previous_params,
    history=json.dumps(list(run.history)),
    initial_checkpoint=run.history.initial_checkpoint or "",
  )
  params, opt_state = data_parallel.fetch((run.params, run.opt_state))
  save_checkpoint(path, params, opt_state, iteration, run_state=run_state)


# Config fields a resumed run may change: they do not change what it computes.
# `devices` changes only the rounding of the training steps' sums.
_RESUMABLE_CHANGES = (
  "iterations",
  "max_seconds",
  "progress",
  "eval_games",
  "eval_every",
  "devices",
)


def _resume(config: Config, run: _Run) -> int:
  """Restores `run` from the last complete checkpoint in `config.checkpoint_dir`
  that holds a run's state; returns its iteration (0 when there is none: the run
  starts afresh). A damaged last checkpoint (a kill during its write leaves none,
  but a disk can) is skipped for the one before. ValueError when the run's config
  differs from `config` in a field other than `_RESUMABLE_CHANGES`."""
  found = _last_run_checkpoint(config.checkpoint_dir)
  if found is None:
    return 0
  path, state = found
  run_state = state["run_state"]
  _check_same_run(path, json.loads(run_state["config"]), config)
  restore = flax.serialization.from_state_dict
  run.params = restore(run.params, state["params"])
  run.opt_state = restore(run.opt_state, state["opt_state"])
  run.previous_params = restore(run.previous_params, run_state["previous_params"])
  run.key = jnp.asarray(run_state["key"], jnp.uint32)
  run.rng.bit_generator.state = json.loads(run_state["rng"])
  buffer = run_state["buffer"]
  run.buffer.size, run.buffer.cursor = int(buffer["size"]), int(buffer["cursor"])
  run.buffer.data = {name: np.array(array) for name, array in buffer["data"].items()}
  run.history.extend(json.loads(run_state["history"]))
  run.history.initial_checkpoint = run_state["initial_checkpoint"] or None
  return int(state["iteration"])


def _last_run_checkpoint(directory: str | None) -> tuple[str, dict] | None:
  """`(path, state)` of the last readable checkpoint in `directory` that holds a
  run's state (`train` writes it into every checkpoint), or None."""
  for name in reversed(existing_checkpoints(directory)):
    path = os.path.join(str(directory), name)
    try:
      state = _read_state(path)
    except files.CheckpointError:
      continue
    if isinstance(state.get("run_state"), dict):
      return path, state
  return None


def _check_same_run(path: str, stored: dict, config: Config) -> None:
  """ValueError naming the first config field in which `config` differs from the
  run that wrote `path`."""
  given = json.loads(json.dumps(dataclasses.asdict(config)))
  for field, value in stored.items():
    if field not in _RESUMABLE_CHANGES and given.get(field) != value:
      raise ValueError(
        f"resume: checkpoint {path!r} is of a run with {field}={value!r}, not "
        f"{given.get(field)!r}; resume with that run's config"
      )


def _self_play_iteration(
  entry: dict, self_play, buffer: ReplayBuffer, params, key, first: bool
) -> Any:
  """Plays one iteration's games into `buffer` and records it in `entry`; returns
  `self_play`, compiled ahead of time at the `first` iteration of this process (timed
  apart, `compile_s`)."""
  if first:
    start = time.perf_counter()
    self_play = self_play.lower(params, key).compile()
    entry["compile_s"] = time.perf_counter() - start
  start = time.perf_counter()
  trajectory = data_parallel.fetch(self_play(params, key))
  entry["positions"] = buffer.add(trajectory)
  valid = np.asarray(trajectory["valid"])
  entry["carried_visits"] = float(np.asarray(trajectory["carried_visits"])[valid].mean())
  entry["capacity_overflows"] = int(np.asarray(trajectory["capacity_overflows"]).sum())
  if "policy_weight" in trajectory:
    entry["full_search_fraction"] = float(np.asarray(trajectory["policy_weight"])[valid].mean())
  entry["buffer_size"] = buffer.size
  entry["selfplay_s"] = time.perf_counter() - start
  return self_play


def _training_iteration(entry: dict, config: Config, train_step, run: _Run, mesh, first: bool):
  """`config.train_steps` steps on minibatches of `run.buffer`, their losses recorded
  in `entry`; returns `(params, opt_state, train_step)`, the step compiled ahead of
  time at the `first` iteration (its time added to `compile_s`, not to `train_s`).
  With a `mesh` each minibatch is split over its devices."""
  params, opt_state = run.params, run.opt_state
  metrics = []
  train_start: float | None = None
  for _ in range(config.train_steps):
    batch = run.buffer.sample(run.rng, config.train_batch_size)
    if mesh is not None:
      batch = data_parallel.put(batch, data_parallel.batch_sharded(mesh))
    if first and train_start is None:
      compile_start = time.perf_counter()
      train_step = train_step.lower(params, opt_state, batch).compile()
      entry["compile_s"] += time.perf_counter() - compile_start
    if train_start is None:
      train_start = time.perf_counter()
    params, opt_state, step_metrics = train_step(params, opt_state, batch)
    metrics.append(step_metrics)
  metrics = data_parallel.fetch(metrics)
  for name in ("loss", "policy_loss", "value_loss"):
    entry[name] = float(np.mean([m[name] for m in metrics]))
  entry["first_loss"] = float(metrics[0]["loss"])
  entry["last_loss"] = float(metrics[-1]["loss"])
  entry["train_s"] = time.perf_counter() - train_start if train_start is not None else 0.0
  return params, opt_state, train_step


def _timed_evaluation(entry, config, apply_fn, params, previous_params, history):
  """`evaluate` into `entry`, with its time (`eval_s`) and whether it is the run's
  first evaluation, which also compiles the arena's match steps."""
  start = time.perf_counter()
  seed = config.seed * 1000 + entry["iteration"]
  entry.update(evaluate(config, apply_fn, params, previous_params, seed=seed))
  entry["eval_s"] = time.perf_counter() - start
  entry["eval_compiles"] = not any("eval_s" in earlier for earlier in history)


def _report(bar, entry: dict) -> None:
  """The iteration on the progress bar, or one printed line without one."""
  if bar is None:
    print(format_entry(entry), flush=True)
    return
  postfix = dict(loss=f"{entry['loss']:.3f}")
  if "vs_baseline" in entry:
    postfix["vs_uniform"] = f"{entry['vs_baseline']['score']:.2f}"
  bar.set_postfix(postfix)


def format_entry(entry: dict) -> str:
  """One line per iteration: loss and scores."""
  text = ""
  if "compile_s" in entry:
    text += f"compile {entry['compile_s']:.1f}s (self-play and train step)  "
  text = (
    f"iter {entry['iteration']:3d}  {text}loss {entry['loss']:.3f} "
    f"(policy {entry['policy_loss']:.3f}, value {entry['value_loss']:.3f})  "
    f"positions {entry['positions']}  self-play {entry['selfplay_s']:.1f}s  "
    f"train {entry['train_s']:.1f}s"
  )
  if entry.get("carried_visits"):
    text += f"  carried root visits {entry['carried_visits']:.1f}"
  if entry.get("capacity_overflows"):
    text += f"  capacity overflows {entry['capacity_overflows']}"
  if "full_search_fraction" in entry:
    text += f"  full searches {entry['full_search_fraction']:.2f}"
  for label in ("vs_baseline", "vs_previous"):
    result = entry.get(label)
    if result:
      text += (
        f"  {label} {result['wins']}-{result['draws']}-{result['losses']} "
        f"score {result['score']:.2f}"
      )
  if "eval_s" in entry:
    text += f"  arena {entry['eval_s']:.1f}s"
    if entry.get("eval_compiles"):
      text += (
        f" (of which {entry.get('eval_first_ply_s', 0.0):.1f}s first plies, compiling the arena)"
      )
  return text


def plot_history(history: list[dict], path: str | None = None):
  """Loss and arena scores per iteration; saved to `path` when given. Returns the
  matplotlib figure."""
  import matplotlib

  if path is not None:
    matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  figure, (loss_axis, score_axis) = plt.subplots(1, 2, figsize=(10, 3.5))
  steps = [entry["iteration"] for entry in history]
  for name in ("loss", "policy_loss", "value_loss"):
    loss_axis.plot(steps, [entry[name] for entry in history], marker="o", label=name)
  loss_axis.set_xlabel("iteration")
  loss_axis.set_title("training loss")
  loss_axis.legend()
  for label, text in (("vs_baseline", "vs uniform MCTS"), ("vs_previous", "vs previous network")):
    points = [(entry["iteration"], entry[label]["score"]) for entry in history if entry.get(label)]
    if points:
      score_axis.plot(*zip(*points, strict=True), marker="o", label=text)
  score_axis.axhline(0.5, color="grey", linestyle=":")
  score_axis.set_ylim(-0.05, 1.05)
  score_axis.set_xlabel("iteration")
  score_axis.set_title("arena score (win = 1, draw = 0.5)")
  if score_axis.get_legend_handles_labels()[0]:
    score_axis.legend()
  else:
    score_axis.text(0.5, 0.5, "not evaluated", ha="center", transform=score_axis.transAxes)
  figure.tight_layout()
  if path is not None:
    files.save_figure(figure, path)
  return figure


def save_history(path: str, history: History) -> None:
  """Writes `{"config": ..., "history": [...]}` as JSON (what `--history` writes and
  `benchmarks/training_tables.py` reads)."""
  if history.config is None:
    raise ValueError("a history without its config (not made by train)")
  payload = dict(config=dataclasses.asdict(history.config), history=list(history))
  if history.initial_checkpoint:
    payload["initial_checkpoint"] = history.initial_checkpoint
  files.write_atomically(path, json.dumps(payload, indent=1))


def _int_list(text: str):
  try:
    return tuple(int(value) for value in text.split(",") if value.strip())
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _float(text: str) -> float:
  try:
    return float(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _int(text: str) -> int:
  try:
    return int(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


# The flags that mirror `Config` fields: (flag, field, type, help). Their ranges are
# `check_config`'s, reported with the flag's name.
_CONFIG_FLAGS: tuple[tuple[str, str, Any, str], ...] = (
  ("--game", "game", str, "pgx game id"),
  ("--policy", "policy", str, f"self-play search policy, one of {TRAINING_POLICIES}"),
  ("--engine", "engine", str, "self-play search: mcgs (this library) or mctx (DeepMind's)"),
  ("--games", "num_games", _int, "self-play games per iteration"),
  ("--simulations", "num_simulations", _int, "search simulations per move"),
  ("--capacity", "capacity", _int, "nodes per game of the self-play graph"),
  ("--policy-target", "policy_target", str, "with reuse: all root visits or the new ones"),
  ("--temperature", "temperature", _float, "self-play move temperature (muzero)"),
  (
    "--full-search-probability",
    "full_search_probability",
    _float,
    "playout cap randomization: the share of moves searched fully (the others fast, "
    "not policy targets)",
  ),
  ("--fast-simulations", "fast_simulations", _int, "simulations of a fast search"),
  (
    "--forced-playouts",
    "forced_playouts",
    _float,
    "KataGo's forced playouts k with policy target pruning (muzero; 0: off)",
  ),
  ("--iterations", "iterations", _int, "self-play / training iterations"),
  ("--train-steps", "train_steps", _int, "training steps per iteration"),
  ("--eval-games", "eval_games", _int, "arena games per opponent per evaluation, 0 for none"),
  ("--eval-every", "eval_every", _int, "evaluate every N iterations and after the last"),
  ("--hidden", "hidden", _int_list, "comma-separated hidden layer widths"),
  ("--learning-rate", "learning_rate", _float, "Adam step size"),
  ("--buffer-size", "buffer_size", _int, "positions in the replay buffer"),
  ("--train-batch-size", "train_batch_size", _int, "positions per training step"),
  ("--seed", "seed", _int, "random seed"),
  ("--devices", "devices", _int, "devices to train on, data-parallel"),
  ("--max-seconds", "max_seconds", _float, "wall-time budget: start no iteration past it"),
  ("--checkpoint-dir", "checkpoint_dir", str, "write checkpoints (params and Adam state) here"),
  (
    "--checkpoint-every",
    "checkpoint_every",
    _int,
    "checkpoint every N iterations (0 with --checkpoint-at: only those and the last)",
  ),
  (
    "--checkpoint-at",
    "checkpoint_at",
    _int_list,
    "comma-separated iterations to checkpoint (0: the initial network); alone it "
    "implies --checkpoint-every 0",
  ),
)
_FLAG_OF_FIELD = {field: flag for flag, field, _, _ in _CONFIG_FLAGS}
_FLAG_OF_FIELD.update(transpositions="--tree", reuse="--no-reuse", solver="--solver")


def _config_error(error: ValueError) -> str:
  """`check_config`'s message with the field named by its flag."""
  message = str(error)
  field = message.split(" ", 1)[0]
  if field in _FLAG_OF_FIELD:
    message = f"{_FLAG_OF_FIELD[field]}: {message}"
  return message


def _check_game(config: Config) -> None:
  """ValueError when `config.game` cannot be trained on: unknown, no observation
  for the network, or no known game length."""
  try:
    game = registry.game_from_spec(config.game)
  except (ValueError, KeyError, TypeError) as error:
    raise ValueError(f"--game {config.game!r}: {' '.join(str(error).split())}") from None
  state = game.init(jax.random.PRNGKey(0), 1)
  if getattr(state, "observation", None) is None or not hasattr(state, "current_player"):
    raise ValueError(
      f"--game {config.game!r}: training needs a pgx board game with an observation "
      f"for the network (e.g. {', '.join(registry.MAX_GAME_LENGTH)})"
    )
  try:
    max_game_length(game, config.game)
  except ValueError as error:
    raise ValueError(f"--game {config.game!r}: {error}") from None


def build_parser():
  """The `mcgs-jax train` parser (one flag per `Config` field it mirrors)."""
  defaults, quick = Config(), Config.quick()

  unset = {
    "capacity": "4 * simulations + 1 with reuse, else simulations + 1",
    "max_seconds": "no budget",
    "checkpoint_dir": "none",
    "checkpoint_at": "none",
    "devices": "every device of every process",
    "fast_simulations": "simulations // 4",
  }

  def shown(field: str) -> str:
    value, small = getattr(defaults, field), getattr(quick, field)
    show = lambda v: (
      unset[field]
      if v is None or v == ()
      else ",".join(map(str, v))
      if isinstance(v, tuple)
      else str(v)
    )
    text = f"default: {show(value)}"
    if small != value:
      text += f"; with --quick: {show(small)}"
    return f"({text})"

  parser = OneLineErrorParser(
    prog="mcgs-jax train",
    description=__doc__.splitlines()[0],
    epilog="Defaults in parentheses; --quick changes some of them (shown). Compile "
    "time is reported apart from self-play, training and arena time. Bad input exits "
    "with status 2 and one line naming the flag, before any work.",
  )
  parser.add_argument(
    "--quick",
    action="store_true",
    help="smoke test: a tiny tic_tac_toe run (Config.quick(), ~30 s on "
    "2 cores) that checks the pipeline, not a useful network",
  )
  for flag, field, kind, text in _CONFIG_FLAGS:
    parser.add_argument(flag, dest=field, type=kind, help=f"{text} {shown(field)}")
  parser.add_argument(
    "--tree",
    dest="transpositions",
    action="store_false",
    default=None,
    help="self-play searches a tree (MCTS) instead of a graph (implied by --engine mctx)",
  )
  parser.add_argument(
    "--no-reuse",
    dest="reuse",
    action="store_false",
    default=None,
    help="search every self-play move from scratch instead of continuing the graph kept "
    "from the previous move (implied by --engine mctx)",
  )
  parser.add_argument(
    "--solver",
    action="store_true",
    default=None,
    help="self-play searches prove exact values (the MCTS-solver; a proven root plays "
    "its best proven move)",
  )
  parser.add_argument(
    "--save-params",
    metavar="FILE",
    help="write the final network (params only, no optimiser state) "
    "to this file (default: not written)",
  )
  parser.add_argument(
    "--resume",
    metavar="DIR",
    help="continue the run whose checkpoints are in DIR from its last complete one, "
    "with that run's flags (give no others but --iterations, --max-seconds, --devices, "
    "--history, --plot, --save-params)",
  )
  parser.add_argument(
    "--overwrite",
    action="store_true",
    help="let --checkpoint-dir replace the checkpoints another run left there (default: "
    "such a directory is refused before any work)",
  )
  parser.add_argument("--plot", help="save the learning curve to this file (default: no plot)")
  parser.add_argument(
    "--history",
    help="save the history as JSON to this file (rewritten after "
    "every iteration; default: not saved)",
  )
  return parser


def config_from_args(args) -> Config:
  """The `Config` of parsed flags; ValueError naming the flag when out of range."""
  if args.checkpoint_at is not None and args.checkpoint_every is None:
    args.checkpoint_every = 0
  overrides = {
    name: value
    for name, value in vars(args).items()
    if name not in ("quick", "plot", "history", "save_params", "overwrite", "resume")
    and value is not None
  }
  if overrides.get("engine") == "mctx":  # mctx searches a tree from scratch
    overrides.setdefault("transpositions", False)
    overrides.setdefault("reuse", False)
  overrides.setdefault("progress", False)
  try:
    return Config.quick(**overrides) if args.quick else Config(**overrides)
  except ValueError as error:
    raise ValueError(_config_error(error)) from None


def resumed_config(args) -> Config:
  """The `Config` of the run whose checkpoints are in `args.resume`, with
  `--iterations`, `--max-seconds` and `--devices` applied; ValueError when there is no such
  checkpoint or other run flags are given."""
  allowed = {"iterations", "max_seconds", "progress", "devices"}
  given = [
    name
    for name, value in vars(args).items()
    if name in {field.name for field in dataclasses.fields(Config)}
    and name not in allowed
    and value is not None
  ]
  if args.quick or given:
    raise ValueError(f"--resume takes the run's own flags; drop {given or ['--quick']}")
  found = _last_run_checkpoint(args.resume)
  if found is None:
    raise ValueError(f"--resume {args.resume!r}: no checkpoint of a train run there")
  stored = json.loads(found[1]["run_state"]["config"])
  stored.update(checkpoint_dir=args.resume, progress=False)
  stored.update(
    {
      k: getattr(args, k)
      for k in ("iterations", "max_seconds", "devices")
      if getattr(args, k) is not None
    }
  )
  fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in stored.items()}
  return Config(**fields)


def main(argv=None):
  """`python -m mcgs_jax.apps.train [--quick] [options]` (or `mcgs-jax train`);
  returns the exit status: 0, or 2 for bad input (one line on stderr, before any
  work; a flag argparse refuses raises `SystemExit(2)` with one line).
  `train(config)` returns the history."""
  parser = build_parser()
  args = parser.parse_args(argv)  # bad flags: SystemExit(2), one line; --help: 0
  try:
    config = resumed_config(args) if args.resume else config_from_args(args)
    _check_game(config)
    memory.check_self_play_memory(registry.game_from_spec(config.game), config, warn=False)
    try:  # the devices exist and take equal parts
      data_parallel.training_mesh(
        config.devices, num_games=config.num_games, train_batch_size=config.train_batch_size
      )
    except ValueError as error:
      raise ValueError(_config_error(error)) from None
    for flag, path in (("--plot", args.plot), ("--history", args.history)):
      files.check_output_path(flag, path)
    files.check_output_path("--save-params", args.save_params)
    missing = missing_extra("matplotlib") if args.plot else None
    if missing:
      raise ValueError(f"--plot {missing}")
    files.check_output_path("--checkpoint-dir", config.checkpoint_dir, directory=True)
    if not (args.overwrite or args.resume):
      _claim_checkpoint_dir(config.checkpoint_dir, overwrite=False)
  except ValueError as error:
    print(f"{parser.prog}: error: {' '.join(str(error).split())}", file=sys.stderr)
    return 2
  if args.quick:
    print(
      "--quick: smoke test (a tiny tic_tac_toe run that checks the pipeline; "
      "it does not train a useful network)",
      flush=True,
    )
  print(config, flush=True)
  on_iteration = None
  if args.history:
    on_iteration = lambda history: save_history(args.history, history)
  if args.overwrite:
    _claim_checkpoint_dir(config.checkpoint_dir, overwrite=True)
  if args.resume:
    history = train(config, on_iteration=on_iteration, resume=True)
  else:
    history = train(config, on_iteration=on_iteration)
  if args.save_params:
    save_checkpoint(args.save_params, history.params, None, config.iterations)
  if args.plot:
    plot_history(history, args.plot)
  return 0


if __name__ == "__main__":
  sys.exit(main())
