"""Where a move's time goes: the default agent's search, part by part, beside mctx.

Connect four, the built-in trained network, muzero playing greedily without noise.
`B` games start from random 3-ply openings (as `mcgs-jax arena` plays) and are played
`P` more plies by the default agent (graph + reuse + solver, 64 simulations, capacity
`4 S + 1`), so the graphs hold what a match's graphs hold at that ply. Then each part
is timed alone on those states and graphs, jitted, median of `--repeats` runs after
one compiling run, interleaved with mctx's search in the same process:

  * ply: the default agent's whole search of one ply (`reroot` + `muzero_policy`
    continuing the graph), what `mcgs-jax arena` times;
  * reroot: `mcgs_jax.reroot` alone;
  * search: `muzero_policy` continuing the rerooted graph (solver on, as the agent);
  * search, no solver: the same with `solver=False`;
  * tree, no reuse: a tree searched from scratch (`transpositions=False`, no solver,
    capacity `S + 1`): mctx's search in this library;
  * evaluations: `S` calls of the game's `recurrent_fn` alone (network + game step),
    the part every engine pays;
  * mctx: `mctx.muzero_policy` from scratch on the same roots.

Derived: the solver's share is `search - search, no solver`; selection, linking and
backup are `search, no solver - evaluations`.

    python -m benchmarks speed --part profile_ply [--games 128,256] [--plies 4,12,20] [--json FILE]
"""

import argparse
import dataclasses
import datetime
import json
import os
import platform
import statistics
import tempfile
import time

import jax
import jax.numpy as jnp

import mcgs_jax as mg
from benchmarks import record
from mcgs_jax.apps import arena, registry, train
from mcgs_jax.apps.arena import agent as arena_agent
from mcgs_jax.apps.cli.arena_parser import builtin_checkpoint
from mcgs_jax.games import evaluators, make_game

SIMULATIONS = 64
OPENING_PLIES = 3


def _random_openings(game, state, key):
  for ply in range(OPENING_PLIES):
    legal = ~game.invalid_actions(state)
    logits = jnp.where(legal, 0.0, -jnp.inf)
    action = jax.random.categorical(jax.random.fold_in(key, ply), logits).astype(jnp.int32)
    state = game.step(state, action)
  return state


def default_agent():
  """`(game, agent, params)`: the default arena agent (graph + reuse + solver,
  `SIMULATIONS` simulations) on connect four with the shipped network."""
  base_game = make_game("connect_four")
  apply_fn, params, _ = train.load_network(builtin_checkpoint("connect_four"), base_game.env)
  agent = arena.Agent(
    policy="muzero", evaluator="network", num_simulations=SIMULATIONS, apply_fn=apply_fn
  )
  return arena.agent_game(base_game, agent), agent, params


def agent_policy(policies, game, agent, **options):
  """The agent's search continuing a graph, jitted: `(params, key, root, invalid,
  graph) -> PolicyOutput`. `policies` is a `registry` module (this package's, or an
  older copy's), `options` replace the agent's."""
  bound = policies.playing_policy(
    "muzero",
    hash_fn=game.hash_fn,
    **{"transpositions": True, "solver": True, "capacity": agent.search_capacity, **options},
  )
  return jax.jit(
    lambda p, k, r, i, g: bound(p, k, r, game.recurrent_fn, SIMULATIONS, invalid_actions=i, graph=g)
  )


def _parts(games: int, plies: int, seed: int):
  """`(parts, facts)`: `{name: (jitted fn, args)}` on the states and graphs after
  `plies` plies, and what those graphs hold."""
  game, agent, params = default_agent()
  agent_search = arena_agent.make_search(game, agent)
  search = jax.jit(agent_search)
  key = jax.random.PRNGKey(seed)
  state = _random_openings(game, game.init(key, batch_size=games), jax.random.fold_in(key, 1))
  graph = arena_agent.initial_graph(agent_search, params, state, agent)
  played = jnp.zeros((games,), jnp.int32)
  step = jax.jit(game.step)
  for ply in range(plies):
    action, _, _, graph = search(params, jax.random.fold_in(key, 100 + ply), state, graph, played)
    action = jnp.where(evaluators.is_finished(state), 0, action)
    state, played = step(state, action), action

  root_key, policy_key = jax.random.split(jax.random.fold_in(key, 1000))
  invalid = game.invalid_actions(state) | evaluators.is_finished(state)[:, None]
  root = game.root(params, root_key, state)
  rerooted = jax.jit(mg.reroot)(graph, played)

  def policy(**options):
    return agent_policy(registry, game, agent, **options)

  def evaluations(p, k, r):
    def body(embedding, k):
      output, embedding = game.recurrent_fn(p, k, jnp.zeros((games,), jnp.int32), embedding)
      return embedding, output.value

    return jax.lax.scan(body, r.embedding, jax.random.split(k, SIMULATIONS))

  mctx_agent = dataclasses.replace(
    agent, engine="mctx", reuse=None, solver=None, transpositions=None
  )
  searched = policy()(params, policy_key, root, invalid, rerooted).search_graph
  parts = {
    "ply": (search, (params, jax.random.fold_in(key, 2000), state, graph, played)),
    "reroot": (jax.jit(mg.reroot), (graph, played)),
    "search": (policy(), (params, policy_key, root, invalid, rerooted)),
    "search, no solver": (policy(solver=False), (params, policy_key, root, invalid, rerooted)),
    "tree, no reuse": (
      policy(transpositions=False, solver=False, capacity=SIMULATIONS + 1),
      (params, policy_key, root, invalid, None),
    ),
    "evaluations": (jax.jit(evaluations), (params, policy_key, root)),
    "mctx": (
      jax.jit(arena_agent.mctx_search_policy(game, mctx_agent)),
      (params, policy_key, root, invalid),
    ),
  }
  facts = {
    "games_over": int(jnp.sum(evaluators.is_finished(state))),
    "nodes_before_reroot": float(jnp.mean(graph.num_nodes)),
    "nodes_after_reroot": float(jnp.mean(rerooted.num_nodes)),
    "capacity_overflows_per_search": float(
      jnp.mean(searched.capacity_overflows - rerooted.capacity_overflows)
    ),
  }
  return parts, facts


def median_seconds(parts: dict, repeats: int) -> dict[str, float]:
  """`{name: median seconds}` of `parts` (`{name: (fn, args)}`): each run once to
  compile, then `repeats` rounds that run every part once, in order."""
  for fn, args in parts.values():
    jax.block_until_ready(fn(*args))  # compile
  times: dict[str, list[float]] = {name: [] for name in parts}
  for _ in range(repeats):
    for name, (fn, args) in parts.items():
      started = time.perf_counter()
      jax.block_until_ready(fn(*args))
      times[name].append(time.perf_counter() - started)
  return {name: statistics.median(values) for name, values in times.items()}


def profile(games: int, plies: int, repeats: int, seed: int) -> dict:
  """Median seconds of every part (see the module docstring), runs interleaved."""
  parts, facts = _parts(games, plies, seed)
  seconds = median_seconds(parts, repeats)
  return {"games": games, "plies": plies, "seconds": seconds, **facts}


def table(results: list[dict]) -> str:
  """A markdown table: each part's milliseconds and its ratio to mctx's search."""
  names = list(results[0]["seconds"])
  header = "| B | ply | nodes kept | " + " | ".join(names) + " |"
  lines = [header, "|" + "---|" * (3 + len(names))]
  for result in results:
    mctx = result["seconds"]["mctx"]
    cells = [
      f"{result['seconds'][name] * 1000:.1f} ({result['seconds'][name] / mctx:.2f})"
      for name in names
    ]
    kept = f"{result['nodes_before_reroot']:.0f} -> {result['nodes_after_reroot']:.0f}"
    lines.append(
      f"| {result['games']} | {result['plies'] + OPENING_PLIES} | {kept} | "
      + " | ".join(cells)
      + " |"
    )
  return "\n".join(lines)


def run(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--games", default="128,256", help="comma-separated batch sizes")
  parser.add_argument("--plies", default="4,12,20", help="comma-separated plies after the opening")
  parser.add_argument("--repeats", type=int, default=9)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--json", default="", help="write the figures to this file")
  args = parser.parse_args(argv)
  load_before = os.getloadavg()
  results = [
    profile(int(games), int(plies), args.repeats, args.seed)
    for games in args.games.split(",")
    for plies in args.plies.split(",")
  ]
  title = (
    f"{datetime.date.today()}, {os.cpu_count()} cores {platform.machine()}, jax {jax.__version__}, "
    f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}; "
    "milliseconds per search of all B games (ratio to mctx's)"
  )
  section = record.section([title, table(results)])
  if args.json:
    # A unique temporary file beside the target, then a rename: never half a file.
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(args.json)))
    with os.fdopen(handle, "w") as stream:
      json.dump(results, stream, indent=1)
    os.replace(temporary, args.json)
  return section
