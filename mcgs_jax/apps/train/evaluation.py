"""The training loop's evaluation: in a two-player game, arena matches of the network
against the uniform MCTS baseline and against the network of the previous
evaluation; in a one-player game (jumanji), the network's episodes on instances
self-play never drew, against their exact optima (`mcgs_jax.apps.planning`)."""

import dataclasses
import time
from typing import Any

from mcgs_jax.apps.train.config import Config


def network_agent(policy: str, num_simulations: int, apply_fn, name: str = "network"):
  """The arena agent of a trained network: `policy` in graph mode, keeping its graph
  between moves, without the solver (as self-play searches), with the network as
  evaluator (playing greedily, no noise: see `mcgs_jax.apps.arena`)."""
  from mcgs_jax.apps import arena

  return arena.Agent(
    policy=policy,
    evaluator="network",
    num_simulations=num_simulations,
    transpositions=True,
    solver=False,
    apply_fn=apply_fn,
    name=name,
  )


def uniform_baseline(num_simulations: int, name: str = "uniform-mcts"):
  """The baseline the networks are measured against: muzero MCTS (a tree, no solver)
  with a uniform prior and value 0."""
  from mcgs_jax.apps import arena

  return arena.Agent(
    policy="muzero",
    evaluator="uniform",
    num_simulations=num_simulations,
    transpositions=False,
    reuse=False,
    solver=False,
    name=name,
  )


# One-player evaluations draw their instances from seeds past every self-play key's
# range of `fold_in` indices, so none is a self-play instance.
EPISODE_SEED_OFFSET = 1 << 30


def evaluate_episodes(config: Config, apply_fn, params, seed: int) -> dict:
  """The network's search on `config.eval_games` instances of a one-player game:
  `eval_return` (mean return), `eval_solved` (the share solved, None without value
  bounds), `eval_gap` (mean gap to the exact optimum, None where unknown) and
  `eval_first_ply_s` (the first step's search, which compiles)."""
  from mcgs_jax.apps import registry
  from mcgs_jax.apps.planning import play_episodes

  network = network_agent(config.policy, config.num_simulations, apply_fn)
  result = play_episodes(
    registry.game_from_spec(config.game),
    network,
    num_instances=config.eval_games,
    seed=EPISODE_SEED_OFFSET + seed,
    params=params,
  ).summary()
  return dict(
    eval_return=result["mean_return"],
    eval_solved=result["solved"],
    eval_gap=result["mean_gap"],
    eval_first_ply_s=result["first_search_seconds"],
  )


def is_one_player(game_spec: str) -> bool:
  """Whether `game_spec` names a one-player game (jumanji's environments)."""
  from mcgs_jax.apps import registry

  return getattr(registry.game_from_spec(game_spec).env, "num_players", 2) == 1


def evaluate(config: Config, apply_fn, params, previous_params, seed: int) -> dict:
  """Arena scores of the network against the uniform MCTS baseline and against the
  previous network (`play_match` of `config.game`, whose `Game` is the one `train`
  plays: `registry.game_from_spec` builds it once). Returns a dict with
  `vs_baseline` and `vs_previous` (each with `wins`, `draws`, `losses`, `score`,
  `elo`; `vs_previous` is None when `previous_params` is) and `eval_first_ply_s`,
  the time of the matches' first plies (which compile the match steps when they are
  new).
  """
  from mcgs_jax.apps import arena

  network = network_agent(config.policy, config.num_simulations, apply_fn)
  baseline = uniform_baseline(config.num_simulations)
  results: dict[str, Any] = {"eval_first_ply_s": 0.0}
  opponents = [("vs_baseline", baseline, None)]
  if previous_params is not None:
    previous = dataclasses.replace(network, name="previous")
    opponents.append(("vs_previous", previous, previous_params))
  for label, opponent, opponent_params in opponents:
    result = arena.play_match(
      config.game,
      network,
      opponent,
      num_games=config.eval_games,
      seed=seed,
      params_a=params,
      params_b=opponent_params,
      opening_moves=config.eval_opening_moves,
    )
    results["eval_first_ply_s"] += result.first_ply_seconds
    results[label] = dict(
      wins=int(result.wins),
      draws=int(result.draws),
      losses=int(result.losses),
      score=float(result.score),
      elo=float(result.elo),
    )
  results.setdefault("vs_previous", None)
  return results


def timed_evaluation(entry, config, apply_fn, params, previous_params, history):
  """`evaluate` into `entry`, with its time (`eval_s`) and whether it is the run's
  first evaluation, which also compiles the arena's match steps."""
  start = time.perf_counter()
  seed = config.seed * 1000 + entry["iteration"]
  if is_one_player(config.game):
    entry.update(evaluate_episodes(config, apply_fn, params, seed=seed))
  else:
    entry.update(evaluate(config, apply_fn, params, previous_params, seed=seed))
  entry["eval_s"] = time.perf_counter() - start
  entry["eval_compiles"] = not any("eval_s" in earlier for earlier in history)
