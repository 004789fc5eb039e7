"""Where the MCTS-solver's playouts go on Nim, and how many it needs to prove the root.

Every simulation of a `solver=True` search is classified by how its playout ended,
read from the graph before and after the step (through the policy's `loop_fn`):

  * `new state`: it added a node (a state not in the graph yet);
  * `new edge`: its unexpanded edge found the state in the graph (a transposition);
  * `terminal`: it arrived at an existing terminal node;
  * `proven`: it stopped at an edge into a child already proven;
  * `stale`: it stopped at a child whose proof was not recorded yet (the proof moves up);
  * `stop rule`: it stopped at an existing unproven child (the stop rule, a cycle or
    `max_depth`);
  * `after proof`: the root was proven already.

Only `new state` and `new edge` add an edge to the graph, and a proof needs every edge
it holds expanded: the fewest simulations that can prove a root is the number of edges
of its smallest proof (`proof_edges`, exact search on the game's graph of states). Also
printed per row: the first simulation at which each seed's root is proven (median,
max, `-` where some seed never is), how many seeds play an optimal move, the distinct
states and edges expanded, and the root edge that got most playouts.

Usage: python -m benchmarks solver --part solver_nim_trace [--heaps "3,4,5;2,3,4"]
  [--simulations 400]
  [--policies muzero,gumbel,uct] [--seeds 12] [--seed 0] [--modes catch_up,never,tree]
  [--proof-first on,off]
"""

import argparse
import functools

import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax.apps import registry
from mcgs_jax.games import evaluators, search_game, solvers
from mcgs_jax.games.adapter import make_game
from mcgs_jax.games.nim import Nim, parse_heaps

KINDS = ("new state", "new edge", "terminal", "proven", "stale", "stop rule", "after proof")
# mode name -> (transpositions, stop_rule)
MODES = {"catch_up": (True, "catch_up"), "never": (True, "never"), "tree": (False, "never")}


def _moves(heaps):
  for i, size in enumerate(heaps):
    for take in range(1, size + 1):
      yield heaps[:i] + (size - take,) + heaps[i + 1 :]


@functools.cache
def _wins(heaps) -> bool:
  return any(not _wins(child) for child in _moves(heaps))


def proof_edges(heaps) -> int:
  """Edges of a smallest proof of `heaps`' value on the graph of states (each
  winning node keeps the winning move whose child has the fewest stones, each losing
  node all its moves; every edge counted once). An upper bound of the smallest: the
  choice of winning move is greedy."""
  seen, stack, edges = set(), [tuple(heaps)], 0
  while stack:
    node = stack.pop()
    if node in seen or not any(node):
      continue
    seen.add(node)
    children = list(_moves(node))
    if _wins(node):
      children = [min((c for c in children if not _wins(c)), key=sum)]
    edges += len(children)
    stack.extend(children)
  return edges


def _classify(before, after):
  """`[B]` int: index into `KINDS` of the playout that turned `before` into `after`."""
  new_state = after.num_nodes > before.num_nodes
  new_edge = after.transposition_hits > before.transposition_hits
  marks = after.path_marks == before.playouts_started[:, None]  # [B, N] on the path
  grew = after.edge_visits > before.edge_visits  # [B, N, W]
  child = jnp.maximum(before.children_index, 0)
  child_on_path = jnp.take_along_axis(marks, child.reshape(child.shape[0], -1), 1)
  last = grew & (before.children_index >= 0) & ~child_on_path.reshape(child.shape)
  leaf = jnp.max(jnp.where(last, child, -1), axis=(1, 2))
  at = jnp.maximum(leaf, 0)[:, None]
  terminal = jnp.take_along_axis(before.node_terminal, at, 1)[:, 0]
  proven = jnp.take_along_axis(before.node_proven, at, 1)[:, 0]
  stale = jnp.take_along_axis(after.node_proven, at, 1)[:, 0]
  kind = jnp.select([new_state, new_edge, terminal, proven, stale], [0, 1, 2, 3, 4], 5)
  return jnp.where(before.node_proven[:, 0], 6, kind)


def trace(heaps, policy, num_simulations, mode, seeds, seed, proof_first=True):
  """Per seed: (`[S]` kinds, `[S]` root proven, optimal move played, states, edges,
  most visited root action)."""
  env = Nim(heaps)
  game = make_game(env, evaluators.rollout_evaluator(env))
  transpositions, stop_rule = MODES[mode]
  options = dict(registry.POLICY_TABLE[policy].playing_options)
  if policy == "uct":
    options["c"] = 1.41
  trace = {}

  def loop_fn(lower, upper, body, init):
    def step(carry, index):
      after = body(index, carry)
      return after, (_classify(carry[1], after[1]), after[1].node_proven[:, 0])

    final, trace["steps"] = jax.lax.scan(step, init, jnp.arange(lower, upper))
    return final

  @jax.jit
  def search(key):
    keys = jax.random.split(key, seeds)
    state = jax.vmap(lambda k: env.init_from_heaps(jnp.array(heaps)))(keys)
    out = search_game(
      registry.POLICIES[policy],
      game,
      state,
      num_simulations,
      keys[1],
      root_key=keys[0],
      transpositions=transpositions,
      stop_rule=stop_rule,
      solver=True,
      proof_first=proof_first,
      loop_fn=loop_fn,
      **options,
    )
    return out, trace["steps"]

  out, (kinds, proven) = search(jax.random.PRNGKey(seed))
  graph = out.search_graph
  values = solvers.nim_action_values(heaps, env.max_heap)
  best = max(values.values())
  right = np.array([values[int(a)] == best for a in np.asarray(out.action)])
  edges = np.sum(np.asarray(graph.children_index) >= 0, axis=(1, 2))
  top = np.argmax(np.asarray(graph.edge_visits[:, 0]), axis=-1)
  return np.asarray(kinds).T, np.asarray(proven).T, right, np.asarray(graph.num_nodes), edges, top


def row(heaps, policy, num_simulations, mode, seeds, seed, proof_first):
  kinds, proven, right, states, edges, top = trace(
    heaps, policy, num_simulations, mode, seeds, seed, proof_first
  )
  first = np.where(proven.any(1), proven.argmax(1) + 1, -1)
  shares = [np.mean(kinds == k) for k in range(len(KINDS))]
  when = f"{np.median(first):.0f} / {first.max()}" if (first > 0).all() else "-"
  return (
    f"| {','.join(map(str, heaps))} | {policy} | {mode} | {'on' if proof_first else 'off'} | "
    f"{num_simulations} | "
    f"{right.sum()}/{seeds} | {(first > 0).sum()}/{seeds} | {when} | "
    + " | ".join(f"{100 * s:.0f}%" for s in shares)
    + f" | {states.mean():.0f} | {edges.mean():.0f} | {np.bincount(top).argmax()} |"
  )


def run(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--heaps", default="3,4,5")
  parser.add_argument("--simulations", default="400")
  parser.add_argument("--policies", default="muzero,gumbel,uct")
  parser.add_argument("--modes", default="catch_up,never,tree")
  parser.add_argument("--seeds", type=int, default=12)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--proof-first", default="on", help="on, off or on,off")
  args = parser.parse_args(argv)
  print(
    "| heaps | policy | mode | proof_first | S | optimal move | root proven | "
    "proven at (median / max) | " + " | ".join(KINDS) + " | states | edges | top root action |"
  )
  print("|" + "---|" * (11 + len(KINDS)))
  for heaps in args.heaps.split(";"):
    heaps = parse_heaps(heaps)
    print(f"<!-- {heaps}: smallest proof <= {proof_edges(heaps)} edges -->", flush=True)
    for policy in args.policies.split(","):
      for mode in args.modes.split(","):
        for proof_first in [p == "on" for p in args.proof_first.split(",")]:
          for num_simulations in map(int, args.simulations.split(",")):
            print(
              row(heaps, policy, num_simulations, mode, args.seeds, args.seed, proof_first),
              flush=True,
            )
