"""The command line of the training loop (`mcgs-jax train`): its parser, one flag
per `Config` field it mirrors, and the `Config` of the parsed flags (or of the run
that `--resume` continues)."""

import argparse
import dataclasses
import json
from typing import Any

import jax

from mcgs_jax.apps import registry
from mcgs_jax.apps.checkpoint_files import _last_run_checkpoint, check_resumable_iterations
from mcgs_jax.apps.cli_args import OneLineErrorParser
from mcgs_jax.apps.self_play import max_game_length
from mcgs_jax.apps.train_config import TRAINING_POLICIES, Config

# `--help`'s description: the first line of `mcgs_jax.apps.train`'s doc.
DESCRIPTION = "A small, complete AlphaZero loop on top of `mcgs_jax`'s graph search."


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
    "KataGo's forced playouts k with policy target pruning (muzero; 0: off; default 2 "
    "with muzero on this library's engine, else 0)",
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
      f"--game {config.game!r}: training needs a pgx board game with an observation "
      f"for the network (e.g. {', '.join(registry.MAX_GAME_LENGTH)})"
    )
  try:
    max_game_length(game, config.game)
  except ValueError as error:
    raise ValueError(f"--game {config.game!r}: {error}") from None


def build_parser():
  # Long: one add_argument per flag.
  """The `mcgs-jax train` parser (one flag per `Config` field it mirrors)."""
  defaults, quick = Config(), Config.quick()

  unset = {
    "capacity": "4 * simulations + 1 with reuse, else simulations + 1",
    "max_seconds": "no budget",
    "checkpoint_dir": "none",
    "checkpoint_at": "none",
    "devices": "every device of every process",
    "fast_simulations": "simulations // 4",
    "forced_playouts": "2 with muzero on this library's engine, else 0",
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
    "--make-room",
    action="store_true",
    default=None,
    help="with reuse, keep only the capacity - simulations most visited nodes of each "
    "graph from move to move, so that no playout finds it full (default: keep every "
    "reachable node)",
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
  found = _last_run_checkpoint(args.resume)
  if found is None:
    raise ValueError(f"--resume {args.resume!r}: no checkpoint of a train run there")
  if args.iterations is not None:
    try:
      check_resumable_iterations(found[0], int(found[1]["iteration"]), args.iterations)
    except ValueError as error:
      raise ValueError(f"--iterations {args.iterations}: {error}") from None
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
