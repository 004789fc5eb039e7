"""Training race on a jumanji planning problem at equal wall time: `mcgs-jax train`'s
defaults against the same pipeline searching with mctx, and against jumanji's own A2C
(`benchmarks/jumanji_a2c.py`), over several seeds, with learning curves.

Pipelines (`--pipelines`):

  * `mcgs`: `mcgs-jax train --game jumanji:<env>` with its defaults (a graph kept
    between moves, forced playouts, the game's default network) and `--make-room`;
  * `mcgs-gumbel`: the same with `--policy gumbel` (this library's Gumbel MuZero);
  * `mctx`: the same with `--engine mctx` (DeepMind's `mctx.muzero_policy`, a tree
    searched afresh every move), `mctx-gumbel`: with `--policy gumbel` too;
  * `a2c`: jumanji's A2C with its own networks and hyperparameters
    (`benchmarks/jumanji_a2c.py`; its learner steps per epoch shortened so that the
    clock is checked often, which changes nothing it learns).

Held equal: the wall time (`--budget` seconds from the process's start of training,
compilation included), the machine (run it alone: the load average is recorded), and
for `mcgs` and `mctx` the network, self-play games, simulations per move and training
steps (`--games`, `--simulations`, `--train-steps`). Each run saves its network after
each fraction of the budget (`--fractions`) and at the end
(`benchmarks.training_race.train_with_snapshots`).

Every saved network of `mcgs` and `mctx` is then measured on `--instances` instances
that no run trained on (seed `--eval-seed`), with its own pipeline's search at
`--eval-simulations` per step (this library's graph kept between steps for `mcgs`,
mctx's tree for `mctx`), and the final networks also with one search for both (mctx's
tree), so that the network's share is seen apart from the search's. A2C plays its
greedy policy on the same instances (its `evaluation`). Reported: mean return, solved
share (Sudoku, Rubik's cube) or mean gap to the exact optimum (Knapsack, TSP).

    python -m benchmarks planning --part planning_race --env Knapsack-v1 --seeds 0,1,2 \\
        --budget 360 \\
        --out-dir planning_race --plot benchmarks/planning_race_knapsack.png
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import time

from benchmarks import record as suite
from mcgs_jax.apps import registry
from mcgs_jax.apps.arena.agent import Agent
from mcgs_jax.apps.planning import episodes
from mcgs_jax.apps.train.checkpoint_files import load_network

PIPELINES = {
  "mcgs": ["--make-room"],
  "mcgs-gumbel": ["--make-room", "--policy", "gumbel"],
  "mctx": ["--engine", "mctx"],
  "mctx-gumbel": ["--engine", "mctx", "--policy", "gumbel"],
  "a2c": None,  # benchmarks/jumanji_a2c.py
}


def common_train_args(args) -> list[str]:
  return [
    "--game",
    f"jumanji:{args.env}",
    "--games",
    str(args.games),
    "--simulations",
    str(args.simulations),
    "--train-steps",
    str(args.train_steps),
    "--eval-games",
    "0",
    "--iterations",
    "100000",
  ]


def run_pipeline(name: str, seed: int, args) -> dict:
  """Trains one pipeline with one seed in a fresh process; returns its record: the
  snapshots (`file`, `elapsed_s`) or A2C's report, and the load before the run."""
  folder = os.path.join(args.out_dir, args.env, f"seed{seed}")
  os.makedirs(folder, exist_ok=True)
  prefix = os.path.join(folder, name)
  if args.reuse and os.path.exists(prefix + "_record.json"):
    with open(prefix + "_record.json", encoding="utf-8") as handle:
      return json.load(handle)
  load = os.getloadavg()[0]
  started = time.perf_counter()
  print(
    f"[{time.strftime('%H:%M:%S')}] {args.env} seed {seed} {name} (load {load:.2f})", flush=True
  )
  if PIPELINES[name] is None:
    command = suite.module_command("jumanji_a2c", ["--env", args.env])
    command += ["--seed", str(seed), "--seconds", str(args.budget), "--instances"]
    command += [str(args.instances), "--eval-seed", str(args.eval_seed), "--json", prefix + ".json"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    with open(prefix + ".json", encoding="utf-8") as handle:
      record = dict(a2c=json.load(handle))
  else:
    argv = [*common_train_args(args), "--seed", str(seed), *PIPELINES[name]]
    command = suite.module_command("training_race", ["--worker", json.dumps(argv)])
    command += ["--budget", str(args.budget), "--fractions", args.fractions, "--out-dir", prefix]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    with open(prefix + "_history.json", encoding="utf-8") as handle:
      record = dict(snapshots=json.load(handle)["snapshots"])
  record.update(load_before=load, process_seconds=time.perf_counter() - started)
  with open(prefix + "_record.json", "w", encoding="utf-8") as handle:
    json.dump(record, handle)
  return record


def measure(network_file: str, engine: str, args, policy: str = "muzero") -> dict:
  """`EpisodeResult.summary()` of a saved network searched by `engine`'s `policy` on
  the evaluation instances."""
  game = registry.game_from_spec(f"jumanji:{args.env}")
  apply_fn, params, _ = load_network(network_file, game.env)
  options = dict(policy=policy, evaluator="network", apply_fn=apply_fn)
  options["num_simulations"] = args.eval_simulations
  agent = Agent(engine="mctx", **options) if engine == "mctx" else Agent(**options)
  result = episodes.play_episodes(
    game, agent, num_instances=args.instances, seed=args.eval_seed, params=params
  )
  return result.summary()


def score(summary: dict) -> float:
  """The figure a curve plots: the mean gap to the optimum where known (lower is
  better), else minus the solved share."""
  gap = summary.get("mean_gap")
  return float(gap) if gap is not None else -float(summary["solved"] or 0.0)


def curves(records: dict, args) -> dict:
  """`{(seed, pipeline): [point]}`, each point `elapsed_s` and its own search's
  summary; A2C's single point is its final evaluation."""
  out = {}
  for (seed, name), record in records.items():
    if "a2c" in record:
      report = record["a2c"]
      out[seed, name] = [dict(elapsed_s=report["seconds_used"], **report["evaluation"])]
      continue
    engine = "mctx" if name.startswith("mctx") else "mcgs"
    policy = "gumbel" if name.endswith("gumbel") else "muzero"
    out[seed, name] = [
      dict(elapsed_s=snapshot["elapsed_s"], **measure(snapshot["file"], engine, args, policy))
      for snapshot in record["snapshots"]
    ]
    print(f"seed {seed} {name}: {[round(score(p), 4) for p in out[seed, name]]}", flush=True)
  return out


def plot(points: dict, path: str, env: str) -> None:
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  figure, axis = plt.subplots(figsize=(6, 4))
  colours = {
    "mcgs": "tab:blue",
    "mcgs-gumbel": "tab:purple",
    "mctx": "tab:orange",
    "mctx-gumbel": "tab:red",
    "a2c": "tab:green",
  }
  for (seed, name), curve in sorted(points.items()):
    axis.plot(
      [p["elapsed_s"] for p in curve],
      [100 * score(p) for p in curve],
      marker="o",
      color=colours[name],
      label=name if seed == min(s for s, _ in points) else None,
    )
  axis.set_xlabel("wall time (s)")
  axis.set_ylabel("gap to the optimum (%)" if "Knapsack" in env or "TSP" in env else "-solved (%)")
  axis.set_title(f"{env}: training at equal wall time")
  axis.legend()
  figure.tight_layout()
  figure.savefig(path, dpi=100)


def section(points: dict, finals_same_search: dict, records: dict, args) -> list[str]:
  seeds = sorted({seed for seed, _ in points})
  names = [name for name in PIPELINES if any((s, name) in points for s in seeds)]
  searched = [name for name in names if name != "a2c"]
  loads = [record["load_before"] for record in records.values()]
  lines = [
    f"## Training race on jumanji {args.env} at equal wall time "
    f"({datetime.date.today().isoformat()})",
    "",
    f"`python -m benchmarks planning --part planning_race --env {args.env} --seeds "
    f"{','.join(map(str, seeds))} --budget {args.budget} --pipelines {','.join(names)}` "
    f"on {platform.processor() or platform.machine()}, {os.cpu_count()} cores, alone "
    f"(load average before each run {min(loads):.2f}-{max(loads):.2f}). Each run "
    f"{args.budget:g} s of wall time, compilation included; mcgs and mctx: "
    f"{args.games} games per iteration, {args.simulations} simulations per move, "
    f"{args.train_steps} training steps per iteration, the same network. Final "
    f"networks measured on {args.instances} instances of seed {args.eval_seed} (never "
    f"trained on), each with its own pipeline's search at {args.eval_simulations} "
    "simulations per step (A2C: its greedy policy); \"X net, mctx's search\": X's final "
    "network searched by mctx.muzero_policy, so that the networks compare apart from "
    "the searches.",
    "",
    "| seed | "
    + " | ".join(names)
    + "".join(f" | {name} net, mctx's search" for name in searched)
    + " |",
    "|---|" + "---|" * (len(names) + len(searched)),
  ]
  for seed in seeds:
    cells = [_cell(points[seed, name][-1]) if (seed, name) in points else "-" for name in names]
    same = [_cell(finals_same_search.get((seed, name))) for name in searched]
    lines.append(f"| {seed} | " + " | ".join(cells + same) + " |")
  lines += [
    "",
    "Cells: mean return, then the mean gap to the exact optimum (Knapsack, TSP) or the "
    "solved share (Sudoku, Rubik's cube).",
  ]
  return lines


def _cell(summary: dict | None) -> str:
  if summary is None:
    return "-"
  if summary.get("mean_gap") is not None and summary.get("solved") is None:
    return f"{summary['mean_return']:.3f} (gap {100 * summary['mean_gap']:.2f}%)"
  return f"{summary['mean_return']:.3f} (solved {100 * (summary['solved'] or 0):.1f}%)"


def run(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--env", default="Knapsack-v1")
  parser.add_argument("--seeds", default="0,1,2")
  parser.add_argument("--pipelines", default="mcgs,mctx,a2c")
  parser.add_argument("--budget", type=float, default=360.0)
  parser.add_argument("--fractions", default="0.25,0.5,0.75")
  parser.add_argument("--games", type=int, default=64)
  parser.add_argument("--simulations", type=int, default=32)
  parser.add_argument("--train-steps", type=int, default=100)
  parser.add_argument("--instances", type=int, default=128)
  parser.add_argument("--eval-seed", type=int, default=5000)
  parser.add_argument("--eval-simulations", type=int, default=32)
  parser.add_argument("--out-dir", default="planning_race")
  parser.add_argument("--plot")
  parser.add_argument(
    "--reuse",
    action="store_true",
    help="keep the runs already recorded under --out-dir (an interrupted race goes on)",
  )
  args = parser.parse_args(argv)
  names = [name for name in args.pipelines.split(",") if name]
  if set(names) - set(PIPELINES):
    parser.error(
      f"--pipelines: unknown {sorted(set(names) - set(PIPELINES))}; known {list(PIPELINES)}"
    )
  seeds = [int(seed) for seed in args.seeds.split(",")]
  records = {(seed, name): run_pipeline(name, seed, args) for seed in seeds for name in names}
  points = curves(records, args)
  finals_same_search = {}
  for (seed, name), record in records.items():
    if name != "a2c":
      finals_same_search[seed, name] = measure(record["snapshots"][-1]["file"], "mctx", args)
  with open(
    os.path.join(args.out_dir, f"{args.env}_results.json"), "w", encoding="utf-8"
  ) as handle:
    json.dump(
      dict(
        points={f"{s}|{n}": p for (s, n), p in points.items()},
        same_search={f"{s}|{n}": p for (s, n), p in finals_same_search.items()},
        records={f"{s}|{n}": r for (s, n), r in records.items()},
        args=vars(args),
      ),
      handle,
      indent=1,
    )
  if args.plot:
    plot(points, args.plot, args.env)
  return suite.section(section(points, finals_same_search, records, args))
