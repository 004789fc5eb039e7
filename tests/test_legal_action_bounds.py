"""Tests of `mcgs_jax.games.bounds`: the most legal actions of a position, per game."""

import pytest

from mcgs_jax.games import adapter, bounds, max_legal_actions
from mcgs_jax.games.keys import SUPPORTED_ENV_IDS


def test_every_pgx_game_has_a_bound_a_reason_and_a_measurement():
  for name in SUPPORTED_ENV_IDS:
    assert 0 < bounds.MEASURED_LEGAL_ACTIONS[name] <= bounds.MAX_LEGAL_ACTIONS[name], name
  assert set(bounds.BOUND_REASONS) == set(bounds.MAX_LEGAL_ACTIONS)
  assert bounds.MAX_LEGAL_ACTIONS["chess"] == 218 and bounds.MAX_LEGAL_ACTIONS["shogi"] == 593


def test_max_legal_actions_reads_specs_games_and_envs():
  assert max_legal_actions("chess") == 218
  assert max_legal_actions("go_19x19") == 362
  assert max_legal_actions("nim:3,4,5") is None
  game = adapter.make_game("connect_four")
  assert max_legal_actions(game) == max_legal_actions(game.env) == 7 == game.num_actions


def test_max_legal_actions_refuses_an_unknown_spec():
  with pytest.raises(ValueError, match="'chesss' is not a game of make_game"):
    max_legal_actions("chesss")


def test_measurement_counts_positions_that_are_not_over():
  """tic-tac-toe and connect four start with every action legal; othello's random
  games end within 80 moves, where pgx marks all 65 actions legal, which must not
  count (no position has more than 60)."""
  assert bounds.measure_legal_actions("tic_tac_toe", num_games=2, num_steps=3) == 9
  assert bounds.measure_legal_actions("connect_four", num_games=2, num_steps=3) == 7
  othello = bounds.measure_legal_actions("othello", num_games=4, num_steps=80)
  assert 4 <= othello <= bounds.MAX_LEGAL_ACTIONS["othello"]


@pytest.mark.parametrize(
  "spec, games, steps, message",
  [
    ("nim", 2, 2, "'nim' is not a pgx game"),
    ("tic_tac_toe", 0, 2, r"num_games \(0\)"),
    ("tic_tac_toe", 2, 0, r"num_steps \(0\)"),
  ],
)
def test_measurement_refuses_bad_arguments(spec, games, steps, message):
  with pytest.raises(ValueError, match=message):
    bounds.measure_legal_actions(spec, num_games=games, num_steps=steps)
