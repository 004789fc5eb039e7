"""A match's results: what a match counts as it plays (`Tally`), the `MatchResult`
made from it, and the Elo difference with its 95% interval (`elo_interval`)."""

import dataclasses
import math
from typing import Any

import numpy as np

from mcgs_jax.apps.arena.agent import Agent

Z_95 = 1.959963984540054  # two-sided 95% quantile of the standard normal


@dataclasses.dataclass(frozen=True)
class MatchResult:
  """The result of a match, from agent A's point of view.

  Attributes:
    wins, draws, losses: games A won, drew and lost (they sum to `games`).
    score: `(wins + draws / 2) / games`.
    elo: Elo difference of A over B implied by the score (`elo_from_score`).
    elo_ci95: `(low, high)`, a 95% interval for `elo` (`elo_interval`).
    score_ci95: `(low, high)`, the same interval on the score.
    games: number of games.
    mean_game_length: mean number of plies per game, openings included.
    agents: `{"a": stats, "b": stats}`; each `stats` dict has `name`, `searches`
      (searches whose move was played), `mean_nodes` and `mean_transposition_hits`
      (per search), `nodes_per_ply` (a list: the mean nodes of that agent's
      searches at each ply, `nan` where it did not move), `engine` and
      `num_simulations`.
    outcomes: `[games]` float, the rewards A collected in each game.
    a_first: `[games]` bool, A moved first.
    game_lengths: `[games]` int, plies played.
    openings: `[games, opening_moves]` int, the random opening of each game.
    seconds: wall-clock time of the match, compilation included.
    num_devices: devices the games were spread over.
    first_ply_seconds: wall-clock time of the first searched ply (the first after
      the openings), which includes compiling both searches when this
      configuration was not compiled before in the process.
    calibration: with `equal_time`, what `calibrate_simulations` measured; else
      None.
    timing: `{"a": times, "b": times}` (wall time, so not part of what the same
      seed reproduces); each `times` has `search_seconds_per_ply` (one search of
      the whole batch of games, its `reroot` included, averaged over the searched
      plies after the first; every ply both agents search every game) and
      `first_search_seconds` (the first searched ply, which compiles).
  """

  wins: int
  draws: int
  losses: int
  score: float
  elo: float
  elo_ci95: tuple[float, float]
  score_ci95: tuple[float, float]
  games: int
  mean_game_length: float
  agents: dict[str, dict[str, Any]]
  outcomes: np.ndarray
  a_first: np.ndarray
  game_lengths: np.ndarray
  openings: np.ndarray
  seconds: float
  num_devices: int
  first_ply_seconds: float = 0.0
  calibration: dict[str, Any] | None = None
  timing: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)

  def to_dict(self) -> dict[str, Any]:
    """A JSON-ready dict: arrays and tuples as lists, `nan` as None."""
    return {
      field.name: _json_ready(getattr(self, field.name)) for field in dataclasses.fields(self)
    }


def _json_ready(value):
  """`value` with arrays and tuples as lists and non-finite floats as None."""
  if isinstance(value, np.ndarray):
    value = value.tolist()
  if isinstance(value, dict):
    return {key: _json_ready(item) for key, item in value.items()}
  if isinstance(value, (list, tuple)):
    return [_json_ready(item) for item in value]
  if isinstance(value, float) and not math.isfinite(value):
    return None
  return value


# ---------------------------------------------------------------------------------
# Elo


def elo_from_score(score: float) -> float:
  """`-400 log10(1 / score - 1)`: the Elo difference whose expected score is
  `score` (0 at 0.5; infinite at 0 and 1, so callers clip)."""
  if score <= 0.0:
    return -math.inf
  if score >= 1.0:
    return math.inf
  return -400.0 * math.log10(1.0 / score - 1.0)


def elo_interval(
  points: np.ndarray,
) -> tuple[float, float, tuple[float, float], tuple[float, float]]:
  """Score, Elo and their 95% intervals from per-game points (1, 0.5 or 0).

  The interval is the normal approximation on the mean score, `score +- 1.96
  s / sqrt(N)` with `s` the sample standard deviation of the points plus one win
  and one loss (so that 16 wins of 16 do not give a zero-width interval), mapped
  through `elo_from_score`. Scores are clipped to `[0.5 / N, 1 - 0.5 / N]` before
  mapping, so a clean sweep gives a large finite Elo rather than infinity.

  Returns:
    `(score, elo, (elo_low, elo_high), (score_low, score_high))`.
  """
  points = np.asarray(points, np.float64)
  count = points.size
  if count == 0:
    raise ValueError("no games")
  score = float(points.mean())
  # One extra win and one extra loss in the spread only (as Agresti-Coull does for
  # proportions): a clean sweep or all draws still get an interval of nonzero width.
  spread = float(np.concatenate([points, [0.0, 1.0]]).std(ddof=1))
  half_width = Z_95 * spread / math.sqrt(count)
  low_clip, high_clip = 0.5 / count, 1.0 - 0.5 / count
  clip = lambda value: min(max(value, low_clip), high_clip)
  score_low = max(score - half_width, 0.0)
  score_high = min(score + half_width, 1.0)
  elo = elo_from_score(clip(score))
  elo_low, elo_high = elo_from_score(clip(score_low)), elo_from_score(clip(score_high))
  return score, elo, (elo_low, elo_high), (score_low, score_high)


# ---------------------------------------------------------------------------------
# What a match counts


@dataclasses.dataclass
class Tally:
  """What a match has counted so far, on the host, per game and per side (`"a"`,
  `"b"`)."""

  outcomes: np.ndarray  # [N] float64: the rewards A collected
  lengths: np.ndarray  # [N] int64: plies played, openings included
  openings: np.ndarray  # [N, opening_moves] int64: the opening plies, -1 after an end
  over: np.ndarray  # [N] bool: the games over (set once their last ply is counted)
  searches: dict[str, dict[str, Any]]  # side: searches, nodes, hits, nodes_per_ply
  timing: dict[str, dict[str, float]]  # side: first (search seconds), seconds, plies
  first_ply_seconds: float = 0.0

  @classmethod
  def empty(cls, num_games: int, opening_moves: int) -> "Tally":
    return cls(
      outcomes=np.zeros(num_games, np.float64),
      lengths=np.zeros(num_games, np.int64),
      openings=np.zeros((num_games, opening_moves), np.int64),
      over=np.zeros(num_games, bool),
      searches={
        side: {"searches": 0, "nodes": 0.0, "hits": 0.0, "nodes_per_ply": []} for side in ("a", "b")
      },
      timing={side: {"first": 0.0, "seconds": 0.0, "plies": 0} for side in ("a", "b")},
    )

  def add_search_time(self, side: str, seconds: float) -> None:
    """One search of `side`; its first one (which compiles) is kept apart."""
    timed = self.timing[side]
    if timed["plies"] == 0 and timed["first"] == 0.0:
      timed["first"] = seconds
    else:
      timed["seconds"] += seconds
      timed["plies"] += 1

  def add_ply(self, ply: int, finished, action, rewards, moves, in_opening: bool) -> None:
    """A ply played in the games not `finished` before it, `moves` its `(a_moved,
    searched, nodes, hits)` `[N]` (nothing searched in an opening ply)."""
    active = ~finished
    self.outcomes += np.where(active, rewards, 0.0)
    self.lengths += active
    if in_opening:
      self.openings[:, ply] = np.where(active, action, -1)
    a_moved, searched, nodes, hits = moves
    for side, mask in (("a", searched & a_moved), ("b", searched & ~a_moved)):
      count = int(mask.sum())
      totals = self.searches[side]
      totals["searches"] += count
      totals["nodes"] += float(nodes[mask].sum())
      totals["hits"] += float(hits[mask].sum())
      totals["nodes_per_ply"].append(float(nodes[mask].mean()) if count else float("nan"))


def match_result(
  tally: Tally,
  agent_a: Agent,
  agent_b: Agent,
  *,
  a_first: np.ndarray,
  seconds: float,
  num_devices: int,
  calibration: dict[str, Any] | None,
) -> MatchResult:
  """The `MatchResult` of a match's tally."""
  outcomes = tally.outcomes
  num_games = int(outcomes.size)
  wins = int((outcomes > 0).sum())
  losses = int((outcomes < 0).sum())
  points = np.where(outcomes > 0, 1.0, np.where(outcomes < 0, 0.0, 0.5))
  score, elo, elo_ci, score_ci = elo_interval(points)
  agents, timings = {}, {}
  for side, agent in (("a", agent_a), ("b", agent_b)):
    totals, timed = tally.searches[side], tally.timing[side]
    searches = totals["searches"]
    agents[side] = {
      "name": agent.describe(),
      "engine": agent.engine,
      "num_simulations": agent.num_simulations,
      "searches": searches,
      "mean_nodes": totals["nodes"] / searches if searches else 0.0,
      "mean_transposition_hits": totals["hits"] / searches if searches else 0.0,
      "nodes_per_ply": totals["nodes_per_ply"],
    }
    timings[side] = {
      "search_seconds_per_ply": (
        timed["seconds"] / timed["plies"] if timed["plies"] else float("nan")
      ),
      "first_search_seconds": timed["first"],
    }
  return MatchResult(
    wins=wins,
    draws=num_games - wins - losses,
    losses=losses,
    score=score,
    elo=elo,
    elo_ci95=elo_ci,
    score_ci95=score_ci,
    games=num_games,
    mean_game_length=float(tally.lengths.mean()),
    agents=agents,
    outcomes=outcomes,
    a_first=a_first,
    game_lengths=tally.lengths,
    openings=tally.openings,
    seconds=seconds,
    num_devices=num_devices,
    first_ply_seconds=tally.first_ply_seconds,
    calibration=calibration,
    timing=timings,
  )


def finished_games_result(
  tally: Tally, agent_a: Agent, agent_b: Agent, *, a_first: np.ndarray, **result_fields
) -> MatchResult | None:
  """The `MatchResult` of the games of `tally` that are over (None while none is):
  their outcomes, lengths and openings, and the searches of every ply played."""
  over = tally.over.copy()
  if not over.any():
    return None
  finished = dataclasses.replace(
    tally, outcomes=tally.outcomes[over], lengths=tally.lengths[over], openings=tally.openings[over]
  )
  return match_result(finished, agent_a, agent_b, a_first=a_first[over], **result_fields)
