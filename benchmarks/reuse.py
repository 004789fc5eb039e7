"""Graph reuse on connect four: root visits carried over from one move to the next.

Self-play with `muzero_policy` and `reroot` (uniform evaluator), graph and tree mode;
prints the markdown rows recorded in benchmarks/RESULTS.md, and the time of one
`reroot` against one search.

Usage: python -m benchmarks.reuse
"""

import time

import jax
import numpy as np

import mcgs_jax as mg
from mcgs_jax.games import search_game
from mcgs_jax.games.adapter import make_game
from mcgs_jax.testing import make_self_play

jitted_reroot = jax.jit(mg.reroot)


def measure(
  game_name="connect_four",
  *,
  batch_size=8,
  num_simulations=128,
  capacity=1024,
  max_moves=42,
  seed=0,
  transpositions=True,
):
  """Self-play with reuse; returns per-move root visits carried over (live games)."""
  _, init, step = make_self_play(
    game_name,
    batch_size=batch_size,
    num_simulations=num_simulations,
    capacity=capacity,
    transpositions=transpositions,
  )
  key = jax.random.PRNGKey(seed)
  key, init_key = jax.random.split(key)
  state, graph = init(init_key)
  carried_per_move, nodes_per_move = [], []
  start = time.perf_counter()
  for _ in range(max_moves):
    live = ~np.asarray(state.terminated | state.truncated)
    if not live.any():
      break
    key, step_key = jax.random.split(key)
    state, graph, _, carried, legal = step(step_key, state, graph)
    assert np.all(np.asarray(legal))
    carried_per_move.extend(np.asarray(carried)[live].tolist())
    nodes_per_move.extend(np.asarray(graph.num_nodes)[live].tolist())
  seconds = time.perf_counter() - start
  return np.array(carried_per_move), np.array(nodes_per_move), seconds


def time_reroot(
  game_name="connect_four", *, batch_size=16, num_simulations=256, capacity=2048, repeats=20
):
  """Seconds per jitted `reroot` call vs per search, on a first-move graph."""
  game = make_game(game_name)
  state = game.init(jax.random.PRNGKey(0), batch_size)

  @jax.jit
  def run(key):
    return search_game(mg.muzero_policy, game, state, num_simulations, key, capacity=capacity)

  out = jax.block_until_ready(run(jax.random.PRNGKey(1)))
  rerooted = jax.block_until_ready(jitted_reroot(out.search_graph, out.action))
  timings = {}
  for name, fn in (
    ("search", lambda: run(jax.random.PRNGKey(2))),
    ("reroot", lambda: jitted_reroot(out.search_graph, out.action)),
  ):
    start = time.perf_counter()
    for _ in range(repeats):
      jax.block_until_ready(fn())
    timings[name] = (time.perf_counter() - start) / repeats
  return timings, int(np.max(out.search_graph.num_nodes)), int(np.max(rerooted.num_nodes))


if __name__ == "__main__":
  print(f"jax {jax.__version__}, backend {jax.default_backend()}")
  for sims, capacity in ((64, 512), (256, 2048)):
    for transpositions in (True, False):
      results = [
        measure(
          batch_size=16,
          num_simulations=sims,
          capacity=capacity,
          transpositions=transpositions,
          seed=seed,
        )
        for seed in (0, 1)
      ]
      carried = np.concatenate([r[0] for r in results])
      seconds = sum(r[2] for r in results)
      most_nodes = max(int(r[1].max()) for r in results)
      print(
        f"| {sims} | {capacity} | {'MCGS' if transpositions else 'MCTS'} | "
        f"{carried.size} | {carried.mean():.1f} ({carried.mean() / sims:.2f} S) | "
        f"{np.median(carried):.0f} | {np.mean(carried == 0):.0%} | "
        f"{np.mean(carried / (carried + sims)):.0%} | {most_nodes} | {seconds:.1f} s |",
        flush=True,
      )
  timings, old_nodes, kept_nodes = time_reroot()
  print(
    f"reroot timing (connect_four, B=16, S=256, capacity 2048, {old_nodes} nodes "
    f"-> {kept_nodes} kept): search {1e3 * timings['search']:.1f} ms, reroot "
    f"{1e3 * timings['reroot']:.2f} ms per call"
  )
