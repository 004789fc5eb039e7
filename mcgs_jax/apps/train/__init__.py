"""A small, complete AlphaZero loop on top of `mcgs_jax`'s graph search.

`train(config)` (`loop`) runs it: self-play (`self_play`), the replay buffer
(`replay`), Adam steps, checkpoints (`checkpoint_files`), evaluation matches in the
arena (`evaluation`) and the history (`history`); `Config` (`config`) holds its
settings; `data_parallel` shards it over a mesh. The command, `mcgs-jax train` (or
`python -m mcgs_jax.apps.train`), is `mcgs_jax.apps.cli.train_command`: its parser
and `main` are exported here too, loaded on first use.
"""

from mcgs_jax._src.lazy import lazy_exports
from mcgs_jax.apps.train.checkpoint_files import (
  CheckpointDirInUse,
  checkpoint_path,
  claim_checkpoint_dir,
  existing_checkpoints,
  load_checkpoint,
  load_network,
  run_lock,
  save_checkpoint,
)
from mcgs_jax.apps.train.config import (
  ENGINES,
  MAX_SEED,
  MAX_SIMULATIONS,
  POLICY_TARGETS,
  TRAINING_POLICIES,
  Config,
  check_config,
)
from mcgs_jax.apps.train.evaluation import evaluate, network_agent, uniform_baseline
from mcgs_jax.apps.train.history import History, format_entry, plot_history, save_history
from mcgs_jax.apps.train.loop import TrainingDiverged, loss_fn, make_train_step, train
from mcgs_jax.apps.train.replay import ReplayBuffer
from mcgs_jax.apps.train.self_play import make_self_play, max_game_length, search_policy

# The command's names, kept here for the scripts that use them: loaded on first use,
# so that this package imports nothing of the command line (which imports it).
_COMMAND_EXPORTS = {
  "build_parser": "mcgs_jax.apps.cli.train_command",
  "config_from_args": "mcgs_jax.apps.cli.train_command",
  "main": "mcgs_jax.apps.cli.train_command",
  "resumed_config": "mcgs_jax.apps.cli.train_command",
}

__all__ = [
  "ENGINES",
  "MAX_SEED",
  "MAX_SIMULATIONS",
  "POLICY_TARGETS",
  "TRAINING_POLICIES",
  "CheckpointDirInUse",
  "Config",
  "History",
  "ReplayBuffer",
  "TrainingDiverged",
  "build_parser",
  "check_config",
  "checkpoint_path",
  "claim_checkpoint_dir",
  "config_from_args",
  "evaluate",
  "existing_checkpoints",
  "format_entry",
  "load_checkpoint",
  "load_network",
  "loss_fn",
  "main",
  "make_self_play",
  "make_train_step",
  "max_game_length",
  "network_agent",
  "plot_history",
  "resumed_config",
  "run_lock",
  "save_checkpoint",
  "save_history",
  "search_policy",
  "train",
  "uniform_baseline",
]

__getattr__, __dir__ = lazy_exports(__name__, _COMMAND_EXPORTS, globals())
