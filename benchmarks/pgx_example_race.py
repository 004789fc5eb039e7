"""pgx's AlphaZero example trained three ways at equal wall time: unchanged (mctx),
with `import mcgs_jax as mctx`, and with the few lines that keep each game's graph
between moves and key it by the game state. Elo between the final networks.

pgx's `examples/alphazero/train.py` (Koyamada et al., "Pgx: Hardware-Accelerated
Parallel Game Simulators for Reinforcement Learning") trains a residual network
(`network.py`'s `AZNet`, batch norm, dm-haiku) with `mctx.gumbel_muzero_policy` in a
pmapped self-play scan. This script copies none of it: give it the example's folder
(`--example`, a checkout of github.com/sotetsuk/pgx). Each run writes the example's
`train.py`, edited as a user would edit it (`EDITS`; `--show-diff` prints the diff),
into its run folder and runs it there as `__main__`, in its own process, with the
example's own command-line config. The ways:

  * `mctx`: the example as it ships;
  * `import`: `import mctx` becomes `import mcgs_jax as mctx` (a graph, states keyed
    by the default `hash_pytree` of the whole pgx state, searched from scratch every
    move);
  * `graph`: that, plus the lines that carry each game's graph through the self-play
    scan (`mctx.reroot` after every move, `graph=` to the next search, an empty
    graph to start from) and key it with `transposition_key_fn(env_id)`, with a
    capacity of `4 S + 1` nodes.

What the runs need from this machine, and nothing from the example: no `wandb`
(a stub that logs nothing), no network access (`pgx.make_baseline_model` would
download pgx's baseline, which only the example's own sampled debugging evaluation
plays; here it is a uniform policy), and `jax.device_put_replicated` (gone from this
jax; stacked for the devices, as it did).

Each run is killed after `--budget` seconds of wall time (compilation included); the
example checkpoints its network every `eval_interval` iterations (1 here), and the
last complete checkpoint is the run's final network. Then, per seed, the final
networks play each other (`--games` games, both searched by the same tree muzero,
`--eval-simulations` per move, greedy, 4-ply random openings, match seed
`--eval-seed`): `import` and `graph` against `mctx`, and `graph` against `import`.

    python -m benchmarks pgx_example --part pgx_example_race --example PGX/examples/alphazero \\
      [--env-id othello] [--seeds 0,1,2] [--budget 180]
"""

import argparse
import datetime
import difflib
import glob
import json
import os
import pickle
import platform
import runpy
import subprocess
import sys
import time
import types

import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax.apps import arena, files
from mcgs_jax.apps.arena import results as arena_results

WAYS = ("mctx", "import", "graph")
IMPORT_EDIT = ("import mctx\n", "import mcgs_jax as mctx\n")
# (the example's text, what a user writes instead), applied in order; each text
# must occur exactly once in train.py.
GRAPH_EDITS = (
  ("import mctx\n", "import mcgs_jax as mctx\nfrom mcgs_jax.games import transposition_key_fn\n"),
  (
    "    def step_fn(state, key) -> SelfplayOutput:\n",
    "    def step_fn(carry, key) -> SelfplayOutput:\n        state, graph = carry\n",
  ),
  (
    "            gumbel_scale=1.0,\n",
    "            gumbel_scale=1.0,\n"
    "            graph=graph,\n"
    "            hash_fn=transposition_key_fn(config.env_id),\n"
    "            capacity=4 * config.num_simulations + 1,\n",
  ),
  (
    "        return state, SelfplayOutput(\n",
    "        graph = mctx.reroot(policy_output.search_graph, policy_output.action)\n"
    "        return (state, graph), SelfplayOutput(\n",
  ),
  (
    "    _, data = jax.lax.scan(step_fn, state, key_seq)\n",
    "    shapes = jax.eval_shape(step_fn, (state, None), key_seq[0])\n"
    "    graph = mctx.empty_like(shapes[0][1])\n"
    "    _, data = jax.lax.scan(step_fn, (state, graph), key_seq)\n",
  ),
)
EDITS = {"mctx": (), "import": (IMPORT_EDIT,), "graph": GRAPH_EDITS}


def edited_source(example: str, way: str) -> str:
  """The example's `train.py` with `way`'s edits; ValueError when a text to edit is
  not there exactly once (another version of the example)."""
  path = os.path.join(example, "train.py")
  with open(path, encoding="utf-8") as handle:
    text = handle.read()
  for old, new in EDITS[way]:
    if text.count(old) != 1:
      raise ValueError(f"{path}: expected one {old.strip()!r}; not the example this edits")
    text = text.replace(old, new)
  return text


def diff(example: str, way: str = "graph") -> str:
  """The unified diff a user applies to the example's `train.py` for `way`."""
  path = os.path.join(example, "train.py")
  with open(path, encoding="utf-8") as handle:
    before = handle.read().splitlines(keepends=True)
  after = edited_source(example, way).splitlines(keepends=True)
  return "".join(difflib.unified_diff(before, after, "train.py", "train.py", n=1))


def install_machine_shims() -> None:
  """What the example needs from a machine that this one lacks (module docstring)."""
  import pgx

  sys.modules["wandb"] = types.SimpleNamespace(init=lambda **_: None, log=lambda *_: None)

  def uniform_baseline(model_id: str):
    env = pgx.make(model_id.rsplit("_v", 1)[0])
    return lambda observation: (
      jnp.zeros((observation.shape[0], env.num_actions)),
      jnp.zeros(observation.shape[0]),
    )

  pgx.make_baseline_model = uniform_baseline
  if not hasattr(jax, "device_put_replicated"):
    jax.device_put_replicated = lambda tree, devices: jax.device_put(
      jax.tree.map(lambda leaf: jnp.stack([jnp.asarray(leaf)] * len(devices)), tree)
    )


def run_worker(args) -> None:
  """The training process: the edited example as `__main__`, in the run folder."""
  folder = os.path.abspath(args.worker_folder)
  script = os.path.join(folder, "train.py")
  with open(script, "w", encoding="utf-8") as handle:
    handle.write(edited_source(args.example, args.worker))
  install_machine_shims()
  sys.path.insert(0, os.path.abspath(args.example))  # the example's `network.py`
  os.chdir(folder)
  sys.argv = ["train.py", *example_config(args, args.worker_seed)]
  runpy.run_path(script, run_name="__main__")


def example_config(args, seed: int) -> list[str]:
  """The example's own command-line config (OmegaConf `key=value`)."""
  return [
    f"env_id={args.env_id}",
    f"seed={seed}",
    f"selfplay_batch_size={args.selfplay_games}",
    f"num_simulations={args.simulations}",
    f"max_num_steps={args.steps}",
    f"training_batch_size={args.train_batch}",
    f"num_channels={args.channels}",
    f"num_layers={args.blocks}",
    "eval_interval=1",
    "max_num_iters=1000000",
  ]


class _AnyConfig:
  """Stands for the example's pydantic `Config` (defined in its `__main__`) when a
  checkpoint is read back: its fields are kept as a dict."""

  def __setstate__(self, state):
    self.state = state


class _CheckpointUnpickler(pickle.Unpickler):
  def find_class(self, module, name):
    if module == "__main__":
      return _AnyConfig
    return super().find_class(module, name)


def read_checkpoint(path: str) -> dict:
  """A checkpoint of the example (a pickled dict: `model`, `iteration`, `frames`,
  ...)."""
  with open(path, "rb") as handle:
    return _CheckpointUnpickler(handle).load()


def final_checkpoint(folder: str) -> dict:
  """The last checkpoint of the run in `folder` that reads back whole (the kill at
  the budget may cut the one being written), with its `file`."""
  for path in sorted(glob.glob(os.path.join(folder, "checkpoints", "*", "*.ckpt")), reverse=True):
    try:
      checkpoint = read_checkpoint(path)
    except (EOFError, pickle.UnpicklingError, ValueError):
      continue
    return dict(checkpoint, file=path)
  raise FileNotFoundError(f"no complete checkpoint in {folder}/checkpoints")


def train_run(args, way: str, seed: int) -> dict:
  """Runs `way` with `seed` for `args.budget` seconds; returns its record."""
  folder = os.path.join(args.out_dir, f"seed{seed}", way)
  record_path = os.path.join(folder, "record.json")
  if os.path.exists(record_path):
    with open(record_path, encoding="utf-8") as handle:
      return json.load(handle)
  os.makedirs(folder, exist_ok=True)
  from benchmarks import record as suite

  command = suite.module_command("pgx_example_race", ["--example", args.example])
  command += ["--worker", way, "--worker-seed", str(seed), "--worker-folder", folder]
  command += [f"--{name.replace('_', '-')}={getattr(args, name)}" for name in SIZE_FLAGS]
  load = os.getloadavg()[0]
  print(f"[{time.strftime('%H:%M:%S')}] seed {seed} {way}", flush=True)
  with open(os.path.join(folder, "log.txt"), "w") as log:
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
      process.wait(timeout=args.budget)
      raise RuntimeError(f"seed {seed} {way} ended before its budget: see {folder}/log.txt")
    except subprocess.TimeoutExpired:
      process.kill()
      process.wait()
  checkpoint = final_checkpoint(folder)
  record = dict(
    way=way,
    seed=seed,
    file=checkpoint["file"],
    iterations=int(checkpoint["iteration"]),
    frames=int(checkpoint["frames"]),
    load_before=load,
  )
  files.write_atomically(record_path, json.dumps(record, indent=1))
  return record


SIZE_FLAGS = (
  "env_id",
  "selfplay_games",
  "simulations",
  "steps",
  "train_batch",
  "channels",
  "blocks",
)


def network_apply(args):
  """`apply_fn((params, state), observation) -> (logits, value)`: the example's
  `AZNet` at the run's size, in evaluation mode (batch norm's running averages)."""
  import haiku as hk
  import pgx

  # The other scripts are imported where used, so that the edits and the checkpoint
  # helpers load without the `benchmarks` package (tests/test_pgx_example_race.py).
  from benchmarks import pgx_example

  num_actions = pgx.make(args.env_id).num_actions
  network = pgx_example.load_network(args.example)

  def forward_fn(observation):
    net = network.AZNet(
      num_actions=num_actions,
      num_channels=args.channels,
      num_blocks=args.blocks,
      resnet_v2=True,
    )
    return net(observation, is_training=False, test_local_stats=False)

  forward = hk.without_apply_rng(hk.transform_with_state(forward_fn))
  return lambda model, observation: forward.apply(model[0], model[1], observation)[0]


def play(game, apply_fn, record_a: dict, record_b: dict, args) -> dict:
  """`record_a`'s final network against `record_b`'s (see the module docstring)."""
  from benchmarks import training_race

  model = lambda record: jax.tree.map(jnp.asarray, read_checkpoint(record["file"])["model"])
  result = arena.play_match(
    game,
    training_race.tree_agent(apply_fn, args.eval_simulations, "A"),
    training_race.tree_agent(apply_fn, args.eval_simulations, "B"),
    num_games=args.games,
    seed=args.eval_seed,
    params_a=model(record_a),
    params_b=model(record_b),
    opening_moves=4,
  )
  return training_race.match_record(result)


PAIRS = (("import", "mctx"), ("graph", "mctx"), ("graph", "import"))


def run(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--example", required=True, help="pgx's examples/alphazero folder")
  parser.add_argument("--env-id", default="othello")
  parser.add_argument("--seeds", default="0,1,2")
  parser.add_argument("--ways", default=",".join(WAYS))
  parser.add_argument("--budget", type=float, default=180.0, help="seconds of wall time per run")
  parser.add_argument("--selfplay-games", type=int, default=64, help="selfplay_batch_size")
  parser.add_argument("--simulations", type=int, default=32, help="num_simulations")
  parser.add_argument("--steps", type=int, default=128, help="max_num_steps of a self-play scan")
  parser.add_argument("--train-batch", type=int, default=512, help="training_batch_size")
  parser.add_argument("--channels", type=int, default=32, help="num_channels")
  parser.add_argument("--blocks", type=int, default=2, help="num_layers")
  parser.add_argument("--out-dir", default="pgx_example_race")
  parser.add_argument("--games", type=int, default=256, help="games per match")
  parser.add_argument("--eval-simulations", type=int, default=16)
  parser.add_argument("--eval-seed", type=int, default=7)
  parser.add_argument("--train-only", action="store_true")
  parser.add_argument("--show-diff", action="store_true", help="print the graph way's diff")
  parser.add_argument("--worker", choices=WAYS, help=argparse.SUPPRESS)
  parser.add_argument("--worker-seed", type=int, help=argparse.SUPPRESS)
  parser.add_argument("--worker-folder", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  for name in ("train.py", "network.py"):
    if not os.path.isfile(os.path.join(args.example, name)):
      parser.error(f"--example: {args.example} holds no {name} (give pgx's examples/alphazero)")
  if args.show_diff:
    print(diff(args.example), end="")
    return
  if args.worker:
    run_worker(args)
    return
  ways = [way for way in args.ways.split(",") if way]
  if not set(ways) <= set(WAYS):
    parser.error(f"--ways: some of {WAYS}, got {args.ways!r}")
  seeds = [int(seed) for seed in args.seeds.split(",") if seed]
  runs = {(seed, way): train_run(args, way, seed) for seed in seeds for way in ways}
  if args.train_only:
    return
  game = arena.two_player_game(args.env_id)
  apply_fn = network_apply(args)
  matches = {}
  for seed in seeds:
    for first, second in PAIRS:
      if (seed, first) in runs and (seed, second) in runs:
        matches[seed, first, second] = play(
          game, apply_fn, runs[seed, first], runs[seed, second], args
        )
        low, high = matches[seed, first, second]["elo_ci95"]
        print(
          f"seed {seed} {first} vs {second}: {matches[seed, first, second]['elo']:+.0f} "
          f"[{low:+.0f}, {high:+.0f}]",
          flush=True,
        )
  return write_section(runs, matches, seeds, ways, args)


def write_section(runs: dict, matches: dict, seeds, ways, args) -> dict:

  load_text = ", ".join(f"{run['load_before']:.1f}" for run in runs.values())
  lines = [
    f"## pgx's AlphaZero example trained three ways at equal wall time "
    f"(`benchmarks/pgx_example_race.py`, date {datetime.date.today().isoformat()}, "
    f"{os.cpu_count()}-core CPU ({platform.processor() or platform.machine()}), one run "
    f"at a time alone on the machine, jax {jax.__version__})",
    "",
    f"The example's `train.py` {' '.join(example_config(args, 0)).replace('seed=0', 'seed=K')}, "
    f"{args.budget:.0f} s of wall time per run (compilation included), ways {', '.join(ways)}. "
    "Held equal: wall time, the example's network, config and seeds. Final networks "
    f"play each other {args.games} games (tree muzero with {args.eval_simulations} "
    f"simulations on both sides, greedy, 4-ply random openings, seed {args.eval_seed}). "
    f"1-minute load average before each run: {load_text}. Regenerate: "
    "`python -m benchmarks pgx_example --part pgx_example_race "
    "--example PGX/examples/alphazero --env-id "
    f"{args.env_id} --seeds {args.seeds} --budget {args.budget:.0f}`.",
    "",
    "| seed | way | iterations | frames |",
    "|---|---|---|---|",
  ]
  for (seed, way), run in runs.items():
    lines.append(f"| {seed} | {way} | {run['iterations']} | {run['frames']} |")
  lines += ["", "| seed | A | B | A's W-D-L | Elo of A over B [95%] |", "|---|---|---|---|---|"]
  pooled: dict = {}
  for (seed, first, second), result in matches.items():
    low, high = result["elo_ci95"]
    lines.append(
      f"| {seed} | {first} | {second} | {result['wins']}-{result['draws']}-{result['losses']} "
      f"| {result['elo']:+.0f} [{low:+.0f}, {high:+.0f}] |"
    )
    scores = [1.0] * result["wins"] + [0.5] * result["draws"] + [0.0] * result["losses"]
    pooled.setdefault((first, second), []).extend(scores)
  for (first, second), scores in pooled.items():
    _, elo, (low, high), _ = arena_results.elo_interval(np.array(scores))
    lines.append(f"| pooled | {first} | {second} | - | {elo:+.0f} [{low:+.0f}, {high:+.0f}] |")
  from benchmarks import record as suite

  return suite.section(lines)
