"""`mcgs-jax play`: single-player games with chance (2048) played by Stochastic
MuZero search, on a graph and on a tree side by side.

Every mode plays the same `--games` new games (same initial boards), all in one
batch: one jitted step searches every game, plays the most visited move (no
Dirichlet noise, temperature 0) and draws the new tile; a Python loop repeats it
until every game is over (or `--max-moves`). Modes: `graph` (chance and decision
nodes shared by key), `tree` (`transpositions=False`, mctx's search) and `mctx`
(`mctx.stochastic_muzero_policy` itself, when installed).

It prints, per mode, the mean score with a 95% interval, the distribution of the
largest tile, moves per game, nodes and transposition hits per move (a move is
two simulations deep: decision then chance) and the time. With `--reuse` the graph
and tree modes keep their search from move to move (rerooted by the move played,
then by the tile that fell) and report the root visits carried over. `--json` prints one
JSON object instead; `--plot FILE.png` draws the scores with their intervals and
the largest tiles. A progress bar goes to stderr.

Bad input exits with status 2 and a single line `mcgs-jax play: error: ...`.
"""

import argparse
import dataclasses
import json
import math
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from mcgs_jax.apps import files, memory_estimates
from mcgs_jax.apps.cli.args import OneLineErrorParser, add_seed_argument, int_at_least
from mcgs_jax.apps.extras import missing_extra
from mcgs_jax.apps.progress import progress_bar

PROG = "mcgs-jax play"
MODES = ("graph", "tree", "mctx")
EVALUATORS = ("uniform", "rollout", "network")

_positive_int = int_at_least(1, 1_000_000)


@dataclasses.dataclass(frozen=True)
class PlayConfig:
  """What `play_games` plays.

  size: board side (4: 2048 as pgx plays it).
  num_games: games per mode, all in one batch.
  num_simulations: simulations per move (two per move of lookahead).
  evaluator: `uniform`, `rollout` (random playouts of `rollout_steps` moves) or
    `network` (a small flax MLP with random weights from `seed`: for timing).
  modes: any of `graph`, `tree`, `mctx`.
  max_moves: moves per game at most (None: until every game is over).
  seed: initial boards, chance draws and search keys.
  reuse: graph and tree modes keep their graph from move to move, rerooted by the
    move played and then by the tile that fell (`reroot` twice), with capacity
    `4 * num_simulations + 1`.
  stop_rule: the graph mode's `stop_rule` (None: the library's default).
  """

  size: int = 4
  num_games: int = 32
  num_simulations: int = 64
  evaluator: str = "rollout"
  rollout_steps: int = 32
  modes: Sequence[str] = ("graph", "tree")
  max_moves: int | None = None
  seed: int = 0
  reuse: bool = False
  stop_rule: str | None = None


def _evaluator(config: PlayConfig):
  """`(Evaluator2048, params)`."""
  import jax

  from mcgs_jax.games import play2048

  if config.evaluator == "uniform":
    return play2048.uniform_evaluator(), None
  if config.evaluator == "rollout":
    return play2048.rollout_evaluator(config.rollout_steps), None
  apply_fn, params = play2048.init_network(jax.random.PRNGKey(config.seed), config.size)
  return play2048.network_evaluator(apply_fn), params


def make_step(config: PlayConfig, mode: str, evaluator, params):
  """`(game, step, graph)`: a jitted `step(key, boards, alive, graph) -> (boards,
  rewards, alive, nodes, hits, carried, graph)` that searches every game with `mode`
  and plays its move, and the first `graph` to pass (None without reuse; an empty
  graph of the right shapes with it). `carried` is the root visits a search starts
  with (0 without reuse)."""
  import jax
  import jax.numpy as jnp

  import mcgs_jax as mg
  from mcgs_jax.games import play2048

  # mctx only knows rewards on the outcome edges; the search is the same on a tree.
  game = play2048.make_2048(
    evaluator, size=config.size, reward_on="chance" if mode == "mctx" else "decision"
  )
  keep_graph = config.reuse and mode != "mctx"
  search = _stochastic_search(game, config, mode, params, keep_graph)

  @jax.jit
  def step(key, boards, alive, graph):
    search_key, chance_key = jax.random.split(key)
    carried = earlier_hits = jnp.zeros(boards.shape[:1], jnp.int32)
    if graph is not None:
      continued = (graph.num_nodes > 0) & graph.embeddings.is_decision_node[:, 0]
      carried = jnp.where(continued, graph.node_visits[:, 0], 0)
      # A kept graph counts hits over its whole life: count this search's only.
      earlier_hits = jnp.where(continued, graph.transposition_hits, 0)
    action, nodes, hits, searched = search(search_key, boards, graph)
    hits = hits - earlier_hits
    action = action.astype(jnp.int32)
    after, rewards = game.afterstates(boards, action)
    outcomes = game.sample_outcomes(chance_key, after)
    following = game.place(after, outcomes)
    if graph is not None:
      graph = mg.reroot(mg.reroot(searched, action), outcomes)
    boards = jnp.where(alive[:, None], following, boards)
    rewards = jnp.where(alive, rewards, 0.0)
    return boards, rewards, alive & ~game.terminated(boards), nodes, hits, carried, graph

  graph = None
  if keep_graph:
    boards = game.init(jax.random.PRNGKey(0), config.num_games)
    shapes = jax.eval_shape(lambda: search(jax.random.PRNGKey(0), boards, None)[3])
    graph = mg.empty_like(shapes)
  return game, step, graph


def _stochastic_search(game, config: PlayConfig, mode: str, params, keep_graph: bool):
  """`search(key, boards, graph) -> (action, nodes, hits, graph)` of `make_step`: one
  Stochastic MuZero search of every game with `mode` (mctx's on a tree, or ours on a
  graph or a tree), greedy and without noise, continuing `graph` with `keep_graph`
  (None without)."""
  import jax.numpy as jnp

  import mcgs_jax as mg

  graph_keywords: dict[str, Any] = (
    {} if config.stop_rule is None else {"stop_rule": config.stop_rule}
  )
  capacity = 4 * config.num_simulations + 1 if keep_graph else None

  def search(key, boards, graph):
    root = game.root(params, key, boards)
    invalid = game.invalid_actions(boards)
    arguments = (
      params,
      key,
      root,
      game.decision_recurrent_fn,
      game.chance_recurrent_fn,
      config.num_simulations,
    )
    if mode == "mctx":
      import mctx

      out = mctx.stochastic_muzero_policy(
        *arguments[:2],
        mctx.RootFnOutput(
          prior_logits=root.prior_logits, value=root.value, embedding=root.embedding
        ),
        *arguments[3:],
        invalid_actions=invalid,
        dirichlet_fraction=0.0,
        temperature=0.0,
      )
      # mctx's tree: every node but the root came from one expansion.
      nodes = jnp.sum(out.search_tree.node_visits > 0, axis=-1)
      return out.action, nodes, jnp.zeros_like(nodes), None
    out = mg.stochastic_muzero_policy(
      *arguments,
      invalid_actions=invalid,
      dirichlet_fraction=0.0,
      temperature=0.0,
      transpositions=mode == "graph",
      hash_fn=game.hash_fn,
      afterstate_hash_fn=game.afterstate_hash_fn,
      capacity=capacity,
      graph=graph,
      **graph_keywords,
    )
    graph = out.search_graph
    return out.action, graph.num_nodes, graph.transposition_hits, graph

  return search


def estimated_play_bytes(config: PlayConfig, evaluator, params) -> int:
  """Bytes one mode's searches hold at once (`memory_estimates.GRAPHS_PER_SEARCH` graphs, as an
  arena search), from the shapes of the graph a search of `config` returns, without
  allocating. mctx's tree has the shapes of the tree mode's graph, give or take."""
  import jax

  from mcgs_jax.games import play2048

  game = play2048.make_2048(evaluator, size=config.size, reward_on="decision")
  mode = "graph" if "graph" in config.modes else "tree"
  search = _stochastic_search(game, config, mode, params, keep_graph=config.reuse)
  key = jax.random.PRNGKey(0)
  boards = jax.eval_shape(lambda key: game.init(key, config.num_games), key)
  *_, graph = jax.eval_shape(lambda key, boards: search(key, boards, None), key, boards)
  graph_bytes = sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(graph))
  return memory_estimates.GRAPHS_PER_SEARCH * graph_bytes


def _interval(values) -> list[float]:
  """The normal 95% interval of the mean (0 width for one value)."""
  values = np.asarray(values, np.float64)
  half = 1.96 * values.std(ddof=1) / math.sqrt(len(values)) if len(values) > 1 else 0.0
  return [float(values.mean() - half), float(values.mean() + half)]


def play_games(config: PlayConfig, progress: bool = False) -> dict:
  """Plays `config.num_games` games with every mode; returns a JSON-ready dict:
  per mode `scores`, `mean_score`, `score_ci95`, `largest_tiles` (tile -> games),
  `moves` (per game), `finished`, `nodes_per_move`, `transposition_hits_per_move`,
  `carried_visits_per_move` (root visits kept from the previous move, with reuse),
  `seconds`."""
  import jax

  unknown = sorted(set(config.modes) - set(MODES))
  if unknown or not config.modes:
    raise ValueError(f"modes must be a non-empty subset of {MODES}, got {config.modes}")
  evaluator, params = _evaluator(config)
  key = jax.random.PRNGKey(config.seed)
  init_key, key = jax.random.split(key)
  results = {}
  bar = None
  if progress:
    bar = progress_bar(
      total=config.num_games * len(config.modes),
      desc="games finished",
      file=sys.stderr,
      leave=False,
    )
  for mode in config.modes:
    results[mode] = _play_mode(config, mode, evaluator, params, init_key, key, bar)
  if bar is not None:
    bar.close()
  return {
    "config": dataclasses.asdict(config) | {"modes": list(config.modes)},
    "evaluator": evaluator.name,
    "modes": results,
  }


def _play_mode(config: PlayConfig, mode: str, evaluator, params, init_key, key, bar) -> dict:
  """`play_games`' dict of one mode: its games played to the end (or `max_moves`),
  the finished ones counted on `bar` (None: no bar)."""
  import jax
  import jax.numpy as jnp

  game, step, graph = make_step(config, mode, evaluator, params)
  boards = game.init(init_key, config.num_games)
  alive = ~game.terminated(boards)
  scores = np.zeros(config.num_games)
  moves = np.zeros(config.num_games, np.int64)
  node_sum = hit_sum = carried_sum = 0.0
  start = time.time()
  move_key = key
  count = 0
  while bool(jnp.any(alive)) and (config.max_moves is None or count < config.max_moves):
    move_key, this_key = jax.random.split(move_key)
    was_alive = np.asarray(alive)
    boards, rewards, alive, nodes, hits, carried, graph = step(this_key, boards, alive, graph)
    scores += np.asarray(rewards)
    moves += was_alive
    node_sum += float(np.sum(np.asarray(nodes)[was_alive]))
    hit_sum += float(np.sum(np.asarray(hits)[was_alive]))
    carried_sum += float(np.sum(np.asarray(carried)[was_alive]))
    count += 1
    if bar is not None:
      bar.update(int(np.sum(was_alive & ~np.asarray(alive))))
      bar.set_postfix(mode=mode, move=count, refresh=False)
  finished = ~np.asarray(alive)
  if bar is not None:
    bar.update(int(np.sum(~finished)))
  largest = 2 ** np.asarray(boards).max(axis=1)
  tiles, counts = np.unique(largest, return_counts=True)
  total_moves = max(int(moves.sum()), 1)
  return {
    "scores": scores.tolist(),
    "mean_score": float(scores.mean()),
    "score_ci95": _interval(scores),
    "largest_tiles": {str(int(tile)): int(n) for tile, n in zip(tiles, counts, strict=True)},
    "moves": moves.tolist(),
    "mean_moves": float(moves.mean()),
    "finished": int(finished.sum()),
    "nodes_per_move": node_sum / total_moves,
    "transposition_hits_per_move": hit_sum / total_moves,
    "carried_visits_per_move": carried_sum / total_moves,
    "seconds": time.time() - start,
  }


def format_results(result: dict) -> str:
  """The text report: one line per mode, then the largest tiles."""
  config = result["config"]
  lines = [
    f"2048 on {config['size']}x{config['size']}: {config['num_games']} games per mode, "
    f"Stochastic MuZero with {config['num_simulations']} simulations per move, "
    f"{result['evaluator']} evaluator"
    + (f", at most {config['max_moves']} moves" if config["max_moves"] else "")
    + (", graph kept between moves" if config.get("reuse") else "")
    + (f", stop_rule {config['stop_rule']}" if config.get("stop_rule") else ""),
    f"{'mode':<6}{'mean score':>11}  {'95% interval':>17}  {'moves':>7}  "
    f"{'finished':>8}  {'nodes/move':>10}  {'hits/move':>9}  {'carried':>7}  "
    f"{'time':>7}",
  ]
  for mode, stats in result["modes"].items():
    low, high = stats["score_ci95"]
    lines.append(
      f"{mode:<6}{stats['mean_score']:>11.1f}  [{low:>7.1f}, {high:>7.1f}]  "
      f"{stats['mean_moves']:>7.1f}  {stats['finished']:>8}  "
      f"{stats['nodes_per_move']:>10.1f}  "
      f"{stats['transposition_hits_per_move']:>9.1f}  "
      f"{stats.get('carried_visits_per_move', 0.0):>7.1f}  "
      f"{stats['seconds']:>6.0f}s"
    )
  tiles = sorted({int(t) for stats in result["modes"].values() for t in stats["largest_tiles"]})
  lines.append("largest tile  " + "".join(f"{tile:>7}" for tile in tiles))
  for mode, stats in result["modes"].items():
    lines.append(
      f"{mode:<14}" + "".join(f"{stats['largest_tiles'].get(str(tile), 0):>7}" for tile in tiles)
    )
  return "\n".join(lines)


def save_plot(path: str, result: dict) -> None:
  """Two panels: mean score with its 95% interval per mode, largest tiles per mode."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  modes = list(result["modes"])
  figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
  for index, mode in enumerate(modes):
    stats = result["modes"][mode]
    low, high = stats["score_ci95"]
    mean = stats["mean_score"]
    left.errorbar([index], [mean], yerr=[[mean - low], [high - mean]], fmt="o", capsize=8)
  left.set_xticks(range(len(modes)), modes)
  left.set_xlim(-0.5, len(modes) - 0.5)
  left.set_ylabel("mean score (95% interval)")
  tiles = sorted({int(t) for stats in result["modes"].values() for t in stats["largest_tiles"]})
  width = 0.8 / len(modes)
  for index, mode in enumerate(modes):
    counts = [result["modes"][mode]["largest_tiles"].get(str(tile), 0) for tile in tiles]
    right.bar(np.arange(len(tiles)) + index * width, counts, width, label=mode)
  right.set_xticks(np.arange(len(tiles)) + 0.4 - width / 2, [str(t) for t in tiles])
  right.set_xlabel("largest tile")
  right.set_ylabel("games")
  right.legend()
  config = result["config"]
  figure.suptitle(
    f"2048, {config['num_games']} games, {config['num_simulations']} "
    f"simulations, {result['evaluator']}"
  )
  figure.tight_layout()
  files.save_figure(figure, path)
  plt.close(figure)


def _modes(text: str) -> list[str]:
  modes = [mode.strip() for mode in text.split(",") if mode.strip()]
  bad = [mode for mode in modes if mode not in MODES]
  if bad or not modes:
    raise argparse.ArgumentTypeError(
      f"expected a comma-separated list of {', '.join(MODES)}, got {text!r}"
    )
  return modes


def _game(text: str) -> int:
  """`2048` or `2048:SIZE` -> the board side."""
  from mcgs_jax.games import play2048

  if text.partition(":")[0] != "2048":
    raise argparse.ArgumentTypeError(
      f"only 2048 is a single-player game with chance here (2048 or 2048:SIZE), got {text!r}"
    )
  try:
    return play2048.board_size_of_spec(text)
  except ValueError as error:
    raise argparse.ArgumentTypeError(str(error)) from None


def build_parser() -> argparse.ArgumentParser:
  parser = OneLineErrorParser(
    prog=PROG,
    description=(
      "Play single-player games with chance (2048) with Stochastic MuZero search, on a "
      "graph and on a tree side by side, and print the scores."
    ),
  )
  parser.add_argument(
    "--game",
    type=_game,
    default=4,
    metavar="2048[:SIZE]",
    help="2048, or 2048:SIZE for a SIZE x SIZE board (default: 2048)",
  )
  parser.add_argument(
    "--games",
    type=_positive_int,
    default=32,
    help="games per mode, in one batch (default: %(default)s)",
  )
  parser.add_argument(
    "--simulations",
    type=_positive_int,
    default=64,
    help="simulations per move (default: %(default)s)",
  )
  _add_search_arguments(parser)
  return parser


def _add_search_arguments(parser) -> None:
  """The searches and the run: evaluator, modes, move cap, seed, stop rule, reuse, output."""
  parser.add_argument(
    "--evaluator",
    choices=EVALUATORS,
    default="rollout",
    help="leaf evaluator: uniform prior with value 0, random "
    "rollouts, or a flax MLP with random weights "
    "(default: %(default)s)",
  )
  parser.add_argument(
    "--rollout-steps",
    type=_positive_int,
    default=32,
    help="moves per random rollout (default: %(default)s)",
  )
  parser.add_argument(
    "--modes",
    type=_modes,
    default=["graph", "tree"],
    help="comma-separated: graph, tree, mctx (default: graph,tree)",
  )
  parser.add_argument(
    "--max-moves",
    type=_positive_int,
    default=None,
    help="stop every game after this many moves (default: play to the end)",
  )
  add_seed_argument(parser)
  parser.add_argument(
    "--stop-rule",
    choices=("catch_up", "value_lag", "never"),
    help="graph mode's stop_rule (default: the library's)",
  )
  parser.add_argument(
    "--reuse",
    action="store_true",
    help="graph and tree modes keep their graph between moves, "
    "rerooted by the move and the new tile ('carried': root "
    "visits kept per move)",
  )
  parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
  parser.add_argument(
    "--plot", metavar="FILE.png", help="save a figure of the scores and the largest tiles"
  )


def main(argv: Sequence[str] | None = None) -> int:
  parser = build_parser()
  args = parser.parse_args(argv)
  for flag, wanted, module in (
    ("--modes mctx", "mctx" in args.modes, "mctx"),
    ("--evaluator network", args.evaluator == "network", "flax"),
    ("--plot", args.plot, "matplotlib"),
  ):
    missing = missing_extra(module) if wanted else None
    if missing:
      parser.error(f"{flag} {missing}")
  try:
    files.check_output_path("--plot", args.plot)
  except ValueError as error:
    parser.error(str(error))
  config = PlayConfig(
    size=args.game,
    num_games=args.games,
    num_simulations=args.simulations,
    evaluator=args.evaluator,
    rollout_steps=args.rollout_steps,
    modes=tuple(args.modes),
    max_moves=args.max_moves,
    seed=args.seed,
    reuse=args.reuse,
    stop_rule=args.stop_rule,
  )
  try:
    memory_estimates.check_memory(
      {"graphs": estimated_play_bytes(config, *_evaluator(config))},
      owner="each mode",
      advice="fewer games, simulations or a smaller board",
    )
  except memory_estimates.InsufficientMemoryError as error:
    parser.error(str(error))
  result = play_games(config, progress=sys.stderr.isatty() or not args.json)
  if args.plot:
    save_plot(args.plot, result)
  if args.json:
    print(json.dumps(result))
  else:
    print(format_results(result))
  return 0
