"""Where the time of `mcgs-jax bench`'s raw search goes, part by part, beside mctx.

The setting of `mcgs-jax bench`'s throughput row: connect four, a random MLP 64-64,
`B` random openings of 0-8 moves, `S` simulations, `muzero_policy` with its defaults.
Each part is jitted and timed alone on the same inputs, median of `--repeats` runs
after one compiling run, interleaved:

  * mctx: `mctx.muzero_policy`;
  * tree / graph: ours, `transpositions=False` / the default (the connect-four key);
  * selection: `S` calls of the search's `select` on the graph mode's final graph
    (the paths stamp it; nothing else changes);
  * backup: `S` backups of one playout selected on that graph (its last edge not
    counted), so its loop runs as deep as that playout's longest path;
  * evaluations: `S` calls of the game's `recurrent_fn` (network and game step) on
    the roots' states with a different action each time, the part every engine pays.

The parts do not add up to the search: XLA runs the independent operations of a step
on every core, and a part timed alone overlaps differently (selection and backup in
one loop took 30-40 ms more than selection alone, while the same backups alone took
about 100 ms, at B = 1024 on 2 cores). Read them as each part's cost alone.

    python -m benchmarks.throughput_parts [--games 1024] [--simulations 64] [--json FILE]
"""

import argparse
import functools
import inspect
import json
import os

import jax
import jax.numpy as jnp

import mcgs_jax as mg
from benchmarks.profile_ply import median_seconds
from mcgs_jax._src import options as options_lib
from mcgs_jax._src import selection
from mcgs_jax._src.backup import backup
from mcgs_jax._src.select import select
from mcgs_jax.apps.benchmark.speed import make_policy, network_game, random_positions
from mcgs_jax.apps.files import write_atomically

PARTS = ("mctx", "tree", "graph", "selection", "backup", "evaluations")


def _parts(games: int, simulations: int, seed: int) -> tuple[dict, dict]:
  """`({name: (jitted fn, args)}, facts)` for every part of `PARTS`."""
  network_key, positions_key, search_key = jax.random.split(jax.random.PRNGKey(seed), 3)
  game, params = network_game("connect_four", network_key)
  state = random_positions(game, positions_key, games, 8)
  policies = {impl: make_policy(game, impl, simulations) for impl in ("mctx", "tree", "graph")}
  final = policies["graph"](params, search_key, state).search_graph
  options = options_lib.resolve(
    "muzero_policy", None, {"hash_fn": game.hash_fn, "transpositions": True}
  )
  # The rule `muzero_policy` builds with its defaults, as in the searches timed.
  defaults = inspect.signature(mg.muzero_policy).parameters
  root_rule, interior_rule = selection.make_muzero_selection(
    **{name: defaults[name].default for name in ("pb_c_init", "pb_c_base", "qtransform")}
  )
  select_once = functools.partial(
    select,
    root_action_selection_fn=root_rule,
    interior_action_selection_fn=interior_rule,
    max_depth=simulations,
    options=options,
  )

  # Each loop returns the whole graph, so that XLA keeps every write.
  def selections(key, graph):
    def body(step, graph):
      return select_once(jax.random.fold_in(key, step), graph)[0]

    return jax.lax.fori_loop(0, simulations, body, graph)

  def backups(graph, path):
    return jax.lax.fori_loop(
      0, simulations, lambda _, graph: backup(graph, path, options=options), graph
    )

  def evaluations(params, key, state):
    embedding = game.root(params, key, state).embedding

    def body(step, total):
      actions = jax.random.randint(jax.random.fold_in(key, step), (games,), 0, game.num_actions)
      output, _ = game.recurrent_fn(params, key, actions, embedding)
      return total + output.value

    return jax.lax.fori_loop(0, simulations, body, jnp.zeros((games,)))

  stamped, path = jax.jit(select_once)(search_key, final)
  parts = {
    **{impl: (policy, (params, search_key, state)) for impl, policy in policies.items()},
    "selection": (jax.jit(selections), (search_key, final)),
    "backup": (jax.jit(backups), (stamped, path)),
    "evaluations": (jax.jit(evaluations), (params, search_key, state)),
  }
  facts = {
    "mean_nodes": float(jnp.mean(final.num_nodes)),
    "final_graph_path_mean": float(jnp.mean(path.length)),
    "final_graph_path_longest": int(jnp.max(path.length)),
  }
  return parts, facts


def profile(games: int, simulations: int, repeats: int, seed: int = 0) -> dict:
  """Median seconds of every part (module docstring), runs interleaved."""
  parts, facts = _parts(games, simulations, seed)
  seconds = median_seconds(parts, repeats)
  return {"games": games, "simulations": simulations, "seconds": seconds, **facts}


def table(result: dict) -> str:
  """The parts as a markdown table: ms, and the share of mctx's time."""
  seconds = result["seconds"]
  mctx = seconds["mctx"]
  lines = ["| part | ms | of mctx's time |", "|---|---|---|"]
  lines += [
    f"| {name} | {value * 1e3:.1f} | {value / mctx:.2f} |" for name, value in seconds.items()
  ]
  return "\n".join(lines)


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
  parser.add_argument("--games", type=int, default=1024)
  parser.add_argument("--simulations", type=int, default=64)
  parser.add_argument("--repeats", type=int, default=9)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--json", help="also write the result here")
  args = parser.parse_args(argv)
  load = os.getloadavg()[0]
  result = profile(args.games, args.simulations, args.repeats, args.seed)
  result["load_average_before"] = load
  print(
    f"B={args.games}, S={args.simulations}; load average {load:.2f} before; "
    f"median of {args.repeats}"
  )
  print(table(result))
  print(
    f"final graph: {result['mean_nodes']:.1f} nodes per game; its playouts "
    f"{result['final_graph_path_mean']:.2f} edges on average, {result['final_graph_path_longest']} "
    "at most"
  )
  if args.json:
    write_atomically(args.json, json.dumps(result, indent=1))


if __name__ == "__main__":
  main()
