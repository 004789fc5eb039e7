"""The timing of `mcgs-jax bench`: the searches it compares (`make_policy`: mctx's,
ours in tree mode, ours in graph mode), timed alone (`time_policy`) or interleaved
(`time_group`) on random positions (`random_positions`), and how far their playouts
went (`path_statistics`)."""

import statistics
import time
from collections.abc import Callable

import jax
import numpy as np

from mcgs_jax._src.batched import where_per_game

IMPLEMENTATIONS = ("mctx", "tree", "graph")


def random_positions(game, rng_key, batch_size: int, max_opening_moves: int):
  """`batch_size` positions after 0..`max_opening_moves` random legal moves (a game
  that would end stays at the position before its last move)."""
  from mcgs_jax.games.evaluators import random_legal_actions

  init_key, moves_key, length_key = jax.random.split(rng_key, 3)
  state = game.init(init_key, batch_size)
  lengths = jax.random.randint(length_key, (batch_size,), 0, max_opening_moves + 1)

  def play(step, carry):
    state, key = carry
    key, move_key = jax.random.split(key)
    action = random_legal_actions(jax.random.split(move_key, batch_size), state.legal_action_mask)
    moved = game.step(state, action)
    keep = (step < lengths) & ~moved.terminated
    state = where_per_game(keep, moved, state)
    return state, key

  state, _ = jax.lax.fori_loop(0, max_opening_moves, play, (state, moves_key))
  return state


def make_policy(
  game, impl: str, num_simulations: int, *, recycle: bool = False, **graph_options
) -> Callable:
  """`impl`'s muzero policy, `(params, key, state) -> PolicyOutput`, jitted.

  `impl` is `"mctx"`, `"tree"` (ours, `transpositions=False`) or `"graph"` (ours,
  with the game's transposition key); `graph_options` (`capacity`, `probe_window`,
  ...) go to ours. With `recycle` (ours only), the policy takes a fourth argument,
  the previous output's `search_graph` (or None), which it recycles and donates.
  """
  if impl == "mctx":
    import mctx

    def theirs(params, key, state):
      root = game.root(params, key, state)
      return mctx.muzero_policy(
        params,
        key,
        mctx.RootFnOutput(
          prior_logits=root.prior_logits, value=root.value, embedding=root.embedding
        ),
        game.recurrent_fn,
        num_simulations,
        invalid_actions=game.invalid_actions(state),
      )

    return jax.jit(theirs)
  if impl not in ("tree", "graph"):
    raise ValueError(f"unknown implementation {impl!r}; expected one of {IMPLEMENTATIONS}")
  from mcgs_jax.apps.registry import POLICIES

  def ours(params, key, state, recycled=None):
    root = game.root(params, key, state)
    return POLICIES["muzero"](
      params,
      key,
      root,
      game.recurrent_fn,
      num_simulations,
      invalid_actions=game.invalid_actions(state),
      hash_fn=game.hash_fn,
      transpositions=impl == "graph",
      recycle=recycled,
      **graph_options,
    )

  return jax.jit(ours, donate_argnames="recycled") if recycle else jax.jit(ours)


def time_policy(policy, params, key, state, repeats: int):
  """`(compile seconds, median run seconds)` of one policy on its own."""
  start = time.perf_counter()
  compiled = policy.lower(params, key, state).compile()
  compile_seconds = time.perf_counter() - start
  jax.block_until_ready(compiled(params, key, state))
  runs = []
  for repeat in range(repeats):
    run_key = jax.random.fold_in(key, repeat)
    start = time.perf_counter()
    jax.block_until_ready(compiled(params, run_key, state).action)
    runs.append(time.perf_counter() - start)
  return compile_seconds, statistics.median(runs)


def time_group(policies: dict, params, key, state, repeats: int, recycling=()) -> dict:
  """Times several policies on the same inputs, interleaved.

  Every policy is compiled and run once (warm-up) first; then `repeats` rounds each
  run every policy once, in order. A policy named in `recycling` (made with
  `make_policy(..., recycle=True)`) is handed its previous output's graph at every
  run; its warm-up runs twice (a first graph, then the recycling program).
  Returns `{name: (compile seconds, median run seconds, output of the last run)}`.
  """
  compiled, compile_seconds, outputs = {}, {}, {}
  for name, policy in policies.items():
    extra: tuple = ()
    if name in recycling:
      extra = (jax.block_until_ready(policy(params, key, state)).search_graph,)
    start = time.perf_counter()
    compiled[name] = policy.lower(params, key, state, *extra).compile()
    compile_seconds[name] = time.perf_counter() - start
    outputs[name] = jax.block_until_ready(compiled[name](params, key, state, *extra))
  runs: dict[str, list] = {name: [] for name in policies}
  for repeat in range(repeats):
    run_key = jax.random.fold_in(key, repeat)
    for name in policies:
      extra = (outputs[name].search_graph,) if name in recycling else ()
      start = time.perf_counter()
      outputs[name] = jax.block_until_ready(compiled[name](params, run_key, state, *extra))
      runs[name].append(time.perf_counter() - start)
  return {
    name: (compile_seconds[name], statistics.median(runs[name]), outputs[name]) for name in policies
  }


def deepest_nodes(children_index) -> np.ndarray:
  """`[B]`: per game, the largest distance (in edges, along shortest paths) from the
  root to a node reachable through `children_index` `[B, N, A]`."""
  children_index = np.asarray(children_index)
  result = np.zeros(children_index.shape[0], np.int64)
  for game, children in enumerate(children_index):
    seen = np.zeros(children.shape[0], bool)
    seen[0] = True
    frontier, depth = np.array([0]), 0
    while True:
      nodes = np.unique(children[frontier].ravel())
      nodes = nodes[nodes >= 0]
      nodes = nodes[~seen[nodes]]
      if not nodes.size:
        break
      seen[nodes] = True
      frontier, depth = nodes, depth + 1
    result[game] = depth
  return result


def path_statistics(output, run_seconds: float) -> dict:
  """How far the playouts of one search went (see the module doc)."""
  graph = output.search_graph
  steps = float(np.sum(np.asarray(graph.edge_visits), dtype=np.int64))
  playouts = float(np.sum(np.asarray(graph.playouts_started), dtype=np.int64))
  return dict(
    edge_steps=round(steps / max(playouts, 1), 2),
    deepest=round(float(np.mean(deepest_nodes(graph.children_index))), 1),
    ns_per_edge_step=round(run_seconds * 1e9 / max(steps, 1), 1),
  )
