"""jumanji's own A2C baseline trained for a wall-clock budget, then its greedy policy
played on this project's instances: the learned baseline beside `mcgs-jax train` and
`mcgs-jax evaluate` at equal wall time.

    python -m benchmarks planning --part jumanji_a2c --env Knapsack-v1 --seed 0 --seconds 600 \
        --instances 128 --eval-seed 12345 --json out.json

Training is `jumanji.training` as its `train.py` runs it, minus hydra's command line,
its loggers (`--logger terminal` writes its terminal logger's train lines) and its
evaluations between epochs: the config is jumanji's `configs/config.yaml` with
`agent: a2c`, `seed: --seed` and `configs/env/<name>.yaml` (`ENV_CONFIGS`:
Knapsack-v1 -> knapsack, TSP-v1 -> tsp, Sudoku-very-easy-v0 and Sudoku-v0 -> sudoku,
RubiksCube-partly-scrambled-v0 -> rubiks_cube, `registered_version` set to the id),
loaded with omegaconf; the env, the agent (its networks, optimizer and A2C
hyperparameters) and the training state are built by jumanji's `setup_env`,
`setup_agent` and `setup_training_state`, and an epoch is `train.py`'s: a `jax.pmap`
(one device) of a `lax.scan` of `num_learner_steps_per_epoch` calls of the agent's
`run_epoch`, the metrics averaged. The budget (`--seconds`) is wall time from the
start of that setup (after the imports), compilation included, as `mcgs-jax train
--max-seconds` counts it: the epoch function is compiled first, then epochs run while
the time so far plus the last epoch's time stays within the budget. The first epoch
always runs, so a run whose setup, compilation and one epoch take longer than the
budget uses more (`seconds_used`).

What differs from jumanji's defaults, and only through flags:

  * `--learner-steps` (`num_learner_steps_per_epoch`): default `DEFAULT_LEARNER_STEPS`
    (1 for Knapsack, Sudoku and TSP, 30 for Rubik's cube) instead of jumanji's 50, 1000,
    100 and 100. On 2 shared CPU cores one learner step at jumanji's batch takes
    about 40-70 s (Knapsack), 3 s (Sudoku), 14 s (TSP) and 0.1 s (Rubik's cube), so
    jumanji's epochs would last from 10 s to an hour. An epoch is only the unit
    between two checks of the clock and two points of the curve (jumanji's
    optimizer, rollouts and updates carry over from one epoch to the next), so fewer
    learner steps per epoch change nothing that is learned.
  * `--total-batch-size` and `--n-steps`: default jumanji's values (unchanged), for
    machines where they do not fit. A2C differentiates through its rollout, so every
    activation of the `n_steps x total_batch_size` policy evaluations is kept:
    Knapsack's six-block transformer at jumanji's 20 x 64 peaks at about 13 GB and
    takes 50-70 s per learner step on 2 shared CPU cores (about 20-30 env steps/s),
    some 10 updates in 600 s; `--total-batch-size 8` takes about 5.5 s and 2.8 GB.

Nothing else of jumanji's changes. jumanji 1.1.2's `setup_training_state` calls
`jax.device_put_replicated`, which jax 0.10 removed: while it runs, that name is
jax's documented drop-in replacement (`device_put_replicated_shim`). The one
addition: the training env (jumanji's `setup_env`) is wrapped in `ReturnExtras`,
which sums each episode's rewards in the env state and puts, at each step, the return
of the episodes that ended there into the timestep's `extras`: jumanji's A2C copies
`extras` into its training metrics, so the curve gets the stochastic policy's episode
return of each epoch (jumanji reports none in its train metrics: its evaluations play
extra episodes). The agent never reads `extras`; what it learns is unchanged.

Evaluation: instance `i` is `env.reset(fold_in(PRNGKey(--eval-seed), i))` of
`jumanji.make(<id>)` for i < `--instances`, the instances `mcgs-jax evaluate --seed
EVAL_SEED` plays (`mcgs_jax.apps.planning.episodes.instances`; checked leaf by leaf,
exit 1 if they differ). Each is played to its end (`timestep.last()`) by the agent's
greedy policy (`agent.make_policy(actor params, stochastic=False)`, as jumanji's
greedy evaluator plays), its rewards summed. Reported: the mean return, the share
solved (Sudoku, Rubik's cube: return >= 1), and against the exact optimum
(`mcgs_jax.games.optima`: OR-Tools for Knapsack and TSP, 1 for Sudoku and Rubik's
cube) the mean gap `(optimum - return) / |optimum|` and the share at the optimum
(gap <= 1e-6), as `mcgs-jax evaluate` reports them.

Output: a summary on stdout; `--json FILE` writes the run (flags, hyperparameters,
versions, the learning curve, the evaluation with each instance's return and optimum).
Bad flags exit 2 with one line; so do a missing dependency of `jumanji.training` and
more than one visible device.
"""

import argparse
import contextlib
import functools
import importlib.util
import json
import logging
import math
import os
import platform
import sys
import time
import warnings
from typing import Any, NamedTuple

from mcgs_jax.apps.cli.args import OneLineErrorParser, int_at_least
from mcgs_jax.apps.seeds import MAX_SEED

# jumanji's env config (`configs/env/<name>.yaml`) of each env id.
ENV_CONFIGS = {
  "Knapsack-v1": "knapsack",
  "TSP-v1": "tsp",
  "Sudoku-very-easy-v0": "sudoku",
  "Sudoku-v0": "sudoku",
  "RubiksCube-partly-scrambled-v0": "rubiks_cube",
}
# Envs whose return 1 means the puzzle is solved.
SOLVED_AT_ONE = ("Sudoku-very-easy-v0", "Sudoku-v0", "RubiksCube-partly-scrambled-v0")
# Learner steps per epoch unless `--learner-steps` says otherwise, by jumanji's env
# config: the shortest epoch (Knapsack, Sudoku, TSP) or one of a few seconds (Rubik's
# cube) on 2 CPU cores at jumanji's batch (capped by jumanji's own value).
DEFAULT_LEARNER_STEPS = {"knapsack": 1, "sudoku": 1, "tsp": 1, "rubiks_cube": 30}
TOLERANCE = 1e-6  # a return this close to 1 is solved; a gap this small is optimal
# The modules `jumanji.training` imports beyond jumanji, and the packages installing them.
TRAINING_MODULES = {
  "jumanji": "jumanji",
  "haiku": "dm-haiku",
  "distrax": "distrax",
  "rlax": "rlax",
  "optax": "optax",
  "omegaconf": "omegaconf",
  "hydra": "hydra-core",
  "tensorboardX": "tensorboardX",
  "neptune": "neptune",
}
INSTALL_HINT = "pip install dm-haiku distrax rlax omegaconf hydra-core tensorboardX neptune"
# Internal keys of `ReturnExtras` in the timestep's extras (and jumanji's metrics).
ENDED_RETURN = "ended_episode_return"
ENDED = "ended_episodes"


class InstanceMismatch(Exception):
  """The instances drawn here are not `mcgs_jax`'s (`episodes.instances`)."""


def parse_args(argv=None) -> argparse.Namespace:
  """The command line; a bad flag exits 2 with one line."""

  def positive_float(text: str) -> float:
    try:
      value = float(text)
    except ValueError:
      raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
      raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value

  parser = OneLineErrorParser(
    prog="python -m benchmarks planning --part jumanji_a2c",
    description="jumanji's A2C for a wall-clock budget, then its greedy policy on "
    "mcgs-jax's instances.",
  )
  parser.add_argument("--env", choices=tuple(ENV_CONFIGS), default="Knapsack-v1")
  parser.add_argument(
    "--seed", type=int_at_least(0, MAX_SEED), default=0, help="training seed (default: 0)"
  )
  parser.add_argument(
    "--seconds",
    type=positive_float,
    default=600.0,
    help="wall-time budget of training, setup and compilation included (default: 600)",
  )
  parser.add_argument(
    "--instances", type=int_at_least(1, 1_000_000), default=128, help="(default: 128)"
  )
  parser.add_argument(
    "--eval-seed",
    type=int_at_least(0, MAX_SEED),
    default=12345,
    help="seed of the instances (mcgs-jax evaluate's --seed; default: 12345)",
  )
  parser.add_argument(
    "--learner-steps",
    type=int_at_least(1),
    default=None,
    help="learner steps per epoch (default: 1, Rubik's cube 30; jumanji's are 50-1000)",
  )
  parser.add_argument(
    "--total-batch-size", type=int_at_least(1), default=None, help="(default: jumanji's)"
  )
  parser.add_argument("--n-steps", type=int_at_least(1), default=None, help="(default: jumanji's)")
  parser.add_argument(
    "--logger",
    choices=("none", "terminal"),
    default="none",
    help="jumanji's terminal logger for the train metrics of every epoch (default: none)",
  )
  parser.add_argument("--json", metavar="FILE", help="write the run as JSON to FILE")
  args = parser.parse_args(argv)
  if args.json and not os.path.isdir(os.path.dirname(os.path.abspath(args.json))):
    parser.error(f"--json: no directory {os.path.dirname(os.path.abspath(args.json))!r}")
  return args


def missing_modules() -> list[str]:
  """The packages of `TRAINING_MODULES` that are not installed."""
  missing = []
  for module, package in TRAINING_MODULES.items():
    try:
      found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
      found = False
    if not found:
      missing.append(package)
  return missing


def jumanji_config(args: argparse.Namespace):
  """jumanji's config for `args` (omegaconf): `config.yaml` with `agent: a2c`, the
  seed, the logger and `env/<name>.yaml`, the flags' overrides applied. Returns
  `(cfg, changed)`: `changed` maps each overridden `env.training` key to
  `(jumanji's value, the value used)`."""
  from omegaconf import OmegaConf

  root = importlib.util.find_spec("jumanji.training").submodule_search_locations[0]
  base = OmegaConf.load(f"{root}/configs/config.yaml")
  base.pop("defaults", None)  # hydra's composition list: the env is loaded below
  env = OmegaConf.load(f"{root}/configs/env/{ENV_CONFIGS[args.env]}.yaml")
  env.registered_version = args.env
  cfg = OmegaConf.merge(base, {"agent": "a2c", "seed": args.seed, "env": env})
  cfg.logger.type = "terminal"  # only read where `--logger terminal` asks for it
  training = cfg.env.training
  wanted = {
    "num_learner_steps_per_epoch": args.learner_steps
    if args.learner_steps is not None
    else min(
      int(training.num_learner_steps_per_epoch), DEFAULT_LEARNER_STEPS[ENV_CONFIGS[args.env]]
    ),
    "total_batch_size": args.total_batch_size,
    "n_steps": args.n_steps,
  }
  changed = {}
  for key, value in wanted.items():
    if value is not None and value != training[key]:
      changed[key] = (int(training[key]), int(value))
      training[key] = value
  return cfg, changed


def return_extras_wrapper():
  """`ReturnExtras`, a jumanji `Wrapper` class (defined once jumanji is imported)."""
  import jax.numpy as jnp
  from jumanji.wrappers import Wrapper

  class ReturnState(NamedTuple):
    """The wrapped env's state and each episode's return so far (`[B]`)."""

    env_state: Any
    running_return: Any

  class ReturnExtras(Wrapper):
    """A batched, auto-resetting jumanji env (`setup_env`'s) whose timesteps' extras
    also hold, per batch entry, the return of an episode that ended at this step
    (`ENDED_RETURN`, 0 where none did) and whether one did (`ENDED`, 0 or 1)."""

    def reset(self, key):
      state, timestep = self._env.reset(key)
      running = jnp.zeros_like(jnp.asarray(timestep.reward, jnp.float32))
      ended = jnp.zeros_like(running)
      extras = {**timestep.extras, ENDED_RETURN: ended, ENDED: ended}
      return ReturnState(state, running), timestep.replace(extras=extras)

    def step(self, state, action):
      env_state, timestep = self._env.step(state.env_state, action)
      total = state.running_return + jnp.asarray(timestep.reward, jnp.float32)
      last = timestep.last()
      extras = {
        **timestep.extras,
        ENDED_RETURN: jnp.where(last, total, 0.0),
        ENDED: last.astype(jnp.float32),
      }
      running = jnp.where(last, 0.0, total)
      return ReturnState(env_state, running), timestep.replace(extras=extras)

  return ReturnExtras


@contextlib.contextmanager
def device_put_replicated_shim():
  """Within it, `jax.device_put_replicated` (removed in jax 0.10, which jumanji 1.1.2's
  `setup_training_state` still calls) is jax's drop-in replacement: the value stacked
  once per device along a new leading axis, that axis sharded over the devices. A jax
  that still has it is left alone."""
  import jax
  import jax.numpy as jnp
  import numpy as np

  try:
    jax.device_put_replicated  # noqa: B018 (an AttributeError where it was removed)
    yield
    return
  except AttributeError:
    pass

  def replicated(value, devices):
    mesh = jax.sharding.Mesh(np.array(devices), ("devices",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("devices"))
    stack = lambda leaf: jnp.stack([jnp.asarray(leaf)] * len(devices))
    return jax.device_put(jax.tree_util.tree_map(stack, value), sharding)

  jax.device_put_replicated = replicated
  try:
    yield
  finally:
    del jax.device_put_replicated


def make_epoch_fn(agent, num_learner_steps: int):
  """`train.py`'s epoch: `num_learner_steps` calls of `agent.run_epoch` in a scan,
  metrics averaged, under a `jax.pmap` (axis `devices`, which the agent reduces over)."""
  import jax
  import jax.numpy as jnp

  def epoch(training_state):
    training_state, metrics = jax.lax.scan(
      lambda state, _: agent.run_epoch(state), training_state, None, num_learner_steps
    )
    return training_state, jax.tree_util.tree_map(jnp.mean, metrics)

  return jax.pmap(epoch, axis_name="devices")


def curve_point(metrics: dict, *, epoch: int, elapsed: float, epoch_s: float, env_steps: int):
  """One point of the learning curve: jumanji's train metrics of an epoch (floats),
  and the mean return of the training episodes that ended in it (None if none did)."""
  values = {key: float(value) for key, value in metrics.items()}
  ended = values.pop(ENDED)
  ended_return = values.pop(ENDED_RETURN)
  return dict(
    epoch=epoch,
    elapsed_s=elapsed,
    epoch_s=epoch_s,
    env_steps=env_steps,
    # Means over the epoch's steps: their ratio is the mean return of the episodes ended.
    train_episode_return=ended_return / ended if ended > 0 else None,
    train_episodes_per_step=ended,
    metrics=values,
  )


def train(cfg, seconds: float, logger, started: float) -> dict:
  """Trains jumanji's A2C on `cfg` until `seconds` of wall time since `started` are
  spent (see the module docstring). Returns the agent, the final training state, the
  curve and the timings."""
  import jax
  from jumanji.training import setup_train, utils

  key, init_key = jax.random.split(jax.random.PRNGKey(cfg.seed))
  del key  # train.py's other key draws its evaluations' keys
  env = return_extras_wrapper()(setup_train.setup_env(cfg))
  agent = setup_train.setup_agent(cfg, env)
  with device_put_replicated_shim():
    training_state = setup_train.setup_training_state(env, agent, init_key)
  training = cfg.env.training
  steps_per_epoch = (
    int(training.n_steps)
    * int(training.total_batch_size)
    * int(training.num_learner_steps_per_epoch)
  )
  epoch_fn = make_epoch_fn(agent, int(training.num_learner_steps_per_epoch))
  compile_started = time.perf_counter()
  epoch_fn = epoch_fn.lower(training_state).compile()
  compile_s = time.perf_counter() - compile_started
  setup_s = compile_started - started
  curve, epoch_times = [], []
  while True:
    epoch_started = time.perf_counter()
    training_state, metrics = epoch_fn(training_state)
    metrics = jax.device_get(utils.first_from_device(metrics))
    now = time.perf_counter()
    epoch_times.append(now - epoch_started)
    env_steps = len(epoch_times) * steps_per_epoch
    point = curve_point(
      metrics,
      epoch=len(epoch_times),
      elapsed=now - started,
      epoch_s=epoch_times[-1],
      env_steps=env_steps,
    )
    curve.append(point)
    logger.write(data=dict(point["metrics"]), label="train", env_steps=env_steps)
    if point["elapsed_s"] + epoch_times[-1] > seconds:
      break
  return dict(
    agent=agent,
    training_state=training_state,
    curve=curve,
    setup_s=setup_s,
    compile_s=compile_s,
    epoch_times=epoch_times,
    steps_per_epoch=steps_per_epoch,
    seconds_used=time.perf_counter() - started,
  )


def draw_instances(env, num_instances: int, seed: int):
  """`(states, timesteps)`, `[N]`: instance `i` is `env.reset(fold_in(PRNGKey(seed), i))`."""
  import jax
  import jax.numpy as jnp

  base = jax.random.PRNGKey(seed)
  keys = jax.vmap(lambda i: jax.random.fold_in(base, i))(jnp.arange(num_instances))
  return jax.jit(jax.vmap(env.reset))(keys)


def same_leaves(a, b) -> bool:
  """Whether two pytrees have one structure and equal leaves (typed keys as their data)."""
  import jax
  import numpy as np

  def data(leaf):
    if jax.dtypes.issubdtype(getattr(leaf, "dtype", None), jax.dtypes.prng_key):
      leaf = jax.random.key_data(leaf)
    return np.asarray(leaf)

  leaves_a, tree_a = jax.tree_util.tree_flatten(a)
  leaves_b, tree_b = jax.tree_util.tree_flatten(b)
  return tree_a == tree_b and all(
    x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y)
    for x, y in zip(map(data, leaves_a), map(data, leaves_b))
  )


def greedy_returns(env, agent, policy_params, states, timesteps):
  """`(returns, steps)`, `[N]`: each instance played to its end (`timestep.last()`)
  by the agent's greedy policy, one episode per `vmap` lane as jumanji's evaluator
  plays it, rewards summed in float32."""
  import jax

  episode = functools.partial(_greedy_episode, env, agent)
  return jax.jit(jax.vmap(episode, in_axes=(None, 0, 0)))(policy_params, states, timesteps)


def _greedy_episode(env, agent, policy_params, state, timestep):
  """`(return, steps)` of one episode from `(state, timestep)` to its end, greedy."""
  import jax
  import jax.numpy as jnp

  policy = agent.make_policy(policy_params=policy_params, stochastic=False)
  unused_key = jax.random.PRNGKey(0)  # the greedy policy deletes its key

  def unfinished(carry):
    return ~carry[1].last()

  def step(carry):
    state, timestep, total, steps = carry
    observation = jax.tree_util.tree_map(lambda x: x[None], timestep.observation)
    action, _ = policy(observation, unused_key)
    state, timestep = env.step(state, jnp.squeeze(action, axis=0))
    return state, timestep, total + jnp.asarray(timestep.reward, jnp.float32), steps + 1

  carry = (state, timestep, jnp.float32(0.0), jnp.int32(0))
  _, _, total, steps = jax.lax.while_loop(unfinished, step, carry)
  return total, steps


def evaluate(env_id: str, agent, training_state, num_instances: int, seed: int) -> dict:
  """The greedy policy on this project's instances `seed` (see the module docstring)."""
  import jax
  import jumanji
  import numpy as np
  from jumanji.training import utils

  from mcgs_jax.apps.planning import episodes
  from mcgs_jax.games import optima
  from mcgs_jax.games.adapter import make_game

  started = time.perf_counter()
  env = jumanji.make(env_id)  # the raw env, as jumanji's evaluators play it
  states, timesteps = draw_instances(env, num_instances, seed)
  game = make_game(f"jumanji:{env_id}")
  theirs = episodes.instances(game, num_instances, seed)
  if not same_leaves(states, theirs.env_state):
    raise InstanceMismatch(
      f"the instances of seed {seed} differ from mcgs_jax's episodes.instances"
    )
  params = utils.first_from_device(training_state.params_state.params.actor)
  returns, steps = jax.device_get(greedy_returns(env, agent, params, states, timesteps))
  returns = np.asarray(returns, np.float64)
  play_s = time.perf_counter() - started
  optimum_started = time.perf_counter()
  if optima.has_optimum(game.env):
    optimal = np.asarray(optima.optimal_returns(game.env, theirs), np.float64)
  else:
    optimal = np.full((num_instances,), np.nan)
  optimum_s = time.perf_counter() - optimum_started
  with np.errstate(invalid="ignore", divide="ignore"):
    gap = (optimal - returns) / np.abs(optimal)
  known = ~np.isnan(gap)
  return dict(
    instances=num_instances,
    eval_seed=seed,
    mean_return=float(np.mean(returns)),
    solved=float(np.mean(returns >= 1.0 - TOLERANCE)) if env_id in SOLVED_AT_ONE else None,
    mean_gap=float(np.mean(gap[known])) if known.any() else None,
    optimal_share=float(np.mean(gap[known] <= TOLERANCE)) if known.any() else None,
    optima_known=int(known.sum()),
    mean_steps=float(np.mean(steps)),
    play_s=play_s,
    optimum_s=optimum_s,
    returns=[float(r) for r in returns],
    optimal=[None if math.isnan(o) else float(o) for o in optimal],
  )


def _percent(value) -> str:
  return "-" if value is None else f"{100 * value:.1f}%"


def summary(report: dict) -> str:
  """The run in a few lines."""
  timing, evaluation = report["timing"], report["evaluation"]
  train_return = report["curve"][-1]["train_episode_return"]
  changed = ", ".join(
    f"{key} {values['jumanji']} -> {values['used']}" for key, values in report["changed"].items()
  )
  gap = evaluation["mean_gap"]
  return "\n".join(
    [
      f"jumanji A2C on {report['env']} (seed {report['seed']}, {report['device']}): "
      f"{report['epochs']} epochs, {report['env_steps']:,} env steps in "
      f"{report['seconds_used']:.1f} s of a {report['seconds']:g} s budget",
      f"  setup {timing['setup_s']:.1f} s, compile {timing['compile_s']:.1f} s, epoch "
      f"{timing['epoch_s']:.2f} s ({timing['steps_per_second']:,.0f} env steps/s); changed "
      f"from jumanji's config: {changed or 'nothing'}",
      "  last epoch's training episodes (stochastic): return "
      + ("-" if train_return is None else f"{train_return:.4f}"),
      f"greedy on {evaluation['instances']} instances (eval seed {evaluation['eval_seed']}): "
      f"return {evaluation['mean_return']:.4f}, solved {_percent(evaluation['solved'])}, gap "
      + ("-" if gap is None else f"{100 * gap:.2f}%")
      + f", optimal {_percent(evaluation['optimal_share'])}, {evaluation['mean_steps']:.1f} "
      f"steps ({evaluation['play_s']:.1f} s, optima {evaluation['optimum_s']:.1f} s)",
    ]
  )


def train_and_play(args: argparse.Namespace) -> dict:
  """Trains, evaluates and returns the report (the JSON object)."""
  import jax
  import jumanji
  from omegaconf import OmegaConf

  # jumanji's loggers import neptune's deprecated module, whose warning is kept quiet
  # (recorded, not shown: neptune adds its own filter, which would show it).
  with warnings.catch_warnings(record=True):
    from jumanji.training import loggers, setup_train

  cfg, changed = jumanji_config(args)
  if args.logger == "terminal":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logger = setup_train.setup_logger(cfg)
  else:
    logger = loggers.NoOpLogger()
  with logger:  # the budget counts from the setup of training, after the imports
    trained = train(cfg, args.seconds, logger, time.perf_counter())
  epoch_times = trained["epoch_times"]
  epoch_s = float(sum(epoch_times) / len(epoch_times))
  evaluation = evaluate(
    args.env, trained["agent"], trained["training_state"], args.instances, args.eval_seed
  )
  return dict(
    env=args.env,
    seed=args.seed,
    seconds=args.seconds,
    seconds_used=trained["seconds_used"],
    epochs=len(epoch_times),
    env_steps=len(epoch_times) * trained["steps_per_epoch"],
    curve=trained["curve"],
    evaluation=evaluation,
    timing=dict(
      setup_s=trained["setup_s"],
      compile_s=trained["compile_s"],
      epoch_s=epoch_s,
      env_steps_per_epoch=trained["steps_per_epoch"],
      steps_per_second=trained["steps_per_epoch"] / epoch_s,
      cpu_count=os.cpu_count(),
    ),
    changed={key: dict(jumanji=old, used=new) for key, (old, new) in changed.items()},
    config=OmegaConf.to_container(cfg, resolve=True),
    flags=vars(args),
    versions=dict(
      jax=jax.__version__,
      jaxlib=_version("jaxlib"),
      jumanji=jumanji.__version__,
      python=platform.python_version(),
    ),
    device=str(jax.devices()[0].device_kind),
  )


def _version(package: str) -> str | None:
  """The installed version of `package`, or None."""
  from importlib import metadata

  try:
    return metadata.version(package)
  except metadata.PackageNotFoundError:
    return None


def run(argv=None) -> int | dict:
  """Parses, checks the dependencies, runs, prints the summary, writes `--json`; the
  exit status of an error, else the suite's record."""
  args = parse_args(argv)
  missing = missing_modules()
  if missing:
    print(
      f"jumanji_a2c: error: jumanji.training needs {', '.join(missing)}: {INSTALL_HINT}",
      file=sys.stderr,
    )
    return 2
  import jax

  if jax.local_device_count() != 1:  # jumanji's setup would use every local device
    print(
      f"jumanji_a2c: error: trains on one device, found {jax.local_device_count()} (make one "
      "visible: CUDA_VISIBLE_DEVICES=0, no --xla_force_host_platform_device_count)",
      file=sys.stderr,
    )
    return 2
  try:
    report = train_and_play(args)
  except InstanceMismatch as error:
    print(f"jumanji_a2c: error: {error}", file=sys.stderr)
    return 1
  print(summary(report))
  if args.json:
    with open(args.json, "w") as file:
      json.dump(report, file, indent=1)
      file.write("\n")
  return record(report)


def record(report: dict) -> dict:
  """The run as the suite's table (one row) and its summary as a note."""
  evaluation = report["evaluation"]
  columns = ["env", "seed", "epochs", "env steps", "seconds used", "greedy return"]
  columns += ["solved", "mean gap", "optimal share", "instances"]
  row = [report["env"], report["seed"], report["epochs"], report["env_steps"]]
  row += [round(report["seconds_used"], 1), round(evaluation["mean_return"], 4)]
  row += [evaluation["solved"], evaluation["mean_gap"], evaluation["optimal_share"]]
  row += [evaluation["instances"]]
  title = f"jumanji's A2C on {report['env']}, {report['seconds']:g} s budget"
  return dict(tables=[dict(title=title, columns=columns, rows=[row])], notes=[summary(report)])
