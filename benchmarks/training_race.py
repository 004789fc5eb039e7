"""Training race at equal wall time: AlphaZero with mctx's search, a tree kept between
moves, and a graph kept between moves, then the three networks compared.

Variants (`mcgs-jax train`, the same network size, seeds, self-play games and
simulations per move; only the search differs):

  * `mctx`: `--engine mctx`, DeepMind's `mctx.muzero_policy`: a tree searched from
    scratch at every move (what an mctx user trains with);
  * `tree+reuse`: this library, a tree kept between moves (`--tree`), the policy
    target counting every root visit, the carried ones included
    (`--policy-target all`);
  * `graph+reuse`: a graph kept between moves, `--policy-target all`;
  * `graph+reuse+new`: `mcgs-jax train`'s defaults, a graph kept between moves and
    the policy target of each search's own visits (`--policy-target new`);
  * on those defaults, `playout-cap`, `forced-playouts` and `solver` (KataGo's
    self-play accelerations and the MCTS-solver), and `gumbel+reuse`, `gumbel` and
    `mctx-gumbel` (Gumbel MuZero with and without reuse, and mctx's): run them with
    `--variants`.

Each variant runs in its own process, one after the other, with the wall-time budget
`--budget` seconds (`Config.max_seconds`: compilation included; no iteration starts
that would end past it) and no evaluation during training. Then:

  * head-to-head: every pair of final networks plays `--games` arena games with the
    same search on both sides (muzero on a tree searched from scratch, which is
    mctx's search, `--eval-simulations` per move, greedy, 3-ply random openings with
    both colours), Elo with 95% intervals;
  * solved positions: `--positions` connect-four positions with 10-14 empty cells
    from random play (seed `--positions-seed`, not the seed of
    `endgame_accuracy.py`), solved exactly; the share of positions where the greedy
    network (argmax of its policy over legal moves) and a 64-simulation search with
    it (the same tree search) play an optimal move.

Run it alone on the machine. `--write` appends the section to `benchmarks/RESULTS.md`.

    python benchmarks/training_race.py [--budget 720] [--out race] [--write]
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import mcgs_jax as mg
from mcgs_jax.apps import arena, train

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import endgame_accuracy  # noqa: E402  (sibling benchmark scripts)
import results_section  # noqa: E402

VARIANTS = {
  "mctx": ["--engine", "mctx"],
  "tree+reuse": ["--tree", "--policy-target", "all"],
  "graph+reuse": ["--policy-target", "all"],
  "graph+reuse+new": ["--policy-target", "new"],  # the defaults of mcgs-jax train
  # KataGo's self-play accelerations and the solver, each on the defaults:
  "playout-cap": ["--full-search-probability", "0.25", "--fast-simulations", "8"],
  "forced-playouts": ["--forced-playouts", "2"],
  "solver": ["--solver"],
  # Gumbel MuZero: this library's with reuse, without, and mctx's.
  "gumbel+reuse": ["--policy", "gumbel"],
  "gumbel": ["--policy", "gumbel", "--no-reuse"],
  "mctx-gumbel": ["--engine", "mctx", "--policy", "gumbel"],
}
DEFAULT_VARIANTS = ("mctx", "tree+reuse", "graph+reuse", "graph+reuse+new")
COMMON = [
  "--game",
  "connect_four",
  "--games",
  "256",
  "--simulations",
  "32",
  "--hidden",
  "256,256",
  "--buffer-size",
  "50000",
  "--train-steps",
  "200",
  "--eval-games",
  "0",
  "--iterations",
  "10000",
  "--seed",
  "0",
]


def run_variant(name: str, budget: float, out: str) -> dict:
  """Trains one variant in a fresh process; returns its history file's content."""
  history = os.path.join(out, f"{name}_history.json")
  params = os.path.join(out, f"{name}.msgpack")
  command = [sys.executable, "-m", "mcgs_jax.apps.train", *COMMON, *VARIANTS[name]]
  command += ["--max-seconds", str(budget), "--history", history, "--save-params", params]
  print(" ".join(command), flush=True)
  started = time.perf_counter()
  subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
  seconds = time.perf_counter() - started
  with open(history, encoding="utf-8") as handle:
    payload = json.load(handle)
  payload["process_seconds"] = seconds
  payload["params"] = params
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
    network_game = arena._agent_game(game, tree_agent(apply_fn, simulations, name))

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


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--budget", type=float, default=720.0, help="seconds per variant")
  parser.add_argument("--out", default="race", help="folder for histories and networks")
  parser.add_argument(
    "--variants",
    default=",".join(DEFAULT_VARIANTS),
    help=f"comma-separated, of {tuple(VARIANTS)} (default: %(default)s)",
  )
  parser.add_argument("--games", type=int, default=256)
  parser.add_argument("--eval-simulations", type=int, default=64)
  parser.add_argument("--positions", type=int, default=200)
  parser.add_argument("--positions-seed", type=int, default=2026)
  parser.add_argument("--seed", type=int, default=5)
  parser.add_argument(
    "--skip-training",
    action="store_true",
    help="reuse the runs already in --out (train only the variants without one)",
  )
  parser.add_argument("--write", action="store_true")
  args = parser.parse_args(argv)
  names = [name for name in args.variants.split(",") if name]
  unknown = sorted(set(names) - set(VARIANTS))
  if unknown:
    parser.error(f"unknown variants {unknown}; expected some of {tuple(VARIANTS)}")
  os.makedirs(args.out, exist_ok=True)
  load = os.getloadavg()
  runs = {}
  for name in names:
    if args.skip_training and os.path.exists(os.path.join(args.out, f"{name}_history.json")):
      with open(os.path.join(args.out, f"{name}_history.json"), encoding="utf-8") as handle:
        runs[name] = json.load(handle)
        runs[name]["params"] = os.path.join(args.out, f"{name}.msgpack")
        runs[name].setdefault("process_seconds", float("nan"))
    else:
      runs[name] = run_variant(name, args.budget, args.out)
    history = runs[name]["history"]
    print(name, len(history), "iterations", history[-1]["elapsed_s"], flush=True)

  game = arena._game_from_spec("connect_four")
  networks = {}
  for name in names:
    apply_fn, params, _ = train.load_network(runs[name]["params"], game.env)
    networks[name] = (apply_fn, params)

  lines = [
    f"## Training race at equal wall time (`benchmarks/training_race.py`, date "
    f"{datetime.date.today().isoformat()}, {os.cpu_count()}-core CPU "
    f"({platform.processor() or platform.machine()}), alone on the machine, load "
    f"average before {load[0]:.1f}, jax {jax.__version__})",
    "",
    f"`mcgs-jax train {' '.join(COMMON)}` plus each variant's flags, {args.budget:.0f} s "
    "of wall time each (compilation included), one process after the other. Regenerate: "
    f"`python benchmarks/training_race.py --budget {args.budget:.0f} --write`.",
    "",
    "| variant | flags | iterations | positions | self-play s | train s | compile s "
    "| wall s | final loss (policy + value) | carried root visits / move |",
    "|---|---|---|---|---|---|---|---|---|---|",
  ]
  for name in names:
    history = runs[name]["history"]
    last = history[-1]
    lines.append(
      f"| {name} | `{' '.join(VARIANTS[name]) or '(defaults)'}` | {len(history)} | "
      f"{sum(e['positions'] for e in history)} | "
      f"{sum(e['selfplay_s'] for e in history):.0f} | "
      f"{sum(e['train_s'] for e in history):.0f} | {history[0].get('compile_s', 0):.0f} | "
      f"{last['elapsed_s']:.0f} | {last['loss']:.3f} ({last['policy_loss']:.3f} + "
      f"{last['value_loss']:.3f}) | "
      f"{np.mean([e.get('carried_visits', 0.0) for e in history]):.1f} |"
    )
  lines += [
    "",
    f"Head-to-head, {args.games} games per pair, both networks searching with muzero on a "
    f"tree from scratch (mctx's search), {args.eval_simulations} simulations, greedy, "
    f"3-ply random openings, seed {args.seed}:",
    "",
    "| A | B | A's W-D-L | score | Elo of A over B [95%] |",
    "|---|---|---|---|---|",
  ]
  pairs = [(a, b) for i, a in enumerate(names) for b in names[:i]][::-1]
  for a_name, b_name in pairs:
    result = arena.play_match(
      game,
      tree_agent(networks[a_name][0], args.eval_simulations, a_name),
      tree_agent(networks[b_name][0], args.eval_simulations, b_name),
      num_games=args.games,
      seed=args.seed,
      params_a=networks[a_name][1],
      params_b=networks[b_name][1],
      opening_moves=3,
    )
    low, high = result.elo_ci95
    lines.append(
      f"| {a_name} | {b_name} | {result.wins}-{result.draws}-{result.losses} | "
      f"{result.score:.3f} | {result.elo:+.0f} [{low:+.0f}, {high:+.0f}] |"
    )
    print(lines[-1], flush=True)
  started = time.perf_counter()
  positions = endgame_accuracy.random_positions(args.positions, seed=args.positions_seed)
  solve_seconds = time.perf_counter() - started
  shares = solved_accuracy(game, networks, positions, args.eval_simulations, args.seed)
  lines += [
    "",
    f"Solved positions: {args.positions} quiet connect-four positions with 10-14 empty "
    f"cells (seed {args.positions_seed}, solved in {solve_seconds:.0f} s), share where "
    "the move is optimal:",
    "",
    f"| network | greedy policy | {args.eval_simulations}-simulation tree search |",
    "|---|---|---|",
  ]
  for name in names:
    greedy, searched = shares[name]
    lines.append(f"| {name} | {100 * greedy:.1f}% | {100 * searched:.1f}% |")
  results_section.emit(lines, write=args.write)


if __name__ == "__main__":
  main()
