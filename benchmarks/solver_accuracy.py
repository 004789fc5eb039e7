"""The MCTS-solver's moves against exact solvers, with and without `proof_first`.

Tic-tac-toe: positions drawn from every reachable position that is not over and
whose moves are not all equal (`tic_tac_toe_accuracy.reachable_positions`, exact
values by full minimax). Connect four: end games of random play with 10-14 empty
cells, quiet, moves not all equal (`endgame_accuracy.random_positions`, exact values
by the solver). Every row searches all positions as one jitted batch with
`solver=True`, the random-rollout evaluator (1 rollout), capacity S + 1, and
reports the share of positions whose played move is optimal and the share whose
root the search proved. muzero: no root noise, most visited move; gumbel: mctx's
defaults; uct: c = 1.41. Only counts (no timing).

Usage: python -m benchmarks solver --part solver_accuracy [--games tic_tac_toe,connect_four]
  [--positions 128] [--simulations 32,128] [--policies muzero,gumbel,uct] [--seed 0]
"""

import argparse

import jax
import numpy as np

from benchmarks import endgame_accuracy, tic_tac_toe_accuracy
from mcgs_jax.apps import registry
from mcgs_jax.games import evaluators, search_game
from mcgs_jax.games.adapter import make_game


def tic_tac_toe(count, seed):
  """`(game, batched states, [P] sets of optimal actions)` of `count` positions."""
  game = make_game("tic_tac_toe")
  states, boards = tic_tac_toe_accuracy.reachable_positions(game.env)
  _, action_values = tic_tac_toe_accuracy.exact_targets(boards)
  best = np.nanmax(action_values, axis=1)
  unequal = np.flatnonzero(np.nanmin(action_values, axis=1) < best)
  chosen = np.random.default_rng(seed).choice(unequal, size=count, replace=False)
  optimal = [set(np.flatnonzero(action_values[i] == best[i])) for i in chosen]
  return game, jax.tree_util.tree_map(lambda x: x[chosen], states), optimal


def connect_four(count, seed):
  """`(game, batched states, [P] sets of optimal actions)` of `count` end games."""
  game = make_game("connect_four")
  positions = endgame_accuracy.random_positions(count, seed=seed)
  states = endgame_accuracy.batch_states(game, [moves for moves, _ in positions])
  optimal = [{a for a, v in values.items() if v == max(values.values())} for _, values in positions]
  return game, states, optimal


def accuracy(game, states, optimal, policy, num_simulations, proof_first, seed):
  """`(optimal move share, proven root share)` of one batched search."""
  game = make_game(game.env, evaluators.rollout_evaluator(game.env))
  options = dict(registry.POLICY_TABLE[policy].playing_options)
  if policy == "uct":
    options["c"] = 1.41

  @jax.jit
  def search(key):
    root_key, search_key = jax.random.split(key)
    out = search_game(
      registry.POLICIES[policy],
      game,
      states,
      num_simulations,
      search_key,
      root_key=root_key,
      solver=True,
      proof_first=proof_first,
      **options,
    )
    return out.action, out.search_graph.node_proven[:, 0]

  actions, proven = search(jax.random.PRNGKey(seed))
  right = [int(a) in o for a, o in zip(np.asarray(actions), optimal, strict=True)]
  return float(np.mean(right)), float(np.mean(np.asarray(proven)))


def run(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--games", default="tic_tac_toe,connect_four")
  parser.add_argument("--positions", type=int, default=128)
  parser.add_argument("--simulations", default="32,128")
  parser.add_argument("--policies", default="muzero,gumbel,uct")
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  print(
    "| game | policy | S | optimal move (proof_first off / on) | root proven (off / on) |\n"
    "|---|---|---|---|---|"
  )
  for name in args.games.split(","):
    game, states, optimal = {"tic_tac_toe": tic_tac_toe, "connect_four": connect_four}[name](
      args.positions, args.seed
    )
    for policy in args.policies.split(","):
      for num_simulations in map(int, args.simulations.split(",")):
        (off, off_proven), (on, on_proven) = (
          accuracy(game, states, optimal, policy, num_simulations, first, args.seed)
          for first in (False, True)
        )
        print(
          f"| {name} | {policy} | {num_simulations} | {100 * off:.1f}% / {100 * on:.1f}% | "
          f"{100 * off_proven:.0f}% / {100 * on_proven:.0f}% |",
          flush=True,
        )
