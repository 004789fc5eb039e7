"""Tests of `mcgs_jax.arena` and `mcgs-jax arena` (tiny matches on tic_tac_toe)."""

import dataclasses
import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from mcgs_jax.apps import arena
from mcgs_jax.apps.arena import Agent, play_match
from mcgs_jax.apps.cli import arena_command

# One match configuration for every test that plays (the sharding test, in a
# subprocess, and the command-line tests too), so its step compiles once per process.
STRONG = Agent(policy="uct", evaluator="rollout", num_simulations=64, reuse=False)
WEAK = Agent(policy="muzero", evaluator="uniform", num_simulations=2, reuse=False)
NUM_GAMES = 16
OPENING = 2
SEED = 3


@pytest.fixture(scope="module")
def strong_vs_weak():
  return play_match(
    "tic_tac_toe", STRONG, WEAK, num_games=NUM_GAMES, seed=SEED, opening_moves=OPENING
  )


@pytest.mark.slow
def test_strong_agent_wins(strong_vs_weak):
  result = strong_vs_weak
  assert result.wins + result.draws + result.losses == NUM_GAMES == result.games
  assert result.score == pytest.approx((result.wins + result.draws / 2) / NUM_GAMES)
  assert result.score >= 0.75
  # The Elo is the one the score implies (the score clipped to [1/2N, 1 - 1/2N], so
  # that a clean sweep stays finite), inside its interval.
  clipped = min(max(result.score, 0.5 / NUM_GAMES), 1 - 0.5 / NUM_GAMES)
  assert result.elo == pytest.approx(-400 * math.log10(1 / clipped - 1))
  assert result.elo > 0
  assert result.elo_ci95[0] <= result.elo <= result.elo_ci95[1]
  assert result.outcomes.shape == (NUM_GAMES,)
  assert set(np.unique(result.outcomes)) <= {-1.0, 0.0, 1.0}
  assert result.wins == int((result.outcomes > 0).sum())


@pytest.mark.slow
def test_colours_alternate_and_openings_are_shared(strong_vs_weak):
  result = strong_vs_weak
  half = NUM_GAMES // 2
  assert result.a_first.sum() == half
  assert result.a_first[:half].all() and not result.a_first[half:].any()
  assert result.openings.shape == (NUM_GAMES, OPENING)
  np.testing.assert_array_equal(result.openings[:half], result.openings[half:])
  # Distinct openings (tic_tac_toe has 72 of 2 plies for 8 pairs of games).
  assert len({tuple(row) for row in result.openings[:half]}) == half
  assert (result.game_lengths >= OPENING).all()
  assert result.mean_game_length == pytest.approx(result.game_lengths.mean())


def test_search_statistics(strong_vs_weak):
  a, b = strong_vs_weak.agents["a"], strong_vs_weak.agents["b"]
  assert a["name"] == "uct/rollout/64 graph solver" and b["name"] == "muzero/uniform/2 graph solver"
  plies = int(strong_vs_weak.game_lengths.sum()) - OPENING * NUM_GAMES
  assert a["searches"] + b["searches"] == plies
  assert 1 < a["mean_nodes"] <= 65
  assert 1 < b["mean_nodes"] <= 3
  assert a["mean_transposition_hits"] > 0  # tic_tac_toe transposes at once
  # Two playouts reach at most two new states, one or two plies deep, and none of
  # them can be reached from another of the graph's nodes: never a transposition.
  assert b["mean_transposition_hits"] == 0
  json.dumps(strong_vs_weak.to_dict(), allow_nan=False)


@pytest.mark.slow
def test_reuse_carries_the_graph_between_moves(strong_vs_weak):
  """An agent that reroots its graph after every ply plays the same kind of match,
  and its searches hold more nodes (the kept subgraph plus the new playouts). Both
  without the solver: a proven root ends a reused search's playouts at once, so with
  it a kept graph may hold fewer nodes than a fresh one."""
  match = lambda agent: play_match(
    "tic_tac_toe", agent, WEAK, num_games=NUM_GAMES, seed=SEED, opening_moves=OPENING
  )
  fresh = match(dataclasses.replace(STRONG, solver=False))
  result = match(dataclasses.replace(STRONG, reuse=True, solver=False))
  assert result.wins + result.draws + result.losses == NUM_GAMES
  assert result.score >= 0.75
  assert result.agents["a"]["name"].endswith("reuse")
  assert result.agents["a"]["mean_nodes"] > fresh.agents["a"]["mean_nodes"]
  np.testing.assert_array_equal(result.openings, strong_vs_weak.openings)
  with pytest.raises(ValueError, match="capacity must be at least 2"):
    Agent(reuse=True, capacity=1)


def test_same_seed_same_result(strong_vs_weak):
  again = play_match(
    "tic_tac_toe", STRONG, WEAK, num_games=NUM_GAMES, seed=SEED, opening_moves=OPENING
  )
  np.testing.assert_array_equal(again.outcomes, strong_vs_weak.outcomes)
  np.testing.assert_array_equal(again.openings, strong_vs_weak.openings)
  assert again.to_dict()["agents"] == strong_vs_weak.to_dict()["agents"]


@pytest.mark.parametrize(
  "bad, error",
  [
    (dict(num_games=3), ValueError),
    (dict(num_games=0), ValueError),
    (dict(num_games=4, opening_moves=-1), ValueError),
  ],
)
def test_bad_match_arguments(bad, error):
  with pytest.raises(error):
    play_match("tic_tac_toe", STRONG, WEAK, **bad)


def test_bad_agents():
  with pytest.raises(ValueError, match="policy"):
    Agent(policy="alphabeta")
  with pytest.raises(ValueError, match="apply_fn"):
    Agent(evaluator="network")
  with pytest.raises(ValueError, match="multiple"):
    Agent(num_simulations=10, num_parallel=4)
  with pytest.raises(TypeError):
    play_match("tic_tac_toe", "uct", WEAK, num_games=2)


# ---------------------------------------------------------------------------------
# Elo


def test_elo_from_score():
  assert arena.elo_from_score(0.5) == 0.0
  assert arena.elo_from_score(0.75) == pytest.approx(400 * math.log10(3))
  assert arena.elo_from_score(1.0) == math.inf and arena.elo_from_score(0.0) == -math.inf


@pytest.mark.parametrize("score", [0.1, 0.3, 0.6, 0.99])
def test_elo_from_score_is_antisymmetric_and_inverts_the_expected_score(score):
  elo = arena.elo_from_score(score)
  assert elo == pytest.approx(-arena.elo_from_score(1 - score))
  # The expected score of a player `elo` points stronger is `score`.
  assert 1 / (1 + 10 ** (-elo / 400)) == pytest.approx(score)


def test_elo_interval():
  even = np.array([1.0, 0.0] * 10)
  score, elo, (low, high), (score_low, score_high) = arena.elo_interval(even)
  assert score == 0.5 and elo == 0.0
  assert low == pytest.approx(-high) and low < 0 < high
  assert score_low < 0.5 < score_high
  points = np.array([1.0] * 12 + [0.5] * 4 + [0.0] * 4)
  score, elo, (low, high), _ = arena.elo_interval(points)
  assert score == pytest.approx(0.7) and low < elo < high
  mirrored = arena.elo_interval(1.0 - points)
  assert mirrored[1] == pytest.approx(-elo)
  assert mirrored[2] == pytest.approx((-high, -low))
  sweep = arena.elo_interval(np.ones(16))
  assert math.isfinite(sweep[1]) and sweep[2][0] < sweep[1] == sweep[2][1]
  wider = arena.elo_interval(points[::2])  # fewer games: a wider interval
  assert wider[2][1] - wider[2][0] > high - low


# ---------------------------------------------------------------------------------
# Sharding


SHARDED_SCRIPT = textwrap.dedent(f"""
    import os, json
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import jax
    from mcgs_jax.apps.arena import Agent, play_match
    result = play_match("tic_tac_toe", {STRONG!r}, {WEAK!r}, num_games={NUM_GAMES},
                        seed={SEED}, opening_moves={OPENING})
    print(json.dumps(dict(devices=len(jax.devices()), used=result.num_devices,
                          outcomes=result.outcomes.tolist(),
                          openings=result.openings.tolist(),
                          wdl=[result.wins, result.draws, result.losses],
                          agents=result.to_dict()["agents"])))
""")


@pytest.mark.slow
def test_sharded_match_equals_unsharded(strong_vs_weak):
  env = dict(os.environ)
  env.pop("XLA_FLAGS", None)
  env["JAX_PLATFORMS"] = "cpu"
  completed = subprocess.run(
    [sys.executable, "-c", SHARDED_SCRIPT],
    env=env,
    capture_output=True,
    text=True,
    timeout=300,
    check=True,
  )
  sharded = json.loads(completed.stdout.strip().splitlines()[-1])
  assert sharded["devices"] == 4 and sharded["used"] == 4
  result = strong_vs_weak
  assert result.num_devices == 1
  assert sharded["wdl"] == [result.wins, result.draws, result.losses]
  assert sharded["outcomes"] == result.outcomes.tolist()
  assert sharded["openings"] == result.openings.tolist()
  assert sharded["agents"] == result.to_dict()["agents"]


# ---------------------------------------------------------------------------------
# Command line

MATCH_FLAGS = [
  "--game",
  "tic_tac_toe",
  "--games",
  str(NUM_GAMES),
  "--openings",
  str(OPENING),
  "--seed",
  str(SEED),
  "--a-policy",
  "uct",
  "--a-evaluator",
  "rollout",
  "--a-simulations",
  "64",
  "--b-policy",
  "muzero",
  "--b-evaluator",
  "uniform",
  "--b-simulations",
  "2",
  "--b-mode",
  "graph",
  "--b-engine",
  "mcgs",
  "--a-no-reuse",
  "--b-no-reuse",
]


def test_cli_flags_make_the_agents():
  args = arena_command.build_parser().parse_args(MATCH_FLAGS)
  assert arena_command.agent_from_args(args, "a") == STRONG
  assert arena_command.agent_from_args(args, "b") == WEAK
  args = arena_command.build_parser().parse_args(
    [
      "--game",
      "tic_tac_toe",
      "--a-no-transpositions",
      "--b-engine",
      "mcgs",
      "--b-mode",
      "graph",
      "--b-solver",
      "--b-parallel",
      "4",
      "--b-rollouts",
      "3",
    ]
  )
  a, b = arena_command.agent_from_args(args, "a"), arena_command.agent_from_args(args, "b")
  assert not a.transpositions and b.transpositions
  assert b.solver and b.num_parallel == 4 and b.num_rollouts == 3
  assert a.reuse and b.reuse  # the default of this library's engine
  args = arena_command.build_parser().parse_args(["--game", "tic_tac_toe", "--a-no-reuse"])
  assert not arena_command.agent_from_args(args, "a").reuse
  assert (a.policy, a.evaluator, a.num_simulations) == ("muzero", "rollout", 64)


def test_cli_json_and_plot(tmp_path, capsys, strong_vs_weak):
  plot = tmp_path / "arena.png"
  assert arena_command.main(MATCH_FLAGS + ["--json", "--plot", str(plot)]) == 0
  report = json.loads(capsys.readouterr().out)
  assert {
    "wins",
    "draws",
    "losses",
    "score",
    "elo",
    "elo_ci95",
    "games",
    "agents",
    "outcomes",
    "a_first",
    "mean_game_length",
  } <= set(report)
  assert report["games"] == report["games_planned"] == NUM_GAMES
  assert report["partial"] is False  # Ctrl-C prints the games over so far, partial
  assert [report["wins"], report["draws"], report["losses"]] == [
    strong_vs_weak.wins,
    strong_vs_weak.draws,
    strong_vs_weak.losses,
  ]
  assert report["score"] == pytest.approx(strong_vs_weak.score)
  assert report["elo"] == pytest.approx(strong_vs_weak.elo)
  assert report["elo_ci95"] == pytest.approx(list(strong_vs_weak.elo_ci95))
  assert report["outcomes"] == strong_vs_weak.outcomes.tolist()
  assert report["agents"]["a"]["name"] == "uct/rollout/64 graph solver"
  assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_text(capsys, strong_vs_weak):
  assert arena_command.main(MATCH_FLAGS) == 0
  captured = capsys.readouterr()
  out = captured.out
  assert "Elo of A over B" in out
  assert "A: uct/rollout/64 graph" in out and "B: muzero/uniform/2 graph" in out
  low, high = strong_vs_weak.score_ci95
  assert f"score {strong_vs_weak.score:.3f} (95% interval {low:.3f}-{high:.3f})" in out
  assert "Elo of A over B: " in out and "(95% interval " in out
  assert f"verdict: {arena_command.verdict(strong_vs_weak)}" in out.splitlines()
  # Progress: a compiling line before the first ply returns, then plies.
  err = captured.err
  assert err.index("compiling the searches") < err.index("compiled and played")
  assert "at most 9 plies" in err


def test_verdict():
  result = lambda low, high: dataclasses.replace(TEMPLATE_RESULT, score_ci95=(low, high))
  assert arena_command.verdict(result(0.55, 0.7)) == "A stronger (95%)"
  assert arena_command.verdict(result(0.2, 0.45)) == "B stronger (95%)"
  assert arena_command.verdict(result(0.45, 0.6)) == "no significant difference at 95%"


TEMPLATE_RESULT = arena.MatchResult(
  wins=1,
  draws=0,
  losses=1,
  score=0.5,
  elo=0.0,
  elo_ci95=(-1.0, 1.0),
  score_ci95=(0.4, 0.6),
  games=2,
  mean_game_length=5.0,
  agents={},
  outcomes=np.zeros(2),
  a_first=np.array([True, False]),
  game_lengths=np.array([5, 5]),
  openings=np.zeros((2, 0)),
  seconds=0.0,
  num_devices=1,
)


def test_agent_defaults_are_the_command_defaults():
  """The command's A is `Agent` with the command's policy and simulations (its other
  settings are `Agent`'s defaults: a graph kept between moves)."""
  defaults = arena_command.DEFAULTS
  args = arena_command.build_parser().parse_args(["--game", "tic_tac_toe"])
  expected = Agent(
    policy=defaults["policy"],
    evaluator=defaults["fallback_evaluator"],
    num_simulations=defaults["simulations"],
  )
  assert arena_command.agent_from_args(args, "a") == expected
  assert expected.reuse and expected.transpositions


def test_simulations_flag_sets_both_sides():
  parse = lambda argv: arena_command.build_parser().parse_args(["--game", "tic_tac_toe"] + argv)
  args = parse(["--simulations", "32"])
  agents = [arena_command.agent_from_args(args, side) for side in "ab"]
  assert [agent.num_simulations for agent in agents] == [32, 32]
  args = parse(["--simulations", "32", "--b-simulations", "8"])
  agents = [arena_command.agent_from_args(args, side) for side in "ab"]
  assert [agent.num_simulations for agent in agents] == [32, 8]


def test_openings_are_distinct_and_playable():
  game = arena.two_player_game("tic_tac_toe")
  import jax

  states = jax.vmap(game.env.init)(jax.random.split(jax.random.PRNGKey(0), 60))
  openings = arena.draw_openings(game, states, 2, seed=1)
  assert openings.shape == (60, 2)
  assert len({tuple(row) for row in openings}) == 60  # 72 exist
  assert all(row[0] != row[1] for row in openings)  # legal: two different cells
  with pytest.raises(ValueError, match="no game left to play"):
    arena.draw_openings(game, states, 9, seed=1)  # 9 plies fill the board


@pytest.mark.parametrize(
  "argv, message",
  [
    (
      ["--a-parallel", "3", "--games", "2"],
      "--a-parallel 3 must divide the simulations per move (the default simulations: 64)",
    ),
    (
      ["--simulations", "10", "--b-engine", "mcgs", "--b-parallel", "4", "--games", "2"],
      "--b-parallel 4 must divide the simulations per move (--simulations: 10)",
    ),
    (
      ["--game", "tic_tac_toe", "--openings", "60", "--games", "2", "--simulations", "2"],
      "--openings 60: openings of 60 random plies end the game before any search (no "
      "game left to play)",
    ),
    (["--game", "chesss", "--games", "2"], "did you mean 'chess'"),
  ],
)
def test_cli_errors_name_the_flags(argv, message, capsys):
  assert arena_command.main(argv) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and message in err, err
  assert "num_parallel" not in err and "num_simulations" not in err


@pytest.mark.parametrize(
  "argv",
  [
    ["--games", "3"],
    ["--games", "x"],
    ["--a-policy", "alphabeta"],
    ["--openings", "-1"],
    ["--frobnicate"],
    ["--game", "no_such_game", "--games", "2"],
    ["--a-simulations", "10", "--a-parallel", "4", "--games", "2"],
    ["--plot", "/no/such/dir/x.png"],
  ],
)
def test_cli_bad_input(argv, capsys):
  assert arena_command.main(argv) == 2
  captured = capsys.readouterr()
  assert captured.out == ""
  lines = captured.err.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("mcgs-jax arena: error: ")


def test_cli_bad_flag_in_a_subprocess():
  completed = subprocess.run(
    [sys.executable, "-m", "mcgs_jax.apps.cli", "arena", "--games", "odd"],
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert completed.returncode == 2
  assert completed.stdout == ""
  assert len(completed.stderr.strip().splitlines()) == 1
  assert "Traceback" not in completed.stderr
