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

    python -m mcgs_jax.apps.train --quick            # tic_tac_toe, a smoke test
    python -m mcgs_jax.apps.train --iterations 10 --plot curve.png
    python -m mcgs_jax.apps.train --history h.json --checkpoint-dir ck --checkpoint-at 0,1,5

`benchmarks/training_tables.py` prints RESULTS' tables from the `--history` file,
`benchmarks/checkpoint_matches.py` and `benchmarks/tic_tac_toe_accuracy.py` measure
the checkpoints.

The loop is here (`train`); its parts are modules of
their own: `config` (`Config`), `self_play`, `replay` (`ReplayBuffer`),
`checkpoint_files`, `evaluation` and `history` (`History`); `mcgs_jax.apps.train`
exports their public names (`__all__`). The command, its parser and `main`, is
`mcgs_jax.apps.cli.train_command`.
"""

import dataclasses
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from mcgs_jax.apps import memory_estimates, partial, registry
from mcgs_jax.apps.progress import progress_bar
from mcgs_jax.apps.registry import make_evaluator
from mcgs_jax.apps.train import data_parallel
from mcgs_jax.apps.train.checkpoint_files import (
  RunState,
  checkpoint_path,
  claim_checkpoint_dir,
  resume_run,
  run_lock,
  save_run,
  save_run_config,
  shape_mismatch,
)
from mcgs_jax.apps.train.config import Config
from mcgs_jax.apps.train.evaluation import timed_evaluation
from mcgs_jax.apps.train.history import History, format_entry
from mcgs_jax.apps.train.replay import ReplayBuffer
from mcgs_jax.apps.train.self_play import make_self_play
from mcgs_jax.games import networks
from mcgs_jax.games.adapter import Game


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
      the shapes and dtypes `config.hidden` and the game give, and finite, or
      ValueError naming `params`.
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
      `iterations` (not below the last checkpoint's), `max_seconds`, `progress`,
      `eval_games`, `eval_every` and `devices` (and `checkpoint_dir`'s spelling: the
      directory is the run's by identity); a budget counts from the resumed start.
      A directory whose checkpoints hold no run (params-only files) is refused as
      another run's.

  The run holds a lock on `config.checkpoint_dir` while it runs (`run_lock`): a
  second run there raises `CheckpointDirInUse` (a ValueError) naming the first.
  Whenever it stops before `config.iterations` (`max_seconds`, or Ctrl-C in
  `mcgs-jax train`), the last iteration it played is checkpointed. A NaN or infinite
  loss or params after an iteration's training raises `TrainingDiverged` (a
  ValueError) naming the iteration, before anything of it is kept or written.

  With several devices (`config.devices`, default all of them) self-play and the
  training steps are data-parallel (`mcgs_jax.apps.train.data_parallel`); under
  `jax.distributed` every process calls `train` with the same config, and process 0
  writes the files (checkpoints, a resumed run reads them: a shared directory).
  """
  memory_estimates.check_self_play_memory(registry.game_from_spec(config.game), config)
  with run_lock(config.checkpoint_dir):  # one run per directory, till this one ends
    return _train(config, params, on_iteration, overwrite=overwrite, resume=resume)


def _train(config: Config, params, on_iteration, *, overwrite: bool, resume: bool) -> History:
  """`train`, its checkpoint directory locked."""
  started = time.perf_counter()
  mesh = data_parallel.training_mesh(
    config.devices, num_games=config.num_games, train_batch_size=config.train_batch_size
  )
  run, game, optimizer, first = _start_run(config, params, overwrite=overwrite, resume=resume)
  apply_fn = run.history.apply_fn
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
  for iteration in iterations if bar is None else bar:
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
    if _wants_evaluation(config, iteration):
      # On the host: the arena places its own arrays (over the devices it uses).
      params = run.params if mesh is None else data_parallel.fetch(run.params)
      timed_evaluation(entry, config, apply_fn, params, run.previous_params, run.history)
      run.previous_params = params
    entry["elapsed_s"] = time.perf_counter() - started
    stopping = _stops_after(config, iteration, entry["elapsed_s"], iteration_started)
    if _wants_checkpoint(config, iteration) or (stopping and config.checkpoint_dir):
      entry["checkpoint"] = checkpoint_path(str(config.checkpoint_dir), iteration)
    run.history.append(entry)
    if "checkpoint" in entry:  # after the iteration is whole: a resume starts after it
      save_run(entry["checkpoint"], run, iteration)
    if on_iteration is not None:  # it may read the network so far
      run.history.params = run.params if mesh is None else data_parallel.fetch(run.params)
      on_iteration(run.history)
    _report(bar, entry)
    if stopping:
      break
  run.history.params = run.params if mesh is None else data_parallel.fetch(run.params)
  return run.history


def _stops_after(config: Config, iteration: int, elapsed: float, iteration_started: float) -> bool:
  """Whether the run stops after `iteration`, before `config.iterations`: Ctrl-C asked
  it to (`partial.stop_requested`, in `mcgs-jax train`), or the next iteration, taking
  as long as this one (begun at `iteration_started`), would end past
  `config.max_seconds` (`elapsed` seconds since the start). The iteration it stops
  after is checkpointed, so that a resume loses nothing."""
  if iteration >= config.iterations:
    return False
  if partial.stop_requested():
    return True
  last_iteration_s = time.perf_counter() - iteration_started
  return config.max_seconds is not None and elapsed + last_iteration_s > config.max_seconds


def _start_run(
  config: Config, params, *, overwrite: bool, resume: bool
) -> tuple[RunState, Game, Any, int]:
  """`(run, game, optimizer, first)` of `train`: the run's state (`run.history` holds
  the network's `apply_fn` and `config`), fresh or resumed from its last checkpoint
  (`resume`), the game with the network as evaluator, the optimiser and the first
  iteration to play. Checks `params` and the checkpoint directory first, and writes
  the checkpoint of iteration 0 where `config` wants one."""
  key = jax.random.PRNGKey(config.seed)
  init_key, key = jax.random.split(key)
  board = registry.game_from_spec(config.game)  # the one the arena's matches play
  apply_fn, fresh_params = networks.init_network(
    board.env, init_key, hidden=config.hidden, network=config.network
  )
  if params is not None:
    _check_params(params, fresh_params)
  params = fresh_params if params is None else params
  if resume and not config.checkpoint_dir:
    raise ValueError("resume=True needs config.checkpoint_dir, where the run left its checkpoints")
  if not resume and data_parallel.writes_files():  # `resume_run` checks a resumed run's
    claim_checkpoint_dir(config.checkpoint_dir, overwrite)
  game = dataclasses.replace(
    board, evaluator=make_evaluator("network", board.env, apply_fn=apply_fn)
  )
  optimizer = optax.adam(config.learning_rate)
  run = RunState(
    params=params,
    opt_state=optimizer.init(params),
    previous_params=params,  # the opponent of "vs_previous": the last evaluated net
    key=key,
    rng=np.random.default_rng(config.seed),
    buffer=ReplayBuffer(config.buffer_size),
    history=History(),
  )
  run.history.apply_fn, run.history.config = apply_fn, config
  first = resume_run(config, run, overwrite) + 1 if resume else 1
  save_run_config(config)  # `mcgs-jax train --resume` reads it before any checkpoint
  if first == 1 and _wants_checkpoint(config, 0):
    run.history.initial_checkpoint = checkpoint_path(str(config.checkpoint_dir), 0)
    save_run(run.history.initial_checkpoint, run, 0)
  return run, game, optimizer, first


def _check_params(params, fresh_params) -> None:
  """ValueError naming `params` when its tree, shapes or dtypes are not the
  network's, or it holds a NaN or an infinity (training would only spread them)."""
  paths = lambda tree: [
    jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(tree)
  ]
  if paths(params) != paths(fresh_params):
    raise ValueError(
      "params: another network structure than Config.network, Config.hidden and the game give "
      f"(arrays {paths(params)[:3]}..., expected {paths(fresh_params)[:3]}...)"
    )
  mismatch = shape_mismatch(fresh_params, params)
  if mismatch:
    raise ValueError(
      f"params: another width or game than Config.network, Config.hidden and the game give: "
      f"{mismatch}"
    )
  leaves = jax.tree_util.tree_leaves_with_path(params)
  for (path, leaf), fresh in zip(leaves, jax.tree_util.tree_leaves(fresh_params), strict=True):
    name = jax.tree_util.keystr(path)
    if jnp.result_type(leaf) != jnp.result_type(fresh):
      raise ValueError(
        f"params: {name} is {jnp.result_type(leaf)}, the network's is "
        f"{jnp.result_type(fresh)} (in float16 Adam's epsilon underflows)"
      )
    if not bool(jnp.all(jnp.isfinite(leaf))):
      raise ValueError(f"params: {name} holds a NaN or an infinity")


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


def _wants_evaluation(config: Config, iteration: int) -> bool:
  """Whether `train` evaluates the network after `iteration`."""
  return config.eval_games > 0 and (
    iteration % config.eval_every == 0 or iteration == config.iterations
  )


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


def _training_iteration(entry: dict, config: Config, train_step, run: RunState, mesh, first: bool):
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
  _check_finite(entry, params)
  return params, opt_state, train_step


class TrainingDiverged(ValueError):
  """A training iteration gave a NaN or infinite loss or params; the run stopped
  before keeping any of it (its checkpoints are all finite)."""


def _check_finite(entry: dict, params) -> None:
  """`TrainingDiverged` naming the iteration of `entry` and what went non-finite:
  one of its losses or a leaf of the `params` its training steps made."""
  where = f"iteration {entry['iteration']}"
  for name in ("loss", "policy_loss", "value_loss", "last_loss"):
    if not np.isfinite(entry[name]):
      raise TrainingDiverged(
        f"{where}: the training {name.replace('_', ' ')} is {entry[name]} (the first "
        f"step's loss was {entry['first_loss']}): training diverged; the run stops with "
        "its checkpoints so far, all finite (a smaller learning_rate?)"
      )
  for path, leaf in jax.tree_util.tree_leaves_with_path(params):
    if not bool(jnp.all(jnp.isfinite(leaf))):
      raise TrainingDiverged(
        f"{where}: params{jax.tree_util.keystr(path)} holds a NaN or an infinity after "
        "training: the run stops with its checkpoints so far, all finite (a smaller "
        "learning_rate?)"
      )


def _report(bar, entry: dict) -> None:
  """The iteration on the progress bar, or one printed line without one."""
  if bar is None:
    print(format_entry(entry), flush=True)
    return
  postfix = dict(loss=f"{entry['loss']:.3f}")
  if "vs_baseline" in entry:
    postfix["vs_uniform"] = f"{entry['vs_baseline']['score']:.2f}"
  bar.set_postfix(postfix)
