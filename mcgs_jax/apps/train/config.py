"""The settings of a training run: `Config`, every field checked at construction
(`check_config`)."""

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mcgs_jax.apps import engines, registry
from mcgs_jax.apps.seeds import MAX_SEED

# Policies whose `action_weights` are a training target (see `make_self_play`).
TRAINING_POLICIES = registry.TRAINING_POLICY_NAMES

ENGINES = engines.ENGINE_NAMES
POLICY_TARGETS = ("all", "new")
MAX_SIMULATIONS = 1_000_000


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
    make_room: with `reuse`, `reroot` keeps at most `capacity - num_simulations`
      nodes of each game's graph, the most visited (`mcgs_jax.reroot(...,
      max_nodes=...)`), so that every playout of the next search finds a free row
      (none is lost to `capacity_overflows`). False (default): every reachable
      node is kept.
    policy_target: with `reuse`, what the muzero policy target counts at a reused
      root: `"new"` (only this search's `num_simulations` root visits; the default,
      stronger than `"all"` at equal wall time)
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
      only; `k`, 2 in the paper; 0: off): the full searches give each visited root child
      `sqrt(k * P(c) * sum N)` playouts at least
      (`mcgs_jax.muzero_policy(..., forced_playouts=k)`), and the policy target is
      `mcgs_jax.prune_forced_playouts` of the visits it counts (`policy_target`).
      None (default): 2 with policy `"muzero"` on engine `"mcgs"`, the best variant of
      the training race (`benchmarks/training_race.py`), else
      0 (`self_play_forced_playouts`).
    fast_simulations: simulations of a fast search (default `num_simulations // 4`,
      at least 1); used only with `full_search_probability < 1`.
    temperature: self-play move temperature of the muzero policy.
    hidden: widths of the MLP policy-value network's hidden layers.
    network: the policy-value network (`mcgs_jax.games.networks.parse_network`):
      `"mlp"` (default; widths `hidden`), `"resnet:BLOCKS,CHANNELS"` (a residual
      convolutional network over a board's planes `[H, W, C]`, as in pgx's
      AlphaZero example) or `"entity:BLOCKS,WIDTH"` (a set network over one row of
      features per action: jumanji's Knapsack and TSP). On
      Knapsack-v1, 300 s of training on this project's 2-core CPU reached a 5.6% gap
      to the optimum with the MLP, 22% with `entity:0,64` and 51% with `entity:1,32`
      (benchmarks/RESULTS.md, "Networks for planning").
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
      iterations (0: only at `checkpoint_at` and after the last iteration played,
      the last of `iterations` or the one a stop came after).
    checkpoint_at: with `checkpoint_dir`, iterations that also get a checkpoint;
      0 means the initial network, before any training.
    max_seconds: a wall-time budget (compilation included): no iteration starts
      when the time since the start plus the last iteration's time would pass it
      (None: run every iteration); the last iteration played is checkpointed. With
      it, runs that differ in speed can be compared at equal wall time.
    progress: show a tqdm bar (where tqdm is installed; else a line per iteration).
    devices: devices to train on, data-parallel (`mcgs_jax.apps.train.data_parallel`):
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
  make_room: bool = False
  policy_target: str = "new"
  solver: bool = False
  full_search_probability: float = 1.0
  fast_simulations: int | None = None
  forced_playouts: float | None = None
  temperature: float = 1.0
  hidden: Sequence[int] = (128, 128)
  network: str = "mlp"
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
    _to_python_values(self)
    check_config(self)

  @property
  def search_capacity(self) -> int:
    """Nodes per game of the self-play graph (`capacity` or its default)."""
    if self.capacity is not None:
      return int(self.capacity)
    return 4 * self.num_simulations + 1 if self.reuse else self.num_simulations + 1

  @property
  def self_play_forced_playouts(self) -> float:
    """`forced_playouts`, or its default: 2 for muzero on this library's engine, else 0."""
    if self.forced_playouts is not None:
      return float(self.forced_playouts)
    return 2.0 if self.policy == "muzero" and self.engine == "mcgs" else 0.0

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
    """A tic_tac_toe run small enough for a test or a notebook."""
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


def _to_python_values(config: "Config") -> None:
  """Replaces numpy scalars in `config`'s fields (`np.int64(1)`, `np.float32(0.5)`,
  `np.bool_(True)`, and those in the `hidden` and `checkpoint_at` sequences) by the
  Python values they hold: a run's config is written into its checkpoints as JSON,
  which takes no numpy scalar."""
  python = lambda value: value.item() if isinstance(value, np.generic) else value
  for field in dataclasses.fields(config):
    value = getattr(config, field.name)
    if isinstance(value, (list, tuple, np.ndarray)):
      value = tuple(python(item) for item in value)
    setattr(config, field.name, python(value))


class _FieldChecks:
  """The checks of `check_config`: each raises ValueError naming the field of
  `config` out of its range."""

  def __init__(self, config: "Config"):
    self.config = config

  def need(self, ok: bool, field: str, expected: str) -> None:
    if not ok:
      raise ValueError(f"{field} must be {expected}, got {getattr(self.config, field)!r}")

  def integer(self, field: str, minimum: int, maximum: int | None = None) -> None:
    value = getattr(self.config, field)
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    ok = ok and value >= minimum and (maximum is None or value <= maximum)
    expected = (
      f"an integer >= {minimum}" if maximum is None else (f"an integer from {minimum} to {maximum}")
    )
    self.need(ok, field, expected)

  def real(self, field: str, low: float, *, strict: bool) -> None:
    value = getattr(self.config, field)
    ok = isinstance(value, (int, float, np.floating)) and math.isfinite(float(value))
    ok = ok and (float(value) > low if strict else float(value) >= low)
    self.need(ok, field, f"a finite number {'>' if strict else '>='} {low:g}")


def check_config(config: "Config") -> None:
  """ValueError naming the first field of `config` out of its range (what every
  `Config` runs at construction; `mcgs-jax train` reports it with the flag), in the
  order of its fields."""
  checks = _FieldChecks(config)
  _check_search(checks, config)
  _check_self_play(checks, config)
  _check_training(checks, config)


def _check_search(checks: _FieldChecks, config: "Config") -> None:
  """The game, the search and what its engine supports."""
  need, integer = checks.need, checks.integer
  need(isinstance(config.game, str) and bool(config.game), "game", "a pgx game id")
  integer("num_games", 1)
  integer("num_simulations", 1, MAX_SIMULATIONS)
  need(config.policy in TRAINING_POLICIES, "policy", f"one of {TRAINING_POLICIES}")
  need(config.engine in ENGINES, "engine", f"one of {ENGINES}")
  need(config.policy_target in POLICY_TARGETS, "policy_target", f"one of {POLICY_TARGETS}")
  engine = engines.get_engine(config.engine)
  name = config.engine
  if not engine.keeps_graph:
    need(not config.transpositions, "transpositions", f"False with engine {name!r} (a tree)")
    need(not config.reuse, "reuse", f"False with engine {name!r} ({name} cannot keep its tree)")
    need(config.capacity is None, "capacity", f"None with engine {name!r}")
  if not engine.solver:
    need(not config.solver, "solver", f"False with engine {name!r} ({name} has no solver)")
  if config.capacity is not None:
    integer("capacity", 2)
  need(isinstance(config.make_room, (bool, np.bool_)), "make_room", "True or False")
  if config.make_room:
    need(config.reuse, "make_room", "False without reuse (there is no graph to reroot)")
    need(
      config.search_capacity > config.num_simulations,
      "make_room",
      f"False with capacity {config.search_capacity} <= num_simulations "
      f"({config.num_simulations}): no node would be kept",
    )


def _check_self_play(checks: _FieldChecks, config: "Config") -> None:
  """Self-play's options: temperature, forced playouts, the playout cap."""
  need, integer, real = checks.need, checks.integer, checks.real
  real("temperature", 0.0, strict=False)
  if config.forced_playouts is not None:
    real("forced_playouts", 0.0, strict=False)
    need(
      config.forced_playouts == 0 or config.policy == "muzero",
      "forced_playouts",
      "0 with policy 'gumbel' (forced playouts are a PUCT root rule)",
    )
    name = config.engine
    need(
      config.forced_playouts == 0 or not engines.get_engine(name).external,
      "forced_playouts",
      f"0 with engine {name!r} ({name}'s search has no forced playouts)",
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


def _check_training(checks: _FieldChecks, config: "Config") -> None:
  """The network, the optimiser, the evaluation, checkpoints and the budget."""
  need, integer, real = checks.need, checks.integer, checks.real
  hidden = tuple(config.hidden)
  need(
    len(hidden) > 0
    and all(isinstance(width, (int, np.integer)) and width >= 1 for width in hidden),
    "hidden",
    "one or more positive layer widths",
  )
  from mcgs_jax.games.networks import parse_network  # flax: the train extra

  try:
    parse_network(config.network)
  except ValueError as error:
    checks.need(False, "network", str(error).partition(": expected ")[2])
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
