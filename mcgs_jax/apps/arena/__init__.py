"""The arena: matches between two search agents, every game of a match in one batch.

`play_match(game, agent_a, agent_b, num_games=...)` (`match`) plays a match between
two `Agent`s (`agent`: the engine, policy, evaluator and options of each side) and
returns a `MatchResult` (`results`: score and Elo with 95% intervals);
`calibrate_simulations` (`calibration`) finds B's simulations for equal time per
move. The `mcgs-jax arena` command is `mcgs_jax.apps.cli.arena_command`.
"""

from mcgs_jax.apps.arena.agent import ENGINES, MCTX_POLICIES, Agent, agent_game, two_player_game
from mcgs_jax.apps.arena.calibration import CALIBRATION_ROUNDS, calibrate_simulations
from mcgs_jax.apps.arena.match import EVALUATORS, MESH_AXIS, check_memory, draw_openings, play_match
from mcgs_jax.apps.arena.results import Z_95, MatchResult, elo_from_score, elo_interval

__all__ = [
  "CALIBRATION_ROUNDS",
  "ENGINES",
  "EVALUATORS",
  "MCTX_POLICIES",
  "MESH_AXIS",
  "Z_95",
  "Agent",
  "MatchResult",
  "agent_game",
  "calibrate_simulations",
  "check_memory",
  "draw_openings",
  "elo_from_score",
  "elo_interval",
  "two_player_game",
  "play_match",
]
