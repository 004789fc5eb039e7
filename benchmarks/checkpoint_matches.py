"""Arena matches between training checkpoints and uniform MCTS, as in RESULTS.md.

Each match is `A:B`, where A and B are `uniform` (uniform-prior muzero MCTS on a
tree, the training loop's baseline) or a checkpoint: an iteration number (the file
`--checkpoint-dir/iteration_XXXX.msgpack` that `mcgs_jax.apps.train --checkpoint-dir`
writes) or a path (e.g. one written by `--save-params`). A network agent plays as in
the training loop's arena: `--policy` (muzero) in graph mode with the network as
evaluator, greedy, no noise; both sides search `--simulations` per move. Every match
plays `--games` games from `--games / 2` random openings of `--openings` plies,
each with both colours, with seed `--seed`. Prints the table (W-D-L, score and Elo
of A over B with 95% intervals; see `mcgs_jax.apps.arena.elo_interval`).

Example (the table after RESULTS' 100-iteration run; checkpoints from
`--checkpoint-dir ck`):

    python -m benchmarks training --part checkpoint_matches --checkpoint-dir ck \\
        --matches 100:uniform,30:uniform,100:1,100:30 --games 400 --seed 7
"""

import argparse
import os
import sys
import time

from mcgs_jax.apps import arena, train


def _label(reference: str, simulations: int) -> str:
  if reference == "uniform":
    return f"uniform MCTS ({simulations} sim)"
  if reference.isdigit():
    return f"iteration {int(reference)}"
  return os.path.basename(reference)


def _path(reference: str, directory: str) -> str:
  if reference.isdigit():
    if not directory:
      raise ValueError(f"checkpoint {reference} is an iteration: give --checkpoint-dir")
    return train.checkpoint_path(directory, int(reference))
  return reference


def parse_matches(text: str):
  """`"100:uniform,100:1"` -> `[("100", "uniform"), ("100", "1")]`."""
  matches = []
  for item in text.split(","):
    a, sep, b = item.strip().partition(":")
    if not sep or not a or not b:
      raise ValueError(f"a match is A:B, got {item!r}")
    matches.append((a, b))
  return matches


def format_row(label: str, result) -> str:
  score_low, score_high = result.score_ci95
  elo_low, elo_high = result.elo_ci95
  return (
    f"| {label} | {result.wins}-{result.draws}-{result.losses} | "
    f"{result.score:.2f} ({score_low:.2f}, {score_high:.2f}) | "
    f"{result.elo:+.0f} ({elo_low:+.0f}, {elo_high:+.0f}) |"
  )


def run(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--game", default="connect_four")
  parser.add_argument("--checkpoint-dir", help="where iteration_XXXX.msgpack files are")
  parser.add_argument(
    "--matches",
    required=True,
    help="comma-separated A:B, each side 'uniform', an iteration number or a checkpoint path",
  )
  parser.add_argument("--games", type=int, default=400)
  parser.add_argument("--simulations", type=int, default=32)
  parser.add_argument(
    "--policy",
    default="muzero",
    choices=train.TRAINING_POLICIES,
    help="the network agents' policy (the run's --policy)",
  )
  parser.add_argument(
    "--openings", type=int, default=2, help="random opening plies (the training arena's: 2)"
  )
  parser.add_argument("--seed", type=int, default=7)
  args = parser.parse_args(argv)
  try:
    matches = parse_matches(args.matches)
  except ValueError as error:
    parser.error(str(error))

  env = arena.two_player_game(args.game).env
  agents = {}

  def agent(reference):
    """`(Agent, params)` of one side, loaded once per reference."""
    if reference not in agents:
      if reference == "uniform":
        agents[reference] = (train.uniform_baseline(args.simulations), None)
      else:
        apply_fn, params, _ = train.load_network(_path(reference, args.checkpoint_dir), env)
        agents[reference] = (
          train.network_agent(
            args.policy, args.simulations, apply_fn, name=_label(reference, args.simulations)
          ),
          params,
        )
    return agents[reference]

  lines = ["| match | W-D-L | score (95% CI) | Elo (95% CI) |", "|---|---|---|---|"]
  print("\n".join(lines), flush=True)
  for a, b in matches:
    (agent_a, params_a), (agent_b, params_b) = agent(a), agent(b)
    started = time.perf_counter()
    result = arena.play_match(
      args.game,
      agent_a,
      agent_b,
      num_games=args.games,
      seed=args.seed,
      params_a=params_a,
      params_b=params_b,
      opening_moves=args.openings,
    )
    label = f"{_label(a, args.simulations)} vs {_label(b, args.simulations)}"
    print(format_row(label, result), flush=True)
    print(f"  ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
  return 0
