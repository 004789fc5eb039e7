"""The training run's history: `History` (one dict per iteration, and the final
network), its one-line report (`format_entry`), its plot and its JSON file."""

import dataclasses
import json
from typing import Any

from mcgs_jax.apps import files
from mcgs_jax.apps.train.config import Config


class History(list):
  """The list of per-iteration dicts that `train` returns, plus the final network:
  `params`, `apply_fn` (`apply_fn(params, observation) -> (logits, value)`) and the
  `config` of the run."""

  params: Any = None
  apply_fn: Any = None
  config: Config | None = None
  initial_checkpoint: str | None = None


def format_entry(entry: dict) -> str:
  """One line per iteration: loss and scores."""
  text = ""
  if "compile_s" in entry:
    text += f"compile {entry['compile_s']:.1f}s (self-play and train step)  "
  text = (
    f"iter {entry['iteration']:3d}  {text}loss {entry['loss']:.3f} "
    f"(policy {entry['policy_loss']:.3f}, value {entry['value_loss']:.3f})  "
    f"positions {entry['positions']}  self-play {entry['selfplay_s']:.1f}s  "
    f"train {entry['train_s']:.1f}s"
  )
  if entry.get("carried_visits"):
    text += f"  carried root visits {entry['carried_visits']:.1f}"
  if entry.get("capacity_overflows"):
    text += f"  capacity overflows {entry['capacity_overflows']}"
  if "full_search_fraction" in entry:
    text += f"  full searches {entry['full_search_fraction']:.2f}"
  for label in ("vs_baseline", "vs_previous"):
    result = entry.get(label)
    if result:
      text += (
        f"  {label} {result['wins']}-{result['draws']}-{result['losses']} "
        f"score {result['score']:.2f}"
      )
  if "eval_return" in entry:
    text += f"  eval return {entry['eval_return']:.3f}"
    if entry.get("eval_solved") is not None:
      text += f" solved {entry['eval_solved']:.2f}"
    if entry.get("eval_gap") is not None:
      text += f" gap {100 * entry['eval_gap']:.2f}%"
  if "eval_s" in entry:
    text += f"  {'episodes' if 'eval_return' in entry else 'arena'} {entry['eval_s']:.1f}s"
    if entry.get("eval_compiles"):
      text += (
        f" (of which {entry.get('eval_first_ply_s', 0.0):.1f}s first plies, compiling the arena)"
      )
  return text


def plot_history(history: list[dict], path: str | None = None):
  """Loss and arena scores per iteration; saved to `path` when given. Returns the
  matplotlib figure."""
  import matplotlib

  if path is not None:
    matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  figure, (loss_axis, score_axis) = plt.subplots(1, 2, figsize=(10, 3.5))
  steps = [entry["iteration"] for entry in history]
  for name in ("loss", "policy_loss", "value_loss"):
    loss_axis.plot(steps, [entry[name] for entry in history], marker="o", label=name)
  loss_axis.set_xlabel("iteration")
  loss_axis.set_title("training loss")
  loss_axis.legend()
  if any("eval_return" in entry for entry in history):
    _plot_episodes(score_axis, history)
  else:
    _plot_scores(score_axis, history)
  if score_axis.get_legend_handles_labels()[0]:
    score_axis.legend()
  else:
    score_axis.text(0.5, 0.5, "not evaluated", ha="center", transform=score_axis.transAxes)
  figure.tight_layout()
  if path is not None:
    files.save_figure(figure, path)
  return figure


def _plot_scores(axis, history: list[dict]) -> None:
  """A two-player game's arena scores per iteration."""
  for label, text in (("vs_baseline", "vs uniform MCTS"), ("vs_previous", "vs previous network")):
    points = [(entry["iteration"], entry[label]["score"]) for entry in history if entry.get(label)]
    if points:
      axis.plot(*zip(*points, strict=True), marker="o", label=text)
  axis.axhline(0.5, color="grey", linestyle=":")
  axis.set_ylim(-0.05, 1.05)
  axis.set_xlabel("iteration")
  axis.set_title("arena score (win = 1, draw = 0.5)")


def _plot_episodes(axis, history: list[dict]) -> None:
  """A one-player game's mean evaluation return per iteration."""
  points = [
    (entry["iteration"], entry["eval_return"]) for entry in history if "eval_return" in entry
  ]
  axis.plot(*zip(*points, strict=True), marker="o", label="mean return")
  axis.set_xlabel("iteration")
  axis.set_title("evaluation episodes (the network's search)")


def save_history(path: str, history: History) -> None:
  """Writes `{"config": ..., "history": [...]}` as JSON (what `--history` writes and
  `benchmarks/training_tables.py` reads)."""
  if history.config is None:
    raise ValueError("a history without its config (not made by train)")
  payload = dict(config=dataclasses.asdict(history.config), history=list(history))
  if history.initial_checkpoint:
    payload["initial_checkpoint"] = history.initial_checkpoint
  files.write_atomically(path, json.dumps(payload, indent=1))
