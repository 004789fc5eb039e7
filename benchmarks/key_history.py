"""Transposition hits and nodes per simulation, by history mode of the key (issue 47).

For each game, position depth (plies into the game) and simulation count S, one
batch of B searches from B positions is run with each history mode of the key
(`mcgs_jax.games.keys.HISTORY_MODES`: exact, bounded, position) as a graph, and once
as a tree (`transpositions=False`, which finds no transposition whatever the key).
Reported per search (mean over the batch), divided by S: transposition hits and
nodes in use.

* Search: `muzero_policy` as the arena plays it (`registry.playing_policy`: no root
  noise, most visited move), capacity S + 1, chess with compact edges (96 slots, as
  the commands choose), the other games dense.
* Prior and value (the same for every key and mode): connect four, the network
  shipped with the package (`mcgs_jax/apps/checkpoints/connect_four.msgpack`); the
  other games, a fixed random-weight network, `init_network(env, PRNGKey(0))` (an
  MLP of 64 and 64 units): not trained, but a fixed, peaked prior that a search
  follows, as a trained one would, rather than the uniform prior's breadth.
* Positions: B games from the start, each move sampled from that network's prior
  (softmax of its logits over the legal moves; seeded), to `--plies` plies; a game
  that ends before is replaced by the next seed's.
* Games without history rules (hex, othello, connect four) have one key in every
  mode; they are searched once and their row stands for all three.

Usage:
  python -m benchmarks transpositions --part key_history
      [--games chess,go_9x9,hex,othello,connect_four]
      [--simulations 256,800] [--plies 10,30] [--batch 8] [--repeats 3]
"""

import argparse
import dataclasses
import datetime
import os
import platform
import subprocess
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import record
from mcgs_jax.apps import registry
from mcgs_jax.games import adapter, evaluators, keys, networks

GAMES = ("chess", "go_9x9", "hex", "othello", "connect_four")
HISTORY_GAMES = {"chess", "go_9x9", "go_19x19", "gardner_chess", "animal_shogi", "shogi"}
SHIPPED = {"connect_four": ("mcgs_jax", "apps", "checkpoints", "connect_four.msgpack")}
MAX_CHILDREN = {"chess": 96}


def network(game_id: str, env):
  """`(apply_fn, params, description)`: the shipped network, else a fixed random one."""
  if game_id in SHIPPED:
    from mcgs_jax.apps.train import checkpoint_files  # noqa: PLC0415

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    apply_fn, params, _ = checkpoint_files.load_network(os.path.join(root, *SHIPPED[game_id]), env)
    return apply_fn, params, "shipped network"
  apply_fn, params = networks.init_network(env, jax.random.PRNGKey(0))
  return apply_fn, params, "random-weight network (seed 0)"


def positions(game: adapter.Game, params, plies: int, batch: int, seed: int):
  """`batch` states `plies` into games whose moves are sampled from the prior."""
  step = jax.jit(game.step)
  root = jax.jit(game.root)
  found: list = []
  attempt = 0
  while len(found) < batch:
    key = jax.random.PRNGKey(seed * 1000 + attempt)
    attempt += 1
    state = game.init(key, batch)
    for ply in range(plies):
      logits = root(params, jax.random.fold_in(key, 2 * ply), state).prior_logits
      action = jax.random.categorical(jax.random.fold_in(key, 2 * ply + 1), logits)
      state = step(state, action)
    live = np.flatnonzero(~np.asarray(evaluators.is_finished(state)))
    found += [jax.tree.map(lambda leaf, i=i: leaf[i], state) for i in live]
    if attempt > 50:
      raise RuntimeError(f"fewer than {batch} games last {plies} plies")
  return jax.tree.map(lambda *leaves: jnp.stack(leaves), *found[:batch])


def searcher(game: adapter.Game, simulations: int, transpositions: bool, max_children):
  """`search(params, key, state) -> (nodes [B], hits [B])`, jitted."""
  policy = registry.playing_policy(
    "muzero", transpositions=transpositions, max_children=max_children
  )

  def search(params, key, state):
    out = adapter.search_game(policy, game, state, simulations, key, params=params)
    graph = out.search_graph
    return graph.num_nodes, graph.transposition_hits

  return jax.jit(search)


def measure(game_id: str, args) -> list[dict]:
  """The rows of one game: every plies x S x (modes, tree)."""
  modes = keys.HISTORY_MODES if game_id in HISTORY_GAMES else ("any",)
  games = {
    mode: adapter.make_game(game_id, history="exact" if mode == "any" else mode) for mode in modes
  }
  env = next(iter(games.values())).env
  apply_fn, params, prior = network(game_id, env)
  evaluator = evaluators.network_evaluator(apply_fn)
  games = {mode: dataclasses.replace(g, evaluator=evaluator) for mode, g in games.items()}
  rows = []
  for plies in args.plies:
    state = positions(next(iter(games.values())), params, plies, args.batch, args.seed)
    for simulations in args.simulations:
      variants = [(mode, True) for mode in modes] + [("tree", False)]
      for mode, transpositions in variants:
        game = games[modes[0] if mode == "tree" else mode]
        search = searcher(game, simulations, transpositions, MAX_CHILDREN.get(game_id))
        key = jax.random.PRNGKey(args.seed)
        start = time.perf_counter()
        jax.block_until_ready(search(params, key, state))
        compiled = time.perf_counter()
        seconds = []
        for _ in range(args.repeats):
          begin = time.perf_counter()
          nodes, hits = jax.block_until_ready(search(params, key, state))
          seconds.append(time.perf_counter() - begin)
        rows.append(
          dict(
            game=game_id,
            prior=prior,
            plies=plies,
            simulations=simulations,
            key=mode,
            graph=transpositions,
            hits=float(np.mean(hits)) / simulations,
            nodes=float(np.mean(nodes)) / simulations,
            seconds=min(seconds),
            compile_seconds=compiled - start,
          )
        )
        print(rows[-1], flush=True)
  return rows


def table(rows: list[dict]) -> list[str]:
  """One markdown row per game, plies and S: hits and nodes per simulation by key."""
  lines = [
    "| game | plies | S | hits/sim exact | bounded | position | nodes/sim exact | bounded "
    "| position | tree | s/search exact | bounded | position | tree |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  groups: dict[tuple, dict] = {}
  for row in rows:
    groups.setdefault((row["game"], row["plies"], row["simulations"]), {})[row["key"]] = row
  for (game, plies, simulations), by_key in groups.items():
    cells = [by_key.get(mode) or by_key["any"] for mode in keys.HISTORY_MODES]
    tree = by_key["tree"]
    hits = [f"{c['hits']:.3f}" for c in cells]
    nodes = [f"{c['nodes']:.3f}" for c in cells] + [f"{tree['nodes']:.3f}"]
    seconds = [f"{c['seconds']:.2f}" for c in cells] + [f"{tree['seconds']:.2f}"]
    lines.append(
      f"| {game} | {plies} | {simulations} | " + " | ".join(hits + nodes + seconds) + " |"
    )
  return lines


def key_costs(game_ids, batch: int, plies: int = 30, repeats: int = 20) -> list[str]:
  """Milliseconds of one jitted key computation of `batch` states `plies` uniformly
  random plies into games, per mode, beside one jitted pgx step of the same batch
  (the least of 5 rounds of `repeats` calls each)."""

  def best(function, *arguments):
    jax.block_until_ready(function(*arguments))
    rounds = []
    for _ in range(5):
      begin = time.perf_counter()
      for _ in range(repeats):
        jax.block_until_ready(function(*arguments))
      rounds.append((time.perf_counter() - begin) / repeats * 1e3)
    return min(rounds)

  lines = [
    "| game | pgx step ms | key ms exact | bounded | position |",
    "|---|---|---|---|---|",
  ]
  for game_id in game_ids:
    if game_id not in HISTORY_GAMES:
      continue
    game = adapter.make_game(game_id)
    step = jax.jit(game.step)
    key = jax.random.PRNGKey(0)
    state = game.init(key, batch)
    for ply in range(plies):
      logits = jnp.where(game.invalid_actions(state), -jnp.inf, 0.0)
      state = step(state, jax.random.categorical(jax.random.fold_in(key, ply), logits))
    moves = jnp.argmax(~game.invalid_actions(state), axis=-1)
    cells = [f"{best(step, state, moves):.2f}"]
    for mode in keys.HISTORY_MODES:
      hash_fn = jax.jit(keys.transposition_key_fn(game_id, history=mode))
      cells.append(f"{best(hash_fn, state):.2f}")
    lines.append(f"| {game_id} | " + " | ".join(cells) + " |")
  return lines


def machine() -> str:
  """CPU model and load average, for the section's heading."""
  try:
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    model = next(
      (line.split(":", 1)[1].strip() for line in cpu.splitlines() if "Model name" in line), "?"
    )
  except OSError:
    model = platform.processor() or "?"
  load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
  return f"{os.cpu_count()}-core CPU ({platform.machine()}, {model}), load average {load}"


def run(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--games", default=",".join(GAMES))
  parser.add_argument("--simulations", default="256,800")
  parser.add_argument("--plies", default="10,30")
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--repeats", type=int, default=3, help="timed searches per row (min)")
  parser.add_argument("--key-batch", type=int, default=64)
  args = parser.parse_args(argv)
  args.simulations = [int(s) for s in args.simulations.split(",")]
  args.plies = [int(p) for p in args.plies.split(",")]
  heading = machine()
  start = time.perf_counter()
  rows = [row for game_id in args.games.split(",") if game_id for row in measure(game_id, args)]
  priors = sorted({f"{row['game']}: {row['prior']}" for row in rows})
  lines = [
    f"## Transpositions by history mode of the key (issue 47; date "
    f"{datetime.date.today().isoformat()}, {heading}, jax {jax.__version__})",
    "",
    "`python -m benchmarks transpositions --part key_history "
    f"--batch {args.batch}`: B = {args.batch} "
    f"positions per row, {', '.join(map(str, args.plies))} plies into games sampled "
    "from the prior; muzero_policy as the arena plays it, capacity S + 1, chess with 96 "
    f"compact slots. Priors: {'; '.join(priors)}. Hits and nodes per simulation (mean "
    "over the batch); the tree (`transpositions=False`) has no hits. Seconds per "
    f"search of the whole batch, after compiling (least of {args.repeats}). "
    f"{time.perf_counter() - start:.0f} s in all.",
    "",
    *table(rows),
    "",
    f"The key's own cost, B = {args.key_batch} states 30 uniformly random plies into "
    "games (jitted, least of 5 rounds), beside pgx's step of the same batch:",
    "",
    *key_costs(args.games.split(","), args.key_batch),
  ]
  return record.section(lines)
