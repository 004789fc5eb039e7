"""UCT with random rollouts on Nim, checked against minimax: a chapter's findings, reproduced.

The chapter "Tìm kiếm cây Monte Carlo" (Monte Carlo tree search; its author is not
named) runs UCT (c = 1.41, uniformly random rollouts, 400 iterations) on
Nim 2-4 and Nim 3-4-5 and reports:
  * Nim 2-4: the optimal move (take 2 from heap B) wins with ~88% estimated win rate;
    from iteration 156 (12 seeds) / 186 (24 seeds) on, every seed stays on it.
  * Nim 3-4-5: random rollouts mislead; the right move (take 2 from heap A) gets ~42%,
    a wrong one ~64%, and only 3 of 12 seeds are stable on the right move.
  * The tree's bookkeeping: root visits = iterations, a node's visits = the sum of its
    children's visits + the playouts that started there.

This script measures the same with `mcgs_jax.uct_policy` and the rollout evaluator, in
tree mode (`transpositions=False`, as the chapter) and graph mode. The RNG differs from
the chapter's mulberry32, so compare the findings, not the digits.

Each seed is one game of a batch of identical roots. One jitted search of
`MAX_SIMULATIONS` per (heaps, mode) records, after every simulation, the root's most
visited action (a custom `loop_fn` around the simulation body, `lax.scan`): the first
`S` simulations of a search of 400 are exactly a search of `S` (same keys, fixed
capacity), so this gives the "stop after S" choice for every S = 1..400 at once.

Usage:
  python -m benchmarks.nim_uct_findings [--seeds 12,24] [--quick] [--write]
"""

import argparse
import datetime
import time

import jax
import jax.numpy as jnp
import numpy as np

import mcgs_jax as mg
from benchmarks import results_section
from mcgs_jax.games import evaluators, search_game, solvers
from mcgs_jax.games.adapter import make_game
from mcgs_jax.games.nim import Nim
from mcgs_jax.testing import check_graph

MAX_SIMULATIONS = 400
C = 1.41


def recording_loop(records):
  """A `loop_fn` that runs the simulations with `lax.scan` and appends to `records`
  the root's most visited action, its visits and its Q after every simulation
  (`[S, B]` arrays, traced: use them inside the same `jax.jit`)."""

  def loop_fn(lower, upper, body, init):
    def step(carry, index):
      carry = body(index, carry)
      graph = carry[1]
      visits = graph.edge_visits[:, 0]  # [B, A]
      choice = jnp.argmax(visits, axis=-1)
      q = graph.qvalues(jnp.zeros(graph.batch_size, jnp.int32))
      take = lambda x: jnp.take_along_axis(x, choice[:, None], axis=1)[:, 0]
      return carry, (choice, take(visits), take(q))

    carry, trace = jax.lax.scan(step, init, jnp.arange(lower, upper))
    records.append(trace)
    return carry

  return loop_fn


def run_nim(heaps, num_games, num_simulations, transpositions, seed=0):
  """UCT on `num_games` copies of Nim(heaps); returns the graph (numpy) and a trace."""
  env = Nim(heaps)
  game = make_game(env, evaluators.rollout_evaluator(env))

  @jax.jit
  def search(key):
    records = []
    state = jax.vmap(lambda k: env.init_from_heaps(jnp.array(heaps)))(
      jax.random.split(key, num_games)
    )
    root_key, search_key = jax.random.split(key)
    out = search_game(
      mg.uct_policy,
      game,
      state,
      num_simulations,
      search_key,
      root_key=root_key,
      c=C,
      transpositions=transpositions,
      capacity=num_simulations + 1,
      loop_fn=recording_loop(records),
    )
    return out, records[0]

  start = time.perf_counter()
  out, trace = jax.block_until_ready(search(jax.random.PRNGKey(seed)))
  seconds = time.perf_counter() - start
  return out, jax.tree.map(np.asarray, trace), env, seconds


def stable_from(choices, optimal):
  """Smallest S such that every game picks an optimal move after every S' in [S, end];
  None when some game is wrong after the last simulation. `choices` is `[S, B]`."""
  good = np.isin(choices, list(optimal))
  if not good[-1].all():
    return None
  last_bad = np.where(~good.all(axis=1))[0]
  return 1 if last_bad.size == 0 else int(last_bad[-1]) + 2


def per_seed_median(choices, optimal):
  """Median over the games that end on an optimal move of the S from which that game
  stays on optimal moves (`choices` `[S, B]`); None when no game ends optimal."""
  froms = [stable_from(choices[:, b : b + 1], optimal) for b in range(choices.shape[1])]
  froms = [f for f in froms if f is not None]
  return float(np.median(froms)) if froms else None


def tree_bookkeeping(graph, num_simulations):
  """Asserts the tree invariants (`tests.invariants.check_graph`) and returns numbers."""
  check_graph(graph, num_simulations, tree_mode=True)
  g = jax.tree.map(np.asarray, graph)
  worst, terminal_nodes, terminal_arrivals = 0, 0, 0
  for b in range(g.num_nodes.shape[0]):
    used = int(g.num_nodes[b])
    visits = g.node_visits[b, :used]
    child_sum = g.edge_visits[b, :used].sum(-1)
    terminal = g.node_terminal[b, :used]
    worst = max(worst, int(np.abs(visits - 1 - child_sum)[~terminal].max()))
    terminal_nodes += int(terminal.sum())
    terminal_arrivals += int(visits[terminal].sum())
  return dict(
    root_visits=sorted(set(g.node_visits[:, 0].tolist())),
    root_edge_sum=sorted(set(g.edge_visits[:, 0].sum(-1).tolist())),
    worst_deviation=worst,
    terminal_nodes=terminal_nodes,
    terminal_arrivals=terminal_arrivals,
  )


def analyse(heaps, seed_counts, transpositions, num_simulations):
  """Runs one batched search and summarises it for every seed count."""
  num_games = max(seed_counts)
  out, trace, env, seconds = run_nim(heaps, num_games, num_simulations, transpositions)
  action_values = solvers.nim_action_values(heaps, env.max_heap)
  best = max(action_values.values())
  optimal = {a for a, v in action_values.items() if v == best}
  summary = out.search_graph.summary()
  visits = np.asarray(summary.visit_counts)
  q = np.asarray(summary.qvalues)
  chosen = np.asarray(out.action)
  graph = out.search_graph
  rows = []
  for count in seed_counts:
    sl = slice(0, count)
    right = sorted(optimal)[0]
    chosen_q = q[sl][np.arange(count), chosen[sl]]
    values, counts = np.unique(chosen[sl], return_counts=True)
    rows.append(
      dict(
        seeds=count,
        optimal_count=int(np.isin(chosen[sl], list(optimal)).sum()),
        modal_move=env.describe_action(int(values[np.argmax(counts)])),
        modal_count=int(counts.max()),
        chosen_visits=float(visits[sl][np.arange(count), chosen[sl]].mean()),
        chosen_win=float(((chosen_q + 1) / 2).mean()),
        right_visits=float(visits[sl, right].mean()),
        right_win=float(((q[sl, right] + 1) / 2).mean()),
        wrong_chosen_win=(
          float(((chosen_q[chosen[sl] != right] + 1) / 2).mean())
          if (chosen[sl] != right).any()
          else float("nan")
        ),
        stable_from=stable_from(trace[0][:, sl], optimal),
        per_seed_median=per_seed_median(trace[0][:, sl], optimal),
        nodes=(
          int(np.asarray(graph.num_nodes[sl]).min()),
          int(np.asarray(graph.num_nodes[sl]).max()),
        ),
        hits=float(np.asarray(graph.transposition_hits[sl]).mean()),
        overflows=int(np.asarray(graph.capacity_overflows[sl]).sum()),
      )
    )
  checks = tree_bookkeeping(graph, num_simulations) if not transpositions else None
  if transpositions:
    check_graph(graph, num_simulations, tree_mode=False)
  return dict(
    heaps=heaps,
    env=env,
    optimal=optimal,
    rows=rows,
    seconds=seconds,
    checks=checks,
    mode="graph" if transpositions else "tree",
  )


def distinct_states(heaps):
  return int(np.prod([h + 1 for h in heaps]))


def report(results, num_simulations):
  lines = []
  lines.append(
    "| game | mode | seeds | optimal chosen | modal move (seeds) | "
    "chosen: visits, win rate | right move: visits, win rate | "
    "all seeds stable on optimal from S | median S of stabilisation (optimal seeds) | "
    "wrong choices: win rate |"
    " nodes (min-max) | transposition hits |"
  )
  lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
  for res in results:
    for r in res["rows"]:
      stable = r["stable_from"] if r["stable_from"] is not None else f"never (<= {num_simulations})"
      wrong_chosen = (
        "-" if np.isnan(r["wrong_chosen_win"]) else f"{100 * r['wrong_chosen_win']:.1f}%"
      )
      lines.append(
        f"| Nim {'-'.join(map(str, res['heaps']))} | {res['mode']} | {r['seeds']} | "
        f"{r['optimal_count']}/{r['seeds']} | {r['modal_move']} ({r['modal_count']}) | "
        f"{r['chosen_visits']:.0f}, {100 * r['chosen_win']:.1f}% | "
        f"{r['right_visits']:.0f}, {100 * r['right_win']:.1f}% | {stable} | "
        f"{r['per_seed_median']} | {wrong_chosen} | "
        f"{r['nodes'][0]}-{r['nodes'][1]} "
        f"(states: {distinct_states(res['heaps'])}) | {r['hits']:.0f} |"
      )
  lines.append("")
  lines.append(
    "Win rates are `(Q + 1) / 2` of the root edge, averaged over the seeds; "
    '"right move" is the minimax-optimal one (Nim 2-4: take 2 from heap B; '
    'Nim 3-4-5: take 2 from heap A). "Stable" = the most visited root action '
    "is optimal after every simulation count from S to "
    f"{num_simulations} (the chapter's strict criterion)."
  )
  lines.append("")
  lines.append(
    "Tree bookkeeping (tree mode, all seeds, asserted with `mcgs_jax.testing.check_graph`):"
  )
  lines.append("")
  for res in results:
    if res["checks"]:
      c = res["checks"]
      lines.append(
        f"- Nim {'-'.join(map(str, res['heaps']))}: root visits {c['root_visits']} "
        f"(= S + 1: the root's own evaluation counts once), root edge visits "
        f"{c['root_edge_sum']} (= S); max |N(n) - 1 - sum_a N(n,a)| over non-terminal "
        f"nodes = {c['worst_deviation']}; {c['terminal_nodes']} terminal nodes received "
        f"{c['terminal_arrivals']} playout arrivals (their N = arrivals, the "
        f'chapter\'s "playouts that started there").'
      )
  lines.append("")
  lines.append(
    "Search time (compile + run, one jitted call per row group): "
    + ", ".join(
      f"Nim {'-'.join(map(str, r['heaps']))} {r['mode']} {r['seconds']:.1f} s" for r in results
    )
  )
  return "\n".join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument(
    "--seeds", default="12,24", help="comma-separated seed counts (a prefix of one batch)"
  )
  parser.add_argument(
    "--quick", action="store_true", help="Nim 2-4 and 3-4-5 with 12 seeds and 200 simulations"
  )
  parser.add_argument(
    "--write", action="store_true", help="append the section to benchmarks/RESULTS.md"
  )
  args = parser.parse_args(argv)
  seed_counts = sorted(int(s) for s in args.seeds.split(","))
  num_simulations = MAX_SIMULATIONS
  if args.quick:
    seed_counts, num_simulations = [min(seed_counts)], 200
  results = [
    analyse(heaps, seed_counts, transpositions, num_simulations)
    for transpositions in (False, True)
    for heaps in ((2, 4), (3, 4, 5))
  ]
  table = report(results, num_simulations)
  command = "python -m benchmarks.nim_uct_findings " + " ".join(
    a for a in (f"--seeds {args.seeds}", "--quick" if args.quick else "") if a
  )
  section = (
    f"## UCT + random rollouts on Nim, checked against minimax (date "
    f"{datetime.date.today().isoformat()}, 2-core CPU, jax {jax.__version__})\n\n"
    f"UCT c = {C}, uniformly random rollouts (`rollout_evaluator`, 1 rollout), "
    f"{num_simulations} simulations, capacity {num_simulations + 1}. "
    f"Regenerate: `{command} --write`.\n\n{table}\n"
  )
  print(section)
  if args.write:
    results_section.append(section)


if __name__ == "__main__":
  main()
