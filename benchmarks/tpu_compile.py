"""Ahead-of-time TPU report: the search, `reroot`, a self-play iteration and the
training step compiled for a TPU slice on this machine, which has no TPU.

`libtpu` (`pip install "jax[tpu]==<jax's version>"`) compiles for a topology that
`jax.experimental.topologies.get_topology_desc` describes (`--topology v5e:2x2`: 4
chips). The games are sharded over every chip on the games axis (params and keys
replicated), as `mcgs-jax train` shards them (`mcgs_jax.apps.train.data_parallel`); each
program is lowered with abstract inputs and compiled, never run. Per program it
prints XLA's per-chip argument, output and temporary bytes (`memory_analysis()`), its
flops and bytes estimates (`cost_analysis()`), the collectives of the compiled HLO
(all-gather, all-reduce, all-to-all, collective-permute, reduce-scatter; each counted
once where it stands, even inside a loop) and how many all-gathers have a graph or
tree table's rows in their shape, and the seconds spent lowering and compiling here
(with the load average: the machine may be shared). A program that does not fit a
chip's memory is reported with the start of XLA's refusal.

Programs (`--programs`): `graph` (the default `mcgs_jax.muzero_policy`), `tree`
(`transpositions=False`), `mctx` (`mctx.muzero_policy`), each from the root that the
network evaluates; `reroot` (the graph search's result rerooted by its action);
`self_play` and `self_play_mctx` (one iteration of `mcgs-jax train`'s defaults and of
`--engine mctx`, `make_self_play`; games the training loop knows the length of);
`train_step` (`make_train_step` on `Config`'s default batch, the same for every B
and S). `--max-children K` searches the graph with compact edges (`GraphOptions`'s
`max_children`, where this mcgs_jax has it).

    python -m benchmarks scale --topology v5e:2x2 --game connect_four \\
      --batch-per-chip 256 --simulations 64 [--programs graph,mctx] [--json FILE]
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # this process runs nothing on a device
# libtpu's start-up looks for a TPU host; these quiet it and skip its lock file, which
# a JAX process on the CPU may hold where libtpu is installed.
os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

import argparse
import dataclasses
import datetime
import importlib.metadata
import json
import re
import time

import jax
import numpy as np
import optax
from jax.sharding import Mesh

import mcgs_jax as mg
from mcgs_jax.apps import registry, train
from mcgs_jax.apps.cli.args import int_at_least
from mcgs_jax.apps.train import data_parallel
from mcgs_jax.games import evaluators, make_game, networks

PROGRAMS = ("graph", "tree", "mctx", "reroot", "self_play", "self_play_mctx", "train_step")
COLLECTIVES = ("all-gather", "all-reduce", "all-to-all", "collective-permute", "reduce-scatter")
# One HLO instruction `%name = SHAPE OP(` (or `OP-start(`, its asynchronous form).
_COLLECTIVE = re.compile(
  r"^\s*(?:ROOT )?%\S+ = (?P<shape>.+?) (?P<op>" + "|".join(COLLECTIVES) + r")(?:-start)?\(",
  re.MULTILINE,
)


def topology_mesh(topology: str) -> Mesh:
  """A one-axis mesh (`data_parallel.MESH_AXIS`) over every chip of a TPU topology."""
  from jax.experimental import topologies

  devices = topologies.get_topology_desc(topology, "tpu").devices
  return Mesh(np.asarray(devices), (data_parallel.MESH_AXIS,))


def collectives(hlo_text: str, table_rows: set[int]) -> dict:
  """The collectives of a compiled program's HLO text, by kind, and `graph_all_gathers`:
  the all-gathers whose result (of rank 2 or more) has a dimension in `table_rows`,
  the row counts of the graph's or tree's tables (nodes, hash slots);
  `all_gather_shapes` lists every all-gather's result."""
  counts = dict.fromkeys(COLLECTIVES, 0)
  gathers = []
  for match in _COLLECTIVE.finditer(hlo_text):
    counts[match["op"]] += 1
    if match["op"] == "all-gather":
      gathers.append(match["shape"])
  dims = [
    [int(d) for d in re.findall(r"\d+", body)]
    for s in gathers
    for body in re.findall(r"\[([\d,]*)\]", s)
  ]
  counts["graph_all_gathers"] = sum(len(d) >= 2 and bool(table_rows & set(d)) for d in dims)
  counts["all_gather_shapes"] = gathers
  return counts


def table_rows(tree) -> set[int]:
  """Row counts of a (batched, abstract) graph's or mctx tree's tables: its nodes and,
  for a graph, its hash slots."""
  rows = {tree.node_visits.shape[1]}
  if hasattr(tree, "hash_slots"):
    rows.add(tree.hash_slots.shape[1])
  return rows


def compile_report(jitted, args: tuple, rows: set[int]) -> dict:
  """Lowers and compiles `jitted` for `args` (abstract, sharded): per-chip bytes,
  XLA's estimates, collectives and the seconds it took; `error` instead of the
  figures when XLA refuses the program (e.g. it does not fit a chip's memory)."""
  load = os.getloadavg()[0]
  started = time.perf_counter()
  try:
    compiled = jitted.lower(*args).compile()
  except jax.errors.JaxRuntimeError as error:
    return dict(error=" ".join(str(error).split())[:600], load=load)
  seconds = time.perf_counter() - started
  memory = compiled.memory_analysis()
  cost = compiled.cost_analysis()
  return dict(
    argument_bytes=memory.argument_size_in_bytes,
    output_bytes=memory.output_size_in_bytes,
    temp_bytes=memory.temp_size_in_bytes,
    flops=cost.get("flops", 0.0),
    bytes_accessed=cost.get("bytes accessed", 0.0),
    compile_s=seconds,
    load=load,
    **collectives(compiled.as_text(), rows),
  )


def abstract(tree, sharding):
  """`tree`'s arrays as `jax.ShapeDtypeStruct`s placed with `sharding`."""
  return jax.tree_util.tree_map(
    lambda leaf: jax.ShapeDtypeStruct(np.shape(leaf), leaf.dtype, sharding=sharding), tree
  )


def programs(
  game_id: str, per_chip: int, simulations: int, mesh: Mesh, names, max_children: int | None
):
  """`name -> (jitted, abstract args, table rows)` for the programs `names` of
  `PROGRAMS`, on `per_chip * chips` games of `game_id` with `simulations`."""
  config = train.Config(
    game=game_id,
    num_games=per_chip * mesh.size,
    num_simulations=simulations,
    progress=False,
  )
  apply_fn, params = networks.init_network(
    make_game(game_id).env, jax.random.PRNGKey(0), hidden=config.hidden
  )
  game = make_game(game_id, evaluators.network_evaluator(apply_fn))
  replicated, games = data_parallel.replicated(mesh), data_parallel.batch_sharded(mesh)
  key = jax.random.PRNGKey(0)
  params_in, key_in = abstract((params, key), replicated)
  states = abstract(jax.eval_shape(lambda k: game.init(k, config.num_games), key), games)
  graph_options = {} if max_children is None else dict(max_children=max_children)
  mctx_search = registry.mctx_policy("muzero", game.recurrent_fn)
  # `search(params, key, root, invalid_actions) -> PolicyOutput` of each program.
  searches = {
    "graph": lambda p, k, root, invalid: mg.muzero_policy(
      p, k, root, game.recurrent_fn, simulations, invalid, hash_fn=game.hash_fn, **graph_options
    ),
    "tree": lambda p, k, root, invalid: mg.muzero_policy(
      p, k, root, game.recurrent_fn, simulations, invalid, transpositions=False
    ),
    "mctx": lambda p, k, root, invalid: mctx_search(p, k, root, simulations, invalid),
  }

  def search_program(search):
    def run(params, key, state):
      output = search(params, key, game.root(params, key, state), game.invalid_actions(state))
      return data_parallel.shard_games(output, mesh)

    return jax.jit(run)

  result = {}
  for name, search in searches.items():
    jitted = search_program(search)
    tree = jax.eval_shape(jitted, params_in, key_in, states).search_tree
    result[name] = (jitted, (params_in, key_in, states), table_rows(tree))
  graph = jax.eval_shape(result["graph"][0], params_in, key_in, states)
  reroot = jax.jit(lambda g, a: data_parallel.shard_games(mg.reroot(g, a), mesh))
  result["reroot"] = (
    reroot,
    abstract((graph.search_graph, graph.action), games),
    table_rows(graph.search_graph),
  )
  if registry.max_game_length(game) is not None:
    # The rows of the graph self-play keeps from move to move (`Config.search_capacity`).
    kept = search_program(
      lambda p, k, root, invalid: mg.muzero_policy(
        p, k, root, game.recurrent_fn, simulations, invalid, capacity=config.search_capacity
      )
    )
    rows = table_rows(jax.eval_shape(kept, params_in, key_in, states).search_tree)
    result["self_play"] = (train.make_self_play(game, config, mesh), (params_in, key_in), rows)
    mctx_config = dataclasses.replace(config, engine="mctx", transpositions=False, reuse=False)
    result["self_play_mctx"] = (
      train.make_self_play(game, mctx_config, mesh),
      (params_in, key_in),
      {mctx_config.search_capacity},
    )
  optimizer = optax.adam(config.learning_rate)
  observation_shape, observation_dtype = game.observation_spec
  batch = dict(
    observation=np.zeros((config.train_batch_size, *observation_shape), observation_dtype),
    policy=np.zeros((config.train_batch_size, game.num_actions), np.float32),
    value=np.zeros((config.train_batch_size,), np.float32),
  )
  result["train_step"] = (
    train.make_train_step(apply_fn, optimizer, config.l2, mesh),
    (params_in, abstract(optimizer.init(params), replicated), abstract(batch, games)),
    set(),
  )
  return {name: result[name] for name in names if name in result}


def row(name: str, report: dict) -> str:
  """A markdown row of the report's table: MiB per chip, collectives, estimates."""
  if "error" in report:
    return f"| {name} | {report['error'][:120]} |" + " |" * 8 + f" {report['load']:.1f} |"
  mib = lambda key: f"{report[key] / 2**20:.1f}"
  counts = ", ".join(
    f"{report[kind]} {kind}" for kind in COLLECTIVES if report[kind] and kind != "all-gather"
  )
  return (
    f"| {name} | {mib('argument_bytes')} | {mib('output_bytes')} | {mib('temp_bytes')} "
    f"| {report['all-gather']} ({report['graph_all_gathers']}) | {counts or '0'} "
    f"| {report['flops'] / 1e9:.2f} | {report['bytes_accessed'] / 1e9:.2f} "
    f"| {report['compile_s']:.1f} | {report['load']:.1f} |"
  )


def run(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--topology", default="v5e:2x2")
  parser.add_argument("--game", default="connect_four")
  parser.add_argument("--batch-per-chip", type=int_at_least(1), default=256)
  parser.add_argument("--simulations", type=int_at_least(1), default=64)
  parser.add_argument("--programs", default=",".join(PROGRAMS), help="comma-separated")
  parser.add_argument(
    "--max-children",
    type=int_at_least(0),
    help="compact edges for the graph search (GraphOptions; 0 or absent: dense)",
  )
  parser.add_argument("--json", help="append one JSON line per program to this file")
  args = parser.parse_args(argv)
  names = [name for name in args.programs.split(",") if name]
  if set(names) - set(PROGRAMS):
    parser.error(f"--programs: unknown {sorted(set(names) - set(PROGRAMS))}; known {PROGRAMS}")
  args.max_children = args.max_children or None  # 0: dense, as in `mcgs-jax search`
  if args.max_children is not None:
    try:
      mg.GraphOptions(max_children=args.max_children)
    except TypeError:
      parser.error("--max-children: this mcgs_jax's GraphOptions has no max_children yet")
    except ValueError as error:
      parser.error(f"--max-children: {error}")
  mesh = topology_mesh(args.topology)
  setting = dict(
    date=str(datetime.date.today()),
    jax=jax.__version__,
    libtpu=importlib.metadata.version("libtpu"),
    topology=args.topology,
    chip=mesh.devices.flat[0].device_kind,
    game=args.game,
    batch_per_chip=args.batch_per_chip,
    simulations=args.simulations,
    max_children=args.max_children,
  )
  print(", ".join(f"{key} {value}" for key, value in setting.items()) + f", {os.cpu_count()} cores")
  print(
    "| program | argument MiB | output MiB | temporary MiB | all-gathers (of graph tables) "
    "| other collectives | GFLOP | GB accessed | compile s | load |"
  )
  print("|---|---|---|---|---|---|---|---|---|---|")
  built = programs(args.game, args.batch_per_chip, args.simulations, mesh, names, args.max_children)
  skipped = [name for name in names if name not in built]
  for name, (jitted, inputs, rows) in built.items():
    report = compile_report(jitted, inputs, rows)
    print(row(name, report), flush=True)
    if args.json:
      with open(args.json, "a") as file:
        file.write(json.dumps(dict(setting, program=name, **report)) + "\n")
  if skipped:
    print(f"not compiled: {', '.join(skipped)} (no game length in registry.MAX_GAME_LENGTH)")
