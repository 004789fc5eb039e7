"""pgx's AlphaZero example with `import mcgs_jax as mctx`: its self-play timed against
the same code on the real mctx, side by side in one process.

pgx's `examples/alphazero/train.py` (Koyamada et al., "Pgx: Hardware-Accelerated
Parallel Game Simulators for Reinforcement Learning") trains with
`mctx.gumbel_muzero_policy` in a jitted, `pmap`ped self-play function. This script
does not copy that code: give it the example's folder (`--example`, a checkout of
github.com/sotetsuk/pgx, `examples/alphazero`). It reads `train.py` with `ast`,
takes the example's own `forward_fn`, `recurrent_fn`, `SelfplayOutput` and
`selfplay` definitions unchanged, and runs them three times, with `mctx` bound to:

  * `mctx`: DeepMind's mctx, as the example ships;
  * `import-only`: `mcgs_jax`, nothing else changed (a graph: states are keyed by
    the default `hash_pytree` of the whole pgx state);
  * `tree`: `mcgs_jax` with `transpositions=False` added to its
    `gumbel_muzero_policy` (this library's tree mode, which reproduces mctx).

The example's config fields (a namespace here, not its pydantic `Config`) and the
network of its `network.py` (`AZNet`, needs dm-haiku) take the sizes given here; the
defaults are scaled down for a CPU (the example's own: go_9x9, 1024 games, 32
simulations, 256 steps, 128 channels, 6 blocks). The runs are interleaved, median
of `--repeats`, after a compiling one. Every engine plays from the same keys; the
script prints how far each engine's `action_weights` lie from mctx's (the tree
mode's are expected within rounding while the games agree).

    python -m benchmarks pgx_example --part pgx_example --example PGX/examples/alphazero
      [--env-id go_9x9] [--games 128] [--simulations 32] [--steps 16]
      [--channels 32] [--blocks 2] [--repeats 5]
"""

import argparse
import ast
import datetime
import functools
import importlib.util
import os
import platform
import statistics
import time
import types
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

# The example's definitions this script runs, in train.py's order.
EXAMPLE_NAMES = ("forward_fn", "recurrent_fn", "SelfplayOutput", "selfplay")
ENGINES = ("mctx", "import-only", "tree")


def example_source(train_py: str) -> str:
  """The source of `EXAMPLE_NAMES` in pgx's `train.py`, each as written there.
  Raises `ValueError` naming any that is missing (another version of the example)."""
  with open(train_py) as file:
    text = file.read()
  lines = text.splitlines()
  found = {}
  for node in ast.parse(text).body:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in EXAMPLE_NAMES:
      # Decorators (`@jax.pmap`) are not part of the node's own segment.
      decorators = [lines[d.lineno - 1] for d in node.decorator_list]
      found[node.name] = "\n".join([*decorators, ast.get_source_segment(text, node, padded=True)])
  missing = [name for name in EXAMPLE_NAMES if name not in found]
  if missing:
    raise ValueError(f"{train_py} defines no {', '.join(missing)}: not pgx's AlphaZero example")
  return "\n\n".join(found[name] for name in EXAMPLE_NAMES)


def engine_module(engine: str) -> types.ModuleType:
  """The module the example's `mctx` name is bound to for `engine`."""
  if engine == "mctx":
    import mctx

    return mctx
  import mcgs_jax

  if engine == "import-only":
    return mcgs_jax
  module = types.ModuleType("mcgs_jax_tree")
  module.__dict__.update(vars(mcgs_jax))
  module.gumbel_muzero_policy = functools.partial(  # type: ignore[attr-defined]
    mcgs_jax.gumbel_muzero_policy, transpositions=False
  )
  return module


def load_network(example: str) -> Any:
  """The example's `network.py` as a module (its `AZNet`)."""
  spec = importlib.util.spec_from_file_location(
    "pgx_example_network", os.path.join(example, "network.py")
  )
  assert spec is not None and spec.loader is not None  # a .py path always has a loader
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def make_selfplay(example: str, engine: str, config: types.SimpleNamespace) -> tuple[Callable, Any]:
  """`(selfplay, model)`: the example's pmapped self-play with `mctx` bound to
  `engine`'s module, and a model initialised as the example does (key 0)."""
  import haiku as hk
  import pgx
  from pgx.experimental import auto_reset

  env = pgx.make(config.env_id)
  namespace: dict[str, Any] = dict(
    hk=hk,
    jax=jax,
    jnp=jnp,
    pgx=pgx,
    auto_reset=auto_reset,
    NamedTuple=NamedTuple,
    AZNet=load_network(example).AZNet,
    mctx=engine_module(engine),
    config=config,
    env=env,
    num_devices=1,
    devices=jax.local_devices()[:1],
  )
  exec(compile(example_source(os.path.join(example, "train.py")), "train.py", "exec"), namespace)
  forward = hk.without_apply_rng(hk.transform_with_state(namespace["forward_fn"]))
  namespace["forward"] = forward
  dummy = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(0), 2))
  model = forward.init(jax.random.PRNGKey(0), dummy.observation)
  # One device: the pmapped function takes a leading axis of 1 (the example's
  # `device_put_replicated`, which this jax no longer has).
  return namespace["selfplay"], jax.tree.map(lambda leaf: jnp.asarray(leaf)[None], model)


def run(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument(
    "--example", required=True, help="pgx's examples/alphazero folder (train.py, network.py)"
  )
  parser.add_argument("--env-id", default="go_9x9")
  parser.add_argument("--games", type=int, default=128, help="the example's selfplay_batch_size")
  parser.add_argument("--simulations", type=int, default=32)
  parser.add_argument("--steps", type=int, default=16, help="the example's max_num_steps")
  parser.add_argument("--channels", type=int, default=32)
  parser.add_argument("--blocks", type=int, default=2, help="the example's num_layers")
  parser.add_argument("--repeats", type=int, default=5)
  args = parser.parse_args(argv)
  for name in ("games", "simulations", "steps", "channels", "blocks", "repeats"):
    if getattr(args, name) < 1:
      parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
  for name in ("train.py", "network.py"):
    if not os.path.isfile(os.path.join(args.example, name)):
      parser.error(f"--example: {args.example} holds no {name} (give pgx's examples/alphazero)")
  config = types.SimpleNamespace(
    env_id=args.env_id,
    num_channels=args.channels,
    num_layers=args.blocks,
    resnet_v2=True,
    selfplay_batch_size=args.games,
    num_simulations=args.simulations,
    max_num_steps=args.steps,
  )
  print(
    f"# pgx's AlphaZero example, self-play; {datetime.date.today()}, "
    f"{platform.processor() or platform.machine()}, "
    f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, jax {jax.__version__}"
  )
  print(f"# {vars(config)}; median of {args.repeats} after a compiling run")
  keys = jax.random.split(jax.random.PRNGKey(0), 1)
  runs: dict[str, tuple[Callable, Any]] = {}
  outputs = {}
  for engine in ENGINES:
    selfplay, model = make_selfplay(args.example, engine, config)
    start = time.perf_counter()
    outputs[engine] = jax.block_until_ready(selfplay(model, keys))
    print(f"# {engine}: compiled and ran once in {time.perf_counter() - start:.1f} s", flush=True)
    runs[engine] = (selfplay, model)
  seconds: dict[str, list[float]] = {engine: [] for engine in ENGINES}
  for _ in range(args.repeats):
    for engine, (selfplay, model) in runs.items():
      start = time.perf_counter()
      jax.block_until_ready(selfplay(model, keys))
      seconds[engine].append(time.perf_counter() - start)
  reference = statistics.median(seconds["mctx"])
  print("| engine | self-play s (median) | / mctx | max abs action_weights difference to mctx |")
  print("|---|---|---|---|")
  rows = []
  for engine in ENGINES:
    median = statistics.median(seconds[engine])
    difference = float(
      np.max(np.abs(outputs[engine].action_weights - outputs["mctx"].action_weights))
    )
    print(f"| {engine} | {median:.3f} | {median / reference:.2f} | {difference:.2g} |")
    rows.append(
      [engine, round(median, 3), round(median / reference, 2), float(f"{difference:.2g}")]
    )
  return record(config, args.repeats, rows)


def record(config, repeats: int, rows) -> dict:
  """The printed table as the suite's record (already printed)."""
  columns = ["engine", "self-play s (median)", "/ mctx", "max abs action_weights difference"]
  title = f"pgx's AlphaZero example, self-play, median of {repeats} after a compiling run"
  notes = [f"The example's config: {vars(config)}"]
  table = dict(title=title, columns=columns, rows=rows)
  return dict(tables=[table], notes=notes, printed=True)
