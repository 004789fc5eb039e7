"""Training race at equal wall time: AlphaZero trained with mctx's search against this
library's defaults and self-play options, over several training seeds, with learning
curves.

Variants (`mcgs-jax train`, the same network size, self-play games and simulations per
move; only the search differs):

  * `mctx`: `--engine mctx`, DeepMind's `mctx.muzero_policy`: a tree searched from
    scratch at every move (what an mctx user trains with);
  * `default`: `mcgs-jax train`'s defaults (a graph kept between moves, the policy
    target of each search's own visits, forced playouts with k = 2);
  * `tree+reuse`, `graph+reuse` (`--policy-target all`) and `graph+reuse+new` (the
    defaults before forced playouts): the variants of the first race, without forced
    playouts;
  * `playout-cap` and `solver` on `graph+reuse+new`, `forced-playouts` (the defaults,
    spelt out), `default+playout-cap` (the defaults with playout cap randomization):
    KataGo's self-play accelerations and the MCTS-solver; and
    `gumbel+reuse`, `gumbel` and `mctx-gumbel` (Gumbel MuZero with and without reuse,
    and mctx's).

For every seed in `--seeds`, each variant trains in its own process, one after the
other, for `--budget` seconds of wall time (`Config.max_seconds`: compilation
included; no iteration starts that would end past it), with no evaluation during
training. Each run saves its network (params only) after the first iteration that ends
past each fraction in `--fractions` of the budget, and at the end. Then:

  * learning curves: every saved network of a seed plays that seed's final `mctx`
    network (the reference, Elo 0) for `--games` arena games, both searching the
    same way (muzero on a tree from scratch, which is mctx's search,
    `--eval-simulations` per move, greedy, 3-ply random openings with both colours,
    seed `--eval-seed`, which no training run uses); Elo with 95% intervals against
    the wall time at which the network was saved;
  * per seed, the final Elo of each variant and the time it took to reach the
    reference's strength (the first saved network at Elo >= 0);
  * `--plot FILE`: the curves as a PNG;
  * solved positions: `--positions` connect-four positions with 10-14 empty cells
    (seed `--positions-seed`), solved exactly; the share where each final network's
    greedy policy and a search with it play an optimal move;
  * `--head-to-head A,B`: per seed, A's final network against B's (the curves' match
    settings on match seed `--eval-seed` + 1), and the games of all seeds pooled.

Run it alone on the machine. `--keep` copies the final networks to
`benchmarks/checkpoints/race_<variant>_seed<k>.msgpack`.

    python -m benchmarks training --part training_race --seeds 0,1,2 --variants mctx,default \
        --budget 600 --out-dir race --plot benchmarks/race_curves.png --keep
"""

import argparse
import dataclasses
import datetime
import json
import os
import platform
import subprocess
import time

import jax
import jax.numpy as jnp
import numpy as np

import mcgs_jax as mg
from benchmarks import endgame_accuracy, record
from mcgs_jax.apps import arena, files, train
from mcgs_jax.apps.arena import results as arena_results

NO_FORCED = ["--forced-playouts", "0"]
VARIANTS = {
  "mctx": ["--engine", "mctx"],
  "default": [],  # mcgs-jax train's defaults (forced playouts since 2026-12-03)
  "tree+reuse": ["--tree", "--policy-target", "all", *NO_FORCED],
  "graph+reuse": ["--policy-target", "all", *NO_FORCED],
  "graph+reuse+new": ["--policy-target", "new", *NO_FORCED],  # the defaults before
  # KataGo's self-play accelerations and the solver, each on the defaults of their
  # races (before forced playouts were the default):
  "playout-cap": ["--full-search-probability", "0.25", "--fast-simulations", "8", *NO_FORCED],
  "forced-playouts": ["--forced-playouts", "2"],  # the defaults since, spelt out
  # KataGo's two accelerations together (forced playouts in the full searches only):
  "default+playout-cap": ["--full-search-probability", "0.25", "--fast-simulations", "8"],
  # The defaults with `reroot` keeping the capacity - S most visited nodes (no playout
  # finds the graph full).
  "default+make-room": ["--make-room"],
  # The defaults again: a run in the same session as a variant trained later, since
  # one session's machine is not another's.
  "default-rerun": [],
  "solver": ["--solver", *NO_FORCED],
  # Gumbel MuZero: this library's with reuse, without, and mctx's.
  "gumbel+reuse": ["--policy", "gumbel"],
  "gumbel": ["--policy", "gumbel", "--no-reuse"],
  "mctx-gumbel": ["--engine", "mctx", "--policy", "gumbel"],
  # The ablation of the defaults: a tree instead of the graph, and no reuse.
  "default-tree": ["--tree"],
  "default-no-reuse": ["--no-reuse"],
}
DEFAULT_VARIANTS = ("mctx", "default")
REFERENCE = "mctx"  # by default each seed's final mctx network is its curves' Elo 0


def common_flags(args) -> list[str]:
  """The `mcgs-jax train` flags every variant shares: game, network, self-play games
  and simulations, training steps, no evaluation, no iteration limit (the budget
  stops a run)."""
  network = ["--network", args.network] if args.network else ["--hidden", "256,256"]
  return [
    *("--game", args.game, "--games", str(args.selfplay_games)),
    *("--simulations", str(args.simulations), *network),
    *("--buffer-size", "50000", "--train-steps", str(args.train_steps)),
    *("--eval-games", "0", "--iterations", "10000"),
  ]


def file_name(variant: str) -> str:
  """`graph+reuse` -> `graph_reuse` (a name for files)."""
  return variant.replace("+", "_").replace("-", "_")


def run_folder(out: str, seed: int) -> str:
  return os.path.join(out, f"seed{seed}")


def train_with_snapshots(argv: list[str], budget: float, fractions, prefix: str) -> None:
  """The worker process: `mcgs-jax train argv` that also saves the network (params
  only) to `{prefix}_snapshot{i}.msgpack` after the first iteration ending past each
  `fractions[i] * budget` seconds, `{prefix}.msgpack` at the end, and the history
  (with a `snapshots` list: `{"file", "elapsed_s", "iteration"}`) to
  `{prefix}_history.json`."""
  args = train.build_parser().parse_args([*argv, "--max-seconds", str(budget)])
  config = train.config_from_args(args)
  marks = sorted(float(f) * budget for f in fractions)
  load_before = os.getloadavg()[0]
  snapshots: list[dict] = []

  def on_iteration(history):
    entry = history[-1]
    if len(snapshots) < len(marks) and entry["elapsed_s"] >= marks[len(snapshots)]:
      path = f"{prefix}_snapshot{len(snapshots)}.msgpack"
      train.save_checkpoint(path, history.params, None, entry["iteration"])
      snapshots.append(dict(file=path, elapsed_s=entry["elapsed_s"], iteration=entry["iteration"]))

  history = train.train(config, on_iteration=on_iteration)
  last = history[-1]
  train.save_checkpoint(f"{prefix}.msgpack", history.params, None, last["iteration"])
  snapshots.append(
    dict(file=f"{prefix}.msgpack", elapsed_s=last["elapsed_s"], iteration=last["iteration"])
  )
  payload = dict(
    config=dataclasses.asdict(config),
    history=list(history),
    snapshots=snapshots,
    load_before=load_before,
  )
  files.write_atomically(f"{prefix}_history.json", json.dumps(payload, indent=1))


def run_variant(name: str, seed: int, fractions, args) -> dict:
  """Trains one variant with one seed in a fresh process for `args.budget` seconds;
  returns its history file's content (with `process_seconds`)."""
  budget, out = args.budget, args.out_dir
  folder = run_folder(out, seed)
  os.makedirs(folder, exist_ok=True)
  prefix = os.path.join(folder, file_name(name))
  argv = [*common_flags(args), "--seed", str(seed), *VARIANTS[name]]
  command = record.module_command("training_race", ["--worker", json.dumps(argv)])
  command += ["--budget", str(budget), "--fractions", ",".join(map(str, fractions))]
  command += ["--out-dir", prefix]
  print(f"[{time.strftime('%H:%M:%S')}] seed {seed} {name}: {' '.join(argv)}", flush=True)
  started = time.perf_counter()
  subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
  payload = read_run(out, seed, name)
  payload["process_seconds"] = time.perf_counter() - started
  return payload


def read_run(out: str, seed: int, name: str) -> dict:
  path = os.path.join(run_folder(out, seed), f"{file_name(name)}_history.json")
  with open(path, encoding="utf-8") as handle:
    payload = json.load(handle)
  payload.setdefault("process_seconds", float("nan"))
  return payload


def tree_agent(apply_fn, simulations: int, name: str) -> arena.Agent:
  return arena.Agent(
    policy="muzero",
    evaluator="network",
    num_simulations=simulations,
    transpositions=False,
    reuse=False,
    solver=False,  # mctx's search: a tree from scratch, nothing proven
    apply_fn=apply_fn,
    name=name,
  )


def solved_accuracy(game, networks: dict, positions, simulations: int, seed: int) -> dict:
  """`{name: (greedy share, search share)}` of optimal moves on `positions`."""
  state = endgame_accuracy.batch_states(game, [moves for moves, _ in positions])
  optimal = [{a for a, v in values.items() if v == max(values.values())} for _, values in positions]
  shares = {}
  for name, (apply_fn, params) in networks.items():
    logits, _ = apply_fn(params, state.observation)
    greedy = np.asarray(jnp.argmax(jnp.where(state.legal_action_mask, logits, -jnp.inf), -1))
    network_game = arena.agent_game(game, tree_agent(apply_fn, simulations, name))

    @jax.jit
    def search(params, key, state, network_game=network_game):
      root = network_game.root(params, key, state)
      return mg.muzero_policy(
        params,
        key,
        root,
        network_game.recurrent_fn,
        simulations,
        invalid_actions=network_game.invalid_actions(state),
        dirichlet_fraction=0.0,
        temperature=0.0,
        transpositions=False,
      ).action

    searched = np.asarray(search(params, jax.random.PRNGKey(seed), state))
    shares[name] = tuple(
      float(np.mean([int(a) in o for a, o in zip(actions, optimal)]))
      for actions in (greedy, searched)
    )
  return shares


def play_reference(game, snapshot: str, reference: str, args, openings: int = 3) -> dict:
  """One learning-curve point: the network in `snapshot` against `reference`
  (`args.games` games from `openings`-ply random openings, match seed
  `args.eval_seed`)."""
  a_fn, a_params, _ = train.load_network(snapshot, game.env)
  b_fn, b_params, _ = train.load_network(reference, game.env)
  result = arena.play_match(
    game,
    tree_agent(a_fn, args.eval_simulations, "A"),
    tree_agent(b_fn, args.eval_simulations, "B"),
    num_games=args.games,
    seed=args.eval_seed,
    params_a=a_params,
    params_b=b_params,
    opening_moves=openings,
  )
  return match_record(result)


def match_record(result) -> dict:
  """A match's W-D-L and Elo with its 95% interval, as plain numbers for JSON."""
  return dict(
    wins=int(result.wins),
    draws=int(result.draws),
    losses=int(result.losses),
    elo=float(result.elo),
    elo_ci95=[float(x) for x in result.elo_ci95],
  )


def learning_curves(game, runs: dict, args) -> dict:
  """`{(seed, variant): [point, ...]}`, a point per saved network: `elapsed_s`,
  `iteration` and the match against the seed's final reference network. Matches
  already in `{out}/curves.json` (same games, simulations and seed) are not replayed."""
  cache_path = os.path.join(args.out_dir, "curves.json")
  cache = {}
  if os.path.exists(cache_path):
    with open(cache_path, encoding="utf-8") as handle:
      cache = json.load(handle)
  curves = {}
  for (seed, name), run in runs.items():
    reference = run_reference(runs, seed, args.reference)
    points = []
    for snapshot in run["snapshots"]:
      point = dict(elapsed_s=snapshot["elapsed_s"], iteration=snapshot["iteration"])
      if snapshot["file"] == reference:
        point.update(wins=0, draws=0, losses=0, elo=0.0, elo_ci95=[0.0, 0.0])
      else:
        key = "|".join(
          map(str, (snapshot["file"], reference, args.games, args.eval_simulations, args.eval_seed))
        )
        if key not in cache:
          cache[key] = play_reference(game, snapshot["file"], reference, args)
          files.write_atomically(cache_path, json.dumps(cache, indent=1))
          low, high = cache[key]["elo_ci95"]
          print(
            f"seed {seed} {name} at {snapshot['elapsed_s']:.0f} s: "
            f"{cache[key]['elo']:+.0f} [{low:+.0f}, {high:+.0f}]",
            flush=True,
          )
        point.update(cache[key])
      points.append(point)
    curves[seed, name] = points
  return curves


def head_to_head(game, runs: dict, seeds: list[int], pair: list[str], args) -> list[str]:
  """RESULTS lines: the final network of `pair[0]` against that of `pair[1]`, per seed
  with both runs and pooled over them (`args.games` games each, the curves' match
  settings on the next match seed, `args.eval_seed + 1`)."""
  first, second = pair
  settings = argparse.Namespace(**{**vars(args), "eval_seed": args.eval_seed + 1})
  lines = [
    "",
    f"Head to head: {first}'s final network against {second}'s, the same seed "
    f"({args.games} games each, match seed {settings.eval_seed}, otherwise as the curves):",
    "",
    f"| seed | {first}'s W-D-L | score | Elo of {first} over {second} [95%] |",
    "|---|---|---|---|",
  ]
  points = []
  for seed in seeds:
    if (seed, first) not in runs or (seed, second) not in runs:
      continue
    result = play_reference(
      game,
      final_network(runs[seed, first]),
      final_network(runs[seed, second]),
      settings,
    )
    wins, draws, losses = result["wins"], result["draws"], result["losses"]
    points += [1.0] * wins + [0.5] * draws + [0.0] * losses
    low, high = result["elo_ci95"]
    lines.append(
      f"| {seed} | {wins}-{draws}-{losses} | {(wins + draws / 2) / (wins + draws + losses):.3f} "
      f"| {result['elo']:+.0f} [{low:+.0f}, {high:+.0f}] |"
    )
    print(lines[-1], flush=True)
  if points:
    score, elo, (low, high), _ = arena_results.elo_interval(np.array(points))
    lines.append(f"| pooled | - | {score:.3f} | {elo:+.0f} [{low:+.0f}, {high:+.0f}] |")
  return lines


def final_network(run: dict) -> str:
  """The file of the network `run` saved last."""
  return run["snapshots"][-1]["file"]


def run_reference(runs: dict, seed: int, reference: str) -> str:
  return final_network(runs[seed, reference])


def replay(game, runs: dict, seeds: list[int], names: list[str], args) -> list[str]:
  """RESULTS lines: each variant's final network against the same seed's final
  reference network on openings the curves never played (`args.replay_games` games,
  `args.replay_openings`-ply random openings, match seed `args.replay_seed`)."""
  settings = argparse.Namespace(
    **{**vars(args), "games": args.replay_games, "eval_seed": args.replay_seed}
  )
  lines = [
    "",
    f"Replay on new openings: each final network against the same seed's final "
    f"{args.reference} network, {args.replay_games} games from "
    f"{args.replay_openings}-ply random openings (match seed {args.replay_seed}), "
    "otherwise as the curves:",
    "",
    f"| variant | Elo over {args.reference} per seed [95%] | W-D-L per seed | pooled Elo [95%] |",
    "|---|---|---|---|",
  ]
  replayed = args.replay_variants.split(",") if args.replay_variants else names
  for name in names:
    if name == args.reference or name not in replayed:
      continue
    cells, tallies, points = [], [], []
    for seed in seeds:
      if (seed, name) not in runs:
        continue
      result = play_reference(
        game,
        final_network(runs[seed, name]),
        run_reference(runs, seed, args.reference),
        settings,
        openings=args.replay_openings,
      )
      wins, draws, losses = result["wins"], result["draws"], result["losses"]
      points += [1.0] * wins + [0.5] * draws + [0.0] * losses
      low, high = result["elo_ci95"]
      cells.append(f"{result['elo']:+.0f} [{low:+.0f}, {high:+.0f}]")
      tallies.append(f"{wins}-{draws}-{losses}")
      print(f"replay seed {seed} {name}: {cells[-1]}", flush=True)
    if points:
      _, elo, (low, high), _ = arena_results.elo_interval(np.array(points))
      pooled = f"{elo:+.0f} [{low:+.0f}, {high:+.0f}]"
      lines.append(f"| {name} | {'; '.join(cells)} | {'; '.join(tallies)} | {pooled} |")
  return lines


def time_to_reference(points: list[dict]) -> float | None:
  """Wall time of the first saved network at least as strong as the reference (Elo
  >= 0); None when none is."""
  return next((p["elapsed_s"] for p in points if p["elo"] >= 0.0), None)


def plot_curves(curves: dict, path: str, title: str, reference: str = REFERENCE) -> None:
  """Elo against the reference by wall time, a colour per variant, a marker per seed."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  figure, axis = plt.subplots(figsize=(8, 5))
  names = list(dict.fromkeys(name for _, name in curves))
  seeds = sorted({seed for seed, _ in curves})
  colours = {name: f"C{i}" for i, name in enumerate(names)}
  markers = "osD^v<>"
  for (seed, name), points in curves.items():
    minutes = [p["elapsed_s"] / 60 for p in points]
    elos = [p["elo"] for p in points]
    errors = np.array(
      [[p["elo"] - p["elo_ci95"][0], p["elo_ci95"][1] - p["elo"]] for p in points]
    ).T
    axis.errorbar(
      minutes,
      elos,
      yerr=errors,
      color=colours[name],
      marker=markers[seeds.index(seed) % len(markers)],
      capsize=2,
      alpha=0.8,
      label=f"{name}, seed {seed}",
    )
  axis.axhline(0.0, color="grey", linewidth=0.8)
  axis.set_xlabel("wall time of training (minutes, compilation included)")
  axis.set_ylabel(f"Elo against the seed's final {reference} network")
  axis.set_title(title)
  axis.legend(fontsize=7, ncol=2)
  figure.tight_layout()
  files.save_figure(figure, path)
  plt.close(figure)


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--budget", type=float, default=600.0, help="seconds per run")
  parser.add_argument("--seeds", default="0,1,2", help="training seeds (default: %(default)s)")
  parser.add_argument(
    "--fractions",
    default="0.2,0.4,0.6,0.8",
    help="fractions of the budget after which a run saves its network (and at the end)",
  )
  parser.add_argument("--out-dir", default="race", help="folder for histories and networks")
  parser.add_argument(
    "--variants",
    default=",".join(DEFAULT_VARIANTS),
    help=f"comma-separated, of {tuple(VARIANTS)} (default: %(default)s; "
    "--reference is always trained)",
  )
  parser.add_argument(
    "--reference",
    default=REFERENCE,
    choices=tuple(VARIANTS),
    help="the variant whose final network is each seed's Elo 0 (default: %(default)s)",
  )
  parser.add_argument("--game", default="connect_four", help="pgx game id (default: %(default)s)")
  parser.add_argument(
    "--network",
    help="mcgs-jax train --network of every variant (default: an MLP of 256 and 256 units)",
  )
  parser.add_argument(
    "--selfplay-games", type=int, default=256, help="self-play games per iteration"
  )
  parser.add_argument("--simulations", type=int, default=32, help="self-play simulations per move")
  parser.add_argument("--train-steps", type=int, default=200, help="training steps per iteration")
  parser.add_argument(
    "--replay-games", type=int, default=0, help="games of the replay on new openings (0: none)"
  )
  parser.add_argument(
    "--replay-variants", help="comma-separated variants to replay (default: every one)"
  )
  parser.add_argument("--replay-openings", type=int, default=4)
  parser.add_argument("--replay-seed", type=int, default=1013)
  parser.add_argument("--games", type=int, default=512, help="games per curve point")
  parser.add_argument("--eval-simulations", type=int, default=64)
  parser.add_argument("--eval-seed", type=int, default=5)
  parser.add_argument("--positions", type=int, default=200)
  parser.add_argument("--positions-seed", type=int, default=2026)
  parser.add_argument(
    "--skip-training",
    action="store_true",
    help="reuse the runs already in --out-dir (train only the runs without one)",
  )
  parser.add_argument("--plot", help="save the learning curves as a PNG to this file")
  parser.add_argument(
    "--keep", action="store_true", help="copy the final networks to benchmarks/checkpoints"
  )
  parser.add_argument(
    "--evaluate-only",
    action="store_true",
    help="train nothing: evaluate the runs in --out-dir (a variant may have fewer seeds)",
  )
  parser.add_argument(
    "--train-only", action="store_true", help="train the runs, play no match (evaluate later)"
  )
  parser.add_argument(
    "--head-to-head",
    metavar="A,B",
    help="also play variant A's final network against variant B's, per seed",
  )
  parser.add_argument("--worker", help=argparse.SUPPRESS)  # the training process
  return parser


def run(argv=None):
  parser = build_parser()
  args = parser.parse_args(argv)
  fractions = [float(f) for f in args.fractions.split(",") if f]
  if not all(0.0 < f < 1.0 for f in fractions):
    parser.error(f"--fractions: each in (0, 1), got {args.fractions!r}")
  if args.worker:
    train_with_snapshots(json.loads(args.worker), args.budget, fractions, args.out_dir)
    return
  names = [name for name in args.variants.split(",") if name]
  unknown = sorted(set(names) - set(VARIANTS))
  if unknown:
    parser.error(f"--variants: unknown {unknown}; expected some of {tuple(VARIANTS)}")
  names = [args.reference] + [name for name in names if name != args.reference]
  pair = args.head_to_head.split(",") if args.head_to_head else []
  if pair and (len(pair) != 2 or not set(pair) <= set(names)):
    parser.error(f"--head-to-head: two of --variants {names}, got {args.head_to_head!r}")
  seeds = [int(seed) for seed in args.seeds.split(",") if seed]
  os.makedirs(args.out_dir, exist_ok=True)
  runs = {}
  for seed in seeds:
    for name in names:
      done = os.path.exists(
        os.path.join(run_folder(args.out_dir, seed), f"{file_name(name)}_history.json")
      )
      if (args.skip_training or args.evaluate_only) and done:
        runs[seed, name] = read_run(args.out_dir, seed, name)
        continue
      if args.evaluate_only:
        continue
      runs[seed, name] = run_variant(name, seed, fractions, args)
      history = runs[seed, name]["history"]
      print(f"  {len(history)} iterations, {history[-1]['elapsed_s']:.0f} s", flush=True)

  if args.train_only:
    return
  game = arena.two_player_game(args.game)
  curves = learning_curves(game, runs, args)
  extra = head_to_head(game, runs, seeds, pair, args) if pair else []
  if args.replay_games:
    extra += replay(game, runs, seeds, names, args)
  section = write_section(game, runs, curves, names, seeds, fractions, args, extra)
  if args.plot:
    plot_curves(
      curves,
      args.plot,
      f"{args.game}, {args.budget / 60:.0f} min per run, {os.cpu_count()}-core CPU "
      f"({args.games} games per point)",
      args.reference,
    )
  if args.keep:
    kept = os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkpoints")
    for (seed, name), run in runs.items():
      stem = os.path.join(kept, f"race_{file_name(name)}_seed{seed}")
      with open(final_network(run), "rb") as handle:
        files.write_atomically(f"{stem}.msgpack", handle.read())
      history = dict(config=run["config"], history=run["history"])
      files.write_atomically(f"{stem}_history.json", json.dumps(history, indent=1))
  return section


def write_section(game, runs, curves, names, seeds, fractions, args, extra=()) -> dict:
  """The RESULTS section: runs, curves, finals per seed, solved positions (connect
  four)."""
  REFERENCE = args.reference  # noqa: N806 (the name the tables are written with)
  load_text = ", ".join(f"{run.get('load_before', float('nan')):.1f}" for run in runs.values())
  lines = [
    f"## Training race on {args.game} over {len(seeds)} seeds with learning curves "
    f"(`benchmarks/training_race.py`, date {datetime.date.today().isoformat()}, "
    f"{os.cpu_count()}-core CPU ({platform.processor() or platform.machine()}), one run "
    f"at a time alone on the machine, jax {jax.__version__})",
    "",
    f"`mcgs-jax train {' '.join(common_flags(args))} --seed K` plus each variant's flags, "
    f"{args.budget:.0f} s of wall time per run (compilation included). Held equal: "
    "wall time, network, self-play games and simulations per move, training steps, "
    f"seeds. Networks saved after {', '.join(f'{f:g}' for f in fractions)} of the "
    f"budget and at the end; each plays the same seed's final `{REFERENCE}` network "
    f"{args.games} games ({args.eval_simulations}-simulation muzero on a tree from "
    f"scratch on both sides, greedy, 3-ply random openings, seed {args.eval_seed}). "
    f"1-minute load average before each run: {load_text}. Regenerate: "
    f"`python -m benchmarks training --part training_race --game {args.game} --seeds {args.seeds} "
    f"--variants {','.join(names)} --reference {args.reference} "
    f"--budget {args.budget:.0f} --games {args.games}` (and the flags above).",
    "",
    "| seed | variant | iterations | positions | self-play s | wall s | final Elo "
    f"against {REFERENCE} [95%] | final W-D-L | first at >= {REFERENCE}'s final "
    "strength |",
    "|---|---|---|---|---|---|---|---|---|",
  ]
  for seed in seeds:
    reference_s = runs[seed, REFERENCE]["history"][-1]["elapsed_s"]
    for name in names:
      if (seed, name) not in runs:  # --evaluate-only: a variant run with fewer seeds
        continue
      history, points = runs[seed, name]["history"], curves[seed, name]
      final = points[-1]
      reached = time_to_reference(points)
      reached_text = (
        "not reached"
        if reached is None
        else f"{reached:.0f} s ({reached / reference_s:.2f} of {REFERENCE}'s time)"
      )
      lines.append(
        f"| {seed} | {name} | {len(history)} | {sum(e['positions'] for e in history)} | "
        f"{sum(e['selfplay_s'] for e in history):.0f} | {history[-1]['elapsed_s']:.0f} | "
        f"{final['elo']:+.0f} [{final['elo_ci95'][0]:+.0f}, {final['elo_ci95'][1]:+.0f}] | "
        f"{final['wins']}-{final['draws']}-{final['losses']} | {reached_text} |"
      )
  lines += [
    "",
    "Per variant over its seeds:",
    "",
    f"| variant | seeds | final Elo against {REFERENCE}, per seed | lowest | "
    f"time to {REFERENCE}'s final strength / {REFERENCE}'s time, per seed |",
    "|---|---|---|---|---|",
  ]
  for name in names:
    ran = [seed for seed in seeds if (seed, name) in runs]
    finals = [curves[seed, name][-1]["elo"] for seed in ran]
    fractions_of_time = []
    for seed in ran:
      reached = time_to_reference(curves[seed, name])
      reference_s = runs[seed, REFERENCE]["history"][-1]["elapsed_s"]
      fractions_of_time.append("-" if reached is None else f"{reached / reference_s:.2f}")
    lines.append(
      f"| {name} | {len(ran)} | {', '.join(f'{e:+.0f}' for e in finals)} | "
      f"{min(finals):+.0f} | {', '.join(fractions_of_time)} |"
    )
  lines += [
    "",
    f"Learning curves (Elo against the seed's final {REFERENCE} network, at the wall "
    "time each network was saved):",
    "",
    "| seed | variant | " + " | ".join(f"point {i + 1}" for i in range(len(fractions) + 1)) + " |",
    "|---|---|" + "---|" * (len(fractions) + 1),
  ]
  for (seed, name), points in curves.items():
    cells = [
      f"{p['elapsed_s']:.0f} s: {p['elo']:+.0f} [{p['elo_ci95'][0]:+.0f}, {p['elo_ci95'][1]:+.0f}]"
      for p in points
    ]
    lines.append(f"| {seed} | {name} | " + " | ".join(cells) + " |")
  if args.game != "connect_four":
    return record.section(lines + list(extra))
  positions = endgame_accuracy.random_positions(args.positions, seed=args.positions_seed)
  finals = {}
  for (seed, name), run in runs.items():
    apply_fn, params, _ = train.load_network(final_network(run), game.env)
    finals[f"{name}, seed {seed}"] = (apply_fn, params)
  shares = solved_accuracy(game, finals, positions, args.eval_simulations, args.eval_seed)
  lines += [
    "",
    f"Solved positions: {args.positions} quiet connect-four positions with 10-14 empty "
    f"cells (seed {args.positions_seed}), share where the final network's move is optimal:",
    "",
    f"| network | greedy policy | {args.eval_simulations}-simulation tree search |",
    "|---|---|---|",
  ]
  for label, (greedy, searched) in shares.items():
    lines.append(f"| {label} | {100 * greedy:.1f}% | {100 * searched:.1f}% |")
  return record.section(lines + list(extra))
