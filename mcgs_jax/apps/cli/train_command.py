"""The command line of the training loop (`mcgs-jax train`, `main`): its parser, one
flag per `Config` field it mirrors, the `Config` of the parsed flags (or of the run
that `--resume` continues), and the run with its history file and Ctrl-C."""

import contextlib
import dataclasses
import json
import sys
from typing import Any

import jax

from mcgs_jax.apps import engines, files, memory_estimates, partial, registry
from mcgs_jax.apps.cli.args import OneLineErrorParser, int_tuple, integer, number
from mcgs_jax.apps.extras import missing_extra
from mcgs_jax.apps.train import data_parallel
from mcgs_jax.apps.train.checkpoint_files import (
  check_resumable_iterations,
  claim_checkpoint_dir,
  last_run_checkpoint,
  read_run_config,
  run_lock,
  save_checkpoint,
)
from mcgs_jax.apps.train.config import TRAINING_POLICIES, Config
from mcgs_jax.apps.train.history import History, plot_history, save_history
from mcgs_jax.apps.train.loop import TrainingDiverged, train
from mcgs_jax.apps.train.self_play import max_game_length

# `--help`'s description: the first line of `mcgs_jax.apps.train`'s doc.
DESCRIPTION = "A small, complete AlphaZero loop on top of `mcgs_jax`'s graph search."


# The flags that mirror `Config` fields: (flag, field, type, help). Their ranges are
# `check_config`'s, reported with the flag's name.
_CONFIG_FLAGS: tuple[tuple[str, str, Any, str], ...] = (
  ("--game", "game", str, "pgx game id, or jumanji:<env id> (one-player)"),
  ("--policy", "policy", str, f"self-play search policy, one of {TRAINING_POLICIES}"),
  ("--engine", "engine", str, "self-play search: mcgs (this library) or mctx (DeepMind's)"),
  ("--games", "num_games", integer, "self-play games per iteration"),
  ("--simulations", "num_simulations", integer, "search simulations per move"),
  ("--capacity", "capacity", integer, "nodes per game of the self-play graph"),
  ("--policy-target", "policy_target", str, "with reuse: all root visits or the new ones"),
  ("--temperature", "temperature", number, "self-play move temperature (muzero)"),
  (
    "--full-search-probability",
    "full_search_probability",
    number,
    "playout cap randomization: the share of moves searched fully (the others fast, "
    "not policy targets)",
  ),
  ("--fast-simulations", "fast_simulations", integer, "simulations of a fast search"),
  (
    "--forced-playouts",
    "forced_playouts",
    number,
    "KataGo's forced playouts k with policy target pruning (muzero; 0: off; default 2 "
    "with muzero on this library's engine, else 0)",
  ),
  ("--iterations", "iterations", integer, "self-play / training iterations"),
  ("--train-steps", "train_steps", integer, "training steps per iteration"),
  ("--eval-games", "eval_games", integer, "arena games per opponent per evaluation, 0 for none"),
  ("--eval-every", "eval_every", integer, "evaluate every N iterations and after the last"),
  ("--hidden", "hidden", int_tuple, "comma-separated hidden layer widths"),
  (
    "--network",
    "network",
    str,
    "mlp (widths --hidden), resnet:BLOCKS,CHANNELS (a residual convolutional network "
    "over a board's planes: pgx's games) or entity:BLOCKS,WIDTH (a set network: "
    "jumanji's Knapsack, TSP)",
  ),
  ("--learning-rate", "learning_rate", number, "Adam step size"),
  ("--buffer-size", "buffer_size", integer, "positions in the replay buffer"),
  ("--train-batch-size", "train_batch_size", integer, "positions per training step"),
  ("--seed", "seed", integer, "random seed"),
  ("--devices", "devices", integer, "devices to train on, data-parallel"),
  ("--max-seconds", "max_seconds", number, "wall-time budget: start no iteration past it"),
  ("--checkpoint-dir", "checkpoint_dir", str, "write checkpoints (params and Adam state) here"),
  (
    "--checkpoint-every",
    "checkpoint_every",
    integer,
    "checkpoint every N iterations (0 with --checkpoint-at: only those and the last)",
  ),
  (
    "--checkpoint-at",
    "checkpoint_at",
    int_tuple,
    "comma-separated iterations to checkpoint (0: the initial network); alone it "
    "implies --checkpoint-every 0",
  ),
)
_FLAG_OF_FIELD = {field: flag for flag, field, _, _ in _CONFIG_FLAGS}
_FLAG_OF_FIELD.update(
  transpositions="--tree", reuse="--no-reuse", solver="--solver", make_room="--make-room"
)


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
      f"--game {config.game!r}: training needs a game with an observation for the "
      f"network (e.g. {', '.join(registry.MAX_GAME_LENGTH)} or jumanji:Knapsack-v1)"
    )
  try:
    max_game_length(game, config.game)
  except ValueError as error:
    raise ValueError(f"--game {config.game!r}: {error}") from None


# What `--help` says of a default that is None or empty.
_UNSET_DEFAULTS = {
  "capacity": "4 * simulations + 1 with reuse, else simulations + 1",
  "max_seconds": "no budget",
  "checkpoint_dir": "none",
  "checkpoint_at": "none",
  "devices": "every device of every process",
  "fast_simulations": "simulations // 4",
  "forced_playouts": "2 with muzero on this library's engine, else 0",
}


def _shown_default(field: str, defaults: Config, quick: Config) -> str:
  """`(default: ...; with --quick: ...)` of a `Config` field, for `--help`."""
  value, small = getattr(defaults, field), getattr(quick, field)
  show = lambda v: (
    _UNSET_DEFAULTS[field]
    if v is None or v == ()
    else ",".join(map(str, v))
    if isinstance(v, tuple)
    else str(v)
  )
  text = f"default: {show(value)}"
  if small != value:
    text += f"; with --quick: {show(small)}"
  return f"({text})"


def build_parser():
  """The `mcgs-jax train` parser (one flag per `Config` field it mirrors)."""
  defaults, quick = Config(), Config.quick()
  parser = OneLineErrorParser(
    prog="mcgs-jax train",
    description=DESCRIPTION,
    epilog="Defaults in parentheses; --quick changes some of them (shown). Compile "
    "time is reported apart from self-play, training and arena time. Bad input exits "
    "with status 2 and one line naming the flag, before any work.",
  )
  parser.add_argument(
    "--quick",
    action="store_true",
    help="smoke test: a tiny tic_tac_toe run (Config.quick()) that checks the pipeline, "
    "not a useful network",
  )
  for flag, field, kind, text in _CONFIG_FLAGS:
    parser.add_argument(
      flag, dest=field, type=kind, help=f"{text} {_shown_default(field, defaults, quick)}"
    )
  _add_search_switches(parser)
  _add_run_files(parser)
  return parser


def _add_search_switches(parser) -> None:
  """The self-play search's on/off flags: --tree, --no-reuse, --solver, --make-room."""
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
    "--make-room",
    action="store_true",
    default=None,
    help="with reuse, keep only the capacity - simulations most visited nodes of each "
    "graph from move to move, so that no playout finds it full (default: keep every "
    "reachable node)",
  )


def _add_run_files(parser) -> None:
  """The run's files: --save-params, --resume, --overwrite, --plot, --history."""
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
  engine = engines.ENGINES.get(overrides.get("engine", "mcgs"))
  if engine is not None and not engine.keeps_graph:  # a tree from scratch at every move
    overrides.setdefault("transpositions", False)
    overrides.setdefault("reuse", False)
  overrides.setdefault("progress", False)
  try:
    return Config.quick(**overrides) if args.quick else Config(**overrides)
  except ValueError as error:
    raise ValueError(_config_error(error)) from None


def _stored_run_config(directory: str, iterations: int | None) -> dict:
  """The config (JSON fields) of the run in `directory`: its last checkpoint's, or,
  for a run killed before its first checkpoint, the one it wrote when it started
  (it then starts afresh). ValueError when there is neither, or `iterations` is
  below the last checkpoint's iteration."""
  found = last_run_checkpoint(directory)
  if found is None:
    stored = read_run_config(directory)
    if stored is None:
      raise ValueError(f"--resume {directory!r}: no checkpoint or config of a train run there")
    return stored
  if iterations is not None:
    try:
      check_resumable_iterations(found[0], int(found[1]["iteration"]), iterations)
    except ValueError as error:
      raise ValueError(f"--iterations {iterations}: {error}") from None
  return json.loads(found[1]["run_state"]["config"])


def resumed_config(args) -> Config:
  """The `Config` of the run whose checkpoints are in `args.resume`, with
  `--iterations`, `--max-seconds` and `--devices` applied; ValueError when there is no such
  checkpoint, other run flags or `--overwrite` (which would delete the checkpoints)
  are given, or `--iterations` is below the last checkpoint's iteration."""
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
  if args.overwrite:
    raise ValueError(
      "--overwrite deletes the checkpoints that --resume continues from; give one or the other"
    )
  stored = _stored_run_config(args.resume, args.iterations)
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
  returns the exit status: 0; 2 for bad input (one line on stderr, before any work;
  a flag argparse refuses raises `SystemExit(2)` with one line), a checkpoint
  directory another run holds included; 1 when training diverged (one line; the
  checkpoints so far are kept); 130 after Ctrl-C, which with `--checkpoint-dir`
  lets the running iteration end and checkpoints it (`partial.graceful_stop`).
  `train(config)` returns the history."""
  parser = build_parser()
  args = parser.parse_args(argv)  # bad flags: SystemExit(2), one line; --help: 0
  with contextlib.ExitStack() as lock:
    try:
      config = _checked_config(args)
      lock.enter_context(run_lock(config.checkpoint_dir))  # held till the command ends
      if not (args.overwrite or args.resume):
        claim_checkpoint_dir(config.checkpoint_dir, overwrite=False)
    except ValueError as error:
      print(f"{parser.prog}: error: {' '.join(str(error).split())}", file=sys.stderr)
      return 2
    try:
      history = _train_command(args, config)
    except TrainingDiverged as error:
      print(f"{parser.prog}: error: {' '.join(str(error).split())}", file=sys.stderr)
      return 1
  if args.save_params:
    save_checkpoint(args.save_params, history.params, None, history[-1]["iteration"])
  if args.plot:
    plot_history(history, args.plot)
  if partial.stop_requested():
    print(f"{parser.prog}: interrupted", file=sys.stderr, flush=True)
    return 130
  return 0


def _checked_config(args) -> Config:
  """The `Config` of the parsed flags (or of the run `--resume` continues), every
  check before any work made: ValueError naming the flag."""
  config = resumed_config(args) if args.resume else config_from_args(args)
  _check_game(config)
  memory_estimates.check_self_play_memory(registry.game_from_spec(config.game), config, warn=False)
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
  return config


def _train_command(args, config: Config) -> History:
  """Runs `train` for `mcgs-jax train`: the history saved after every iteration with
  `--history`; with a checkpoint directory the first Ctrl-C stops the run after the
  running iteration, checkpointed."""
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
    claim_checkpoint_dir(config.checkpoint_dir, overwrite=True)
  stop = (
    partial.graceful_stop("the running iteration ends, is checkpointed, and the run stops")
    if config.checkpoint_dir
    else contextlib.nullcontext()
  )
  with stop:
    return train(config, on_iteration=on_iteration, resume=bool(args.resume))
