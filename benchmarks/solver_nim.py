"""How many simulations the MCTS-solver needs on Nim 3-4-5, graph vs tree.

Nim 3-4-5 is the position where random rollouts mislead UCT (`tests/test_nim_uct_findings.py`;
the only winning move is to take 2 from the first heap). With `solver=True`, proofs
climb from the terminal states; on the graph (120 states) they settle the root, on the
tree (about a million nodes) they cannot at these budgets. For each S: 12 seeds (one
batch), `muzero_policy` with the random-rollout evaluator, temperature 0; reports how
many seeds play the winning move and how many roots are proven, and per mode the
fewest S from which on (at every larger S of the list too) all 12 roots are proven.

Usage: python -m benchmarks solver --part solver_nim [--simulations 200,400,800,1600,3200]
"""

import argparse
import datetime

import jax
import jax.numpy as jnp
import numpy as np

import mcgs_jax as mg
from benchmarks import record
from mcgs_jax.games import evaluators, search_game
from mcgs_jax.games.adapter import make_game
from mcgs_jax.games.nim import Nim

HEAPS = (3, 4, 5)
WINNING_ACTION = 1  # take 2 from heap 0
SEEDS = 12


def solve(num_simulations, transpositions, stop_rule, seed=0):
  env = Nim(HEAPS)
  game = make_game(env, evaluators.rollout_evaluator(env))

  @jax.jit
  def search(key):
    keys = jax.random.split(key, SEEDS)
    state = jax.vmap(lambda k: env.init_from_heaps(jnp.array(HEAPS)))(keys)
    return search_game(
      mg.muzero_policy,
      game,
      state,
      num_simulations,
      keys[1],
      root_key=keys[0],
      transpositions=transpositions,
      stop_rule=stop_rule,
      solver=True,
      temperature=0.0,
    )

  out = search(jax.random.PRNGKey(seed))
  graph = out.search_graph
  return (
    int(np.sum(np.asarray(out.action) == WINNING_ACTION)),
    int(np.sum(np.asarray(graph.node_proven[:, 0]))),
    float(np.mean(graph.num_nodes)),
  )


def run(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--simulations", default="200,400,800,1600,3200")
  args = parser.parse_args(argv)
  rows, fewest = [], []
  budgets = sorted(int(s) for s in args.simulations.split(","))
  for transpositions, stop in ((True, "catch_up"), (True, "never"), (False, "catch_up")):
    mode = "graph" if transpositions else "tree"
    all_proven = []
    for num_simulations in budgets:
      right, proven, nodes = solve(num_simulations, transpositions, stop)
      all_proven.append(proven == SEEDS)
      rows.append(
        f"| {mode} | {stop} | {num_simulations} | {right}/{SEEDS} | "
        f"{proven}/{SEEDS} | {nodes:.0f} |"
      )
      print(rows[-1], flush=True)
    # The smallest budget from which on every larger budget of the list proves too.
    settled = [s for i, s in enumerate(budgets) if all(all_proven[i:])]
    fewest.append(
      f"- {mode}, stop_rule {stop}: "
      + (f"S = {settled[0]}" if settled else f"none up to {budgets[-1]}")
    )
  section = "\n".join(
    [
      f"## MCTS-solver on Nim 3-4-5 (date {datetime.date.today().isoformat()}, "
      f"2-core CPU, jax {jax.__version__})",
      "",
      "`muzero_policy(solver=True)`, random-rollout evaluator, temperature 0, 12 seeds "
      "per row (one batch), capacity S + 1. Regenerate: "
      f"`python -m benchmarks solver --part solver_nim --simulations {args.simulations}`.",
      "",
      "| mode | stop_rule | S | winning move played | root proven | nodes (mean) |",
      "|---|---|---|---|---|---|",
      *rows,
      "",
      f"Fewest S (of these) from which all {SEEDS} roots are proven:",
      "",
      *fewest,
      "",
    ]
  )
  return record.section([section])
