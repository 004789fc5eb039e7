"""The AlphaZero training tables of benchmarks/RESULTS.md, from a training history.

Reads the JSON that `python -m mcgs_jax.apps.train ... --history FILE` writes and
prints, in RESULTS' format:

  * a line with the wall time (self-play, training, arena, the rest) and positions;
  * the per-block table (default blocks of 10 iterations): mean loss (policy +
    value; the rest is the L2 term), plies per self-play game, the arena results
    against uniform MCTS and against the previous network summed over the block
    (W-D-L) with the block's score;
  * the every-iteration table, inside a <details> element.

Example (the run of RESULTS' "AlphaZero training" sections):

    python -m mcgs_jax.apps.train --games 256 --simulations 32 --iterations 40 \\
        --train-steps 200 --hidden 256,256 --buffer-size 50000 --eval-games 64 \\
        --history history.json
    python -m benchmarks training --part training_tables history.json
"""

import argparse
import json


def _wdl(results: list[dict | None]):
  """`(wins, draws, losses)` summed over the evaluated entries, or None if none."""
  results = [r for r in results if r]
  if not results:
    return None
  return tuple(sum(r[key] for r in results) for key in ("wins", "draws", "losses"))


def _score(wdl) -> str:
  wins, draws, losses = wdl
  return f"{(wins + draws / 2) / (wins + draws + losses):.2f}"


def _cells(wdl) -> str:
  """`W-D-L | score` or `- | -`."""
  if wdl is None:
    return "- | -"
  return f"{wdl[0]}-{wdl[1]}-{wdl[2]} | {_score(wdl)}"


def summary_line(config: dict, history: list[dict]) -> str:
  """Wall time, its parts, and the positions played."""
  selfplay = sum(entry["selfplay_s"] for entry in history)
  training = sum(entry["train_s"] for entry in history)
  arena = sum(entry.get("eval_s", 0.0) for entry in history)
  positions = sum(entry["positions"] for entry in history)
  text = f"self-play {selfplay:.0f} s, training {training:.0f} s, arena {arena:.0f} s"
  wall = history[-1].get("elapsed_s")
  if wall is not None:
    minutes, seconds = divmod(round(wall), 60)
    text = f"Wall time {minutes} min {seconds} s in all ({text}, the rest compiling)"
  else:
    text = f"Time: {text} (wall time not recorded)"
  return (
    f"{text}; {positions:,} positions, {len(history)} iterations of {config['num_games']} games."
  )


def block_table(config: dict, history: list[dict], block: int) -> str:
  """The per-block table."""
  eval_games = config.get("eval_games", 0)
  lines = [
    f"Per block of {block} iterations ({block * eval_games} arena games per cell):",
    "",
    "| iterations | loss: total (policy + value; rest L2) | plies / game | "
    "vs uniform MCTS (W-D-L) | score | vs previous (W-D-L) | score |",
    "|---|---|---|---|---|---|---|",
  ]
  for start in range(0, len(history), block):
    entries = history[start : start + block]
    mean = lambda name: sum(entry[name] for entry in entries) / len(entries)
    plies = sum(entry["positions"] for entry in entries) / (len(entries) * config["num_games"])
    first, last = entries[0]["iteration"], entries[-1]["iteration"]
    lines.append(
      f"| {first if first == last else f'{first}-{last}'} | {mean('loss'):.2f} ({mean('policy_loss'):.2f} + "
      f"{mean('value_loss'):.2f}) | {plies:.1f} | "
      f"{_cells(_wdl([e.get('vs_baseline') for e in entries]))} | "
      f"{_cells(_wdl([e.get('vs_previous') for e in entries]))} |"
    )
  return "\n".join(lines)


def iteration_table(history: list[dict]) -> str:
  """The every-iteration table, folded in a <details> element."""
  lines = [
    "<details><summary>Every iteration</summary>",
    "",
    "| it | loss | policy | value | vs uniform | score | vs previous | score |",
    "|---|---|---|---|---|---|---|---|",
  ]
  for entry in history:
    lines.append(
      f"| {entry['iteration']} | {entry['loss']:.3f} | {entry['policy_loss']:.3f} | "
      f"{entry['value_loss']:.3f} | {_cells(_wdl([entry.get('vs_baseline')]))} | "
      f"{_cells(_wdl([entry.get('vs_previous')]))} |"
    )
  lines += ["", "</details>"]
  return "\n".join(lines)


def tables(payload: dict, block: int = 10) -> str:
  """Everything the script prints, from the loaded history JSON."""
  config, history = payload["config"], payload["history"]
  if not history:
    raise ValueError("the history has no iterations")
  return "\n\n".join(
    [summary_line(config, history), block_table(config, history, block), iteration_table(history)]
  )


def run(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("history", help="the JSON file written by train --history")
  parser.add_argument(
    "--block", type=int, default=10, help="iterations per row of the block table (default 10)"
  )
  args = parser.parse_args(argv)
  if args.block < 1:
    parser.error("--block must be at least 1")
  with open(args.history, encoding="utf-8") as handle:
    payload = json.load(handle)
  print(tables(payload, args.block))
  return 0
