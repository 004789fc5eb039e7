"""`mcgs-jax search`: output formats, solver column, graph vs tree, and bad input.

The command's `main(argv)` is called in-process (its compiled search is cached per
configuration, so tests sharing flags compile once); one test runs the installed
console script to check that an error is a single line without a traceback.
"""

import json
import os
import subprocess
import sys

import pytest

from mcgs_jax.apps import cli
from mcgs_jax.apps.cli import positions, search_command


def run_search(capsys, *argv):
  """`(exit status, stdout, stderr)` of `mcgs-jax search ARGV`, run in-process."""
  status = cli.main(["search", *argv])
  captured = capsys.readouterr()
  return status, captured.out, captured.err


def json_reports(capsys, *argv):
  status, out, err = run_search(capsys, *argv, "--json")
  assert status == 0, err
  return [json.loads(line) for line in out.splitlines()]


@pytest.mark.slow
def test_nim_uct_json(capsys):
  (report,) = json_reports(capsys, "--game", "nim:3,4,5", "--policy", "uct", "--simulations", "200")
  for field in (
    "action",
    "root_value",
    "num_nodes",
    "transposition_hits",
    "actions",
    "game",
    "moves",
    "policy",
    "simulations",
  ):
    assert field in report
  assert report["game"] == "nim:3,4,5" and report["moves"] == []
  assert report["policy"] == "uct" and report["simulations"] == 200
  actions = report["actions"]
  assert len(actions) == 3 + 4 + 5  # every legal move
  assert sum(row["visits"] for row in actions) == 200
  visits = [row["visits"] for row in actions]
  assert visits == sorted(visits, reverse=True)
  assert report["action"] == actions[0]["action"]
  winning = [row for row in actions if row["minimax"] == 1]
  assert [row["action"] for row in winning] == [1]  # heap 0 take 2: xor 1^4^5 = 0
  assert winning[0]["label"] == "heap 0 take 2"
  assert report["optimal_actions"] == [1] and report["minimax_value"] == 1
  assert all(row["minimax"] == -1 for row in actions if row["action"] != 1)


TTT_POSITIONS = ["", "0,4", "0,3,1,4"]  # start, a quiet middle game, X to win at 2
TTT_FLAGS = ("--game", "tic_tac_toe", "--policy", "uct", "--simulations", "200")


@pytest.fixture
def positions_file(tmp_path):
  path = tmp_path / "positions.txt"
  path.write_text("\n".join(TTT_POSITIONS) + "\n")
  return str(path)


@pytest.mark.slow
def test_positions_file_json_and_table(capsys, positions_file):
  reports = json_reports(capsys, *TTT_FLAGS, "--positions", positions_file)
  assert [report["moves"] for report in reports] == [[], [0, 4], [0, 3, 1, 4]]
  assert [len(report["actions"]) for report in reports] == [9, 7, 5]
  for report in reports:
    assert sum(row["visits"] for row in report["actions"]) == 200
    assert all("minimax" in row for row in report["actions"])
  assert reports[0]["minimax_value"] == 0 and reports[2]["optimal_actions"] == [2]

  status, out, err = run_search(capsys, *TTT_FLAGS, "--positions", positions_file)
  assert status == 0, err
  headers = [line for line in out.splitlines() if line.split()[:1] == ["action"]]
  assert len(headers) == 3
  assert all(
    header.split() == ["action", "visits", "Q", "prior", "share", "minimax"] for header in headers
  )
  assert "moves 0,3,1,4" in out and "moves (start)" in out
  assert any(
    line.split()[0] == "2" and line.rstrip().endswith("+1 *")
    for line in out.splitlines()
    if line.strip()
  )


def test_immediate_win_is_chosen(capsys):
  (report,) = json_reports(capsys, *TTT_FLAGS, "--moves", "0,3,1,4")
  assert report["action"] in report["optimal_actions"] == [2]
  best = report["actions"][0]
  assert best["action"] == 2 and best["minimax"] == 1 and best["q"] > 0.9


def test_tree_mode_has_no_transpositions_and_more_nodes(capsys):
  (graph,) = json_reports(capsys, *TTT_FLAGS)
  (tree,) = json_reports(capsys, *TTT_FLAGS, "--no-transpositions")
  assert tree["transposition_hits"] == 0
  assert graph["transposition_hits"] > 0
  assert tree["num_nodes"] > graph["num_nodes"]


def test_parse_moves():
  assert positions.parse_moves(" 3, 2,4 ") == [3, 2, 4]
  assert positions.parse_moves("") == []
  with pytest.raises(ValueError, match="'x' is not an integer"):
    positions.parse_moves("3,x")


@pytest.mark.parametrize(
  "argv, message",
  [
    (["--game", "no_such_game"], "unknown game"),
    (["--game", "tic_tac_toe", "--moves", "0,0"], "illegal"),
    (["--game", "tic_tac_toe", "--moves", "3,x"], "malformed move list"),
    (
      ["--game", "tic_tac_toe", "--positions", "/no/such/file.txt"],
      "--positions: file not found: /no/such/file.txt",
    ),
    (["--game", "nim:a,b"], "heaps must be integers, got 'a'"),
    (
      ["--game", "connect_four", "--moves", "3,3,3,3,3,3,3"],
      "move 7 of --moves: action 3 is illegal: column 3 is full",
    ),
    (
      ["--game", "connect_four", "--moves", "99"],
      "move 1 of --moves: action 99 is out of range [0, 7)",
    ),
    (
      ["--game", "tic_tac_toe", "--moves", "4,4"],
      "move 2 of --moves: action 4 is illegal: cell 4 is already taken",
    ),
    (["--game", "chesss"], "did you mean 'chess'?"),
    (["--game", "tic_tac_toe", "--simulations", "0"], "--simulations"),
    (["--game", "tic_tac_toe", "--moves", "0,3,1,4,2"], "game is over"),
  ],
)
def test_bad_input_is_one_line(capsys, argv, message):
  status, out, err = run_search(capsys, *argv)
  assert status != 0
  assert out == ""
  assert err.count("\n") == 1 and err.startswith("mcgs-jax search: error: ")
  assert message in err and "Traceback" not in err


def test_bad_line_of_a_positions_file_is_named(capsys, tmp_path):
  path = tmp_path / "bad.txt"
  path.write_text("0\n0,0\n")
  status, _, err = run_search(capsys, "--game", "tic_tac_toe", "--positions", str(path))
  assert status == 2
  assert f"move 2 of --positions {path}:2: action 0 is illegal" in err


def test_default_evaluator_is_rollout_and_table_is_explained(capsys):
  status, out, err = run_search(
    capsys, "--game", "tic_tac_toe", "--moves", "0,3,1,4", "--simulations", "200"
  )
  assert status == 0, err
  header = out.splitlines()[0]
  assert "evaluator rollout (1 random playout per leaf)" in header
  legend = [line for line in out.splitlines() if line.startswith("(visits:")]
  assert len(legend) == 1
  for word in ("Q:", "prior:", "share:", "minimax:", "* = optimal"):
    assert word in legend[0]
  qs = [float(line.split()[2]) for line in out.splitlines()[3:8]]
  assert max(qs) > 0.9  # rollouts see the win (the uniform evaluator gave 0)


def test_help_explains_every_column(capsys):
  with pytest.raises(SystemExit):
    search_command.build_parser().parse_args(["--help"])
  out = capsys.readouterr().out
  for column in ("action", "visits", "Q", "prior", "share", "proven", "minimax", "*"):
    assert any(line.split()[:1] == [column] for line in out.splitlines()), column
  assert "(default: network where one is shipped or given, else rollout)" in " ".join(out.split())


def test_answer_agrees_with_minimax_or_says_why(capsys):
  (report,) = json_reports(capsys, "--game", "tic_tac_toe", "--moves", "0,3")
  assert report["evaluator"] == "rollout"
  assert report["action_is_optimal"] and report["action"] in report["optimal_actions"]
  # Nim 3-4-5 with random rollouts: UCT's most visited action is not the winning
  # one after the default simulations; the table says so under the legend.
  status, out, _ = run_search(capsys, "--game", "nim:3,4,5", "--policy", "uct")
  assert status == 0
  chosen = int(out.splitlines()[1].split("action ")[1].split()[0])
  if chosen != 1:
    assert out.splitlines()[-1].startswith(
      f"note: the chosen action {chosen} is not minimax-optimal after 400 simulations"
    )


def test_console_script_error(tmp_path):
  script = os.path.join(os.path.dirname(sys.executable), "mcgs-jax")
  result = subprocess.run(
    [script, "search", "--game", "tic_tac_toe", "--moves", "3,x"],
    capture_output=True,
    text=True,
    timeout=120,
    check=False,
  )
  assert result.returncode != 0
  assert "Traceback" not in result.stderr
  errors = [line for line in result.stderr.splitlines() if "error" in line]
  assert errors == ["mcgs-jax search: error: malformed move list '3,x': 'x' is not an integer"]


@pytest.mark.slow
def test_gumbel_policy_finds_the_immediate_win(capsys):
  (report,) = json_reports(
    capsys,
    "--game",
    "tic_tac_toe",
    "--policy",
    "gumbel",
    "--evaluator",
    "rollout",
    "--rollouts",
    "4",
    "--simulations",
    "64",
    "--moves",
    "0,3,1,4",
  )
  assert report["policy"] == "gumbel"
  assert sum(row["visits"] for row in report["actions"]) == 64
  assert report["action"] == 2


def test_solver_reports_proven_root_actions(capsys):
  (report,) = json_reports(
    capsys, "--game", "nim:2,4", "--policy", "uct", "--simulations", "200", "--solver"
  )
  assert report["root_proven"] and report["root_proven_value"] == 1.0
  assert report["action"] in report["optimal_actions"]
  for row in report["actions"]:
    if row["proven"]:
      assert row["proven_value"] == row["minimax"]
  assert sum(row["proven"] for row in report["actions"]) >= 1
  status, out, _ = run_search(
    capsys, "--game", "nim:2,4", "--policy", "uct", "--simulations", "200", "--solver"
  )
  assert status == 0 and "proven" in out.splitlines()[2]


def test_names_come_from_the_registry():
  from mcgs_jax.apps import registry

  actions = {action.dest: action for action in search_command.build_parser()._actions}
  assert tuple(actions["policy"].choices) == registry.POLICY_NAMES
  assert tuple(actions["evaluator"].choices) == registry.EVALUATOR_NAMES
  with pytest.raises(ValueError, match="unknown policy"):
    registry.playing_policy("alphabeta")
  with pytest.raises(ValueError, match="needs apply_fn"):
    registry.make_evaluator("network", None)


def test_random_legal_actions_pick_legal_moves_only():
  import jax
  import numpy as np

  from mcgs_jax.apps import registry
  from mcgs_jax.games import evaluators

  assert registry.random_legal_actions is evaluators.random_legal_actions
  mask = np.zeros((64, 7), bool)
  mask[:, [1, 4]] = True
  mask[-1] = False  # nothing legal: action 0
  actions = np.asarray(
    registry.random_legal_actions(jax.random.split(jax.random.PRNGKey(0), 64), mask)
  )
  assert actions.dtype == np.int32
  assert set(actions[:-1]) == {1, 4} and actions[-1] == 0


@pytest.mark.slow
def test_a_second_search_calls_the_stored_program_without_tracing(capsys, tmp_path, monkeypatch):
  """With the compilation cache on, `mcgs-jax search` keeps its traced program
  (`program_cache`): a second identical run reads it instead of tracing and prints
  the same report; another configuration is another program; a damaged file is
  traced afresh; with the cache off nothing is stored."""
  import jax  # noqa: PLC0415

  from mcgs_jax.apps.cli import program_cache  # noqa: PLC0415

  pytest.importorskip("flatbuffers")
  before = jax.config.jax_compilation_cache_dir
  jax.config.update("jax_compilation_cache_dir", str(tmp_path))
  try:
    programs = tmp_path / program_cache.PROGRAMS
    argv = ["--game", "nim:2,3", "--simulations", "16", "--json"]
    assert search_command.main(argv) == 0
    first = capsys.readouterr().out
    stored = sorted(programs.iterdir())
    assert len(stored) == 1
    with monkeypatch.context() as patch:
      traced = []
      patch.setattr(jax.export, "export", lambda *a, **k: traced.append(a))
      assert search_command.main(argv) == 0
      assert capsys.readouterr().out == first and traced == []  # read, not traced
    assert search_command.main(argv[:-1] + ["--seed", "3", "--json"]) == 0  # same program
    assert search_command.main(["--game", "nim:2,3", "--simulations", "8", "--json"]) == 0
    assert len(list(programs.iterdir())) == 2
    capsys.readouterr()
    stored[0].write_bytes(b"damaged")
    assert search_command.main(argv) == 0
    assert capsys.readouterr().out == first
    jax.config.update("jax_compilation_cache_dir", None)
    assert program_cache.cached_program(len, "x", 1) is len
  finally:
    jax.config.update("jax_compilation_cache_dir", before)


@pytest.mark.slow
def test_a_shipped_network_is_the_default_evaluator_and_gives_the_prior(capsys):
  """Where the package ships a network (connect four), the search evaluates with it
  unless told otherwise: the prior column is the network's softmax over the legal
  moves, which neither rollouts nor the uniform evaluator give."""
  import jax
  import numpy as np

  from mcgs_jax.apps.cli.arena_parser import builtin_checkpoint
  from mcgs_jax.apps.train.checkpoint_files import load_network
  from mcgs_jax.games.adapter import make_game

  (report,) = json_reports(
    capsys, "--game", "connect_four", "--moves", "3,3", "--simulations", "16"
  )
  assert report["evaluator"] == "network"
  assert report["checkpoint"] == builtin_checkpoint("connect_four")
  game = make_game("connect_four")
  state = game.env.init(jax.random.PRNGKey(0))
  for action in (3, 3):
    state = game.env.step(state, action)
  apply_fn, params, _ = load_network(report["checkpoint"], game.env)
  logits = np.asarray(apply_fn(params, state.observation[None])[0][0])
  expected = np.exp(logits - logits.max())
  expected /= expected.sum()
  priors = {row["action"]: row["prior"] for row in report["actions"]}
  np.testing.assert_allclose([priors[a] for a in range(7)], expected, rtol=1e-4, atol=1e-6)
  assert sum(row["visits"] for row in report["actions"]) == 16
  (rollout,) = json_reports(
    capsys,
    "--game",
    "connect_four",
    "--moves",
    "3,3",
    "--simulations",
    "16",
    "--evaluator",
    "rollout",
  )
  assert rollout["evaluator"] == "rollout" and rollout["checkpoint"] is None
  np.testing.assert_allclose([row["prior"] for row in rollout["actions"]], 1 / 7, rtol=1e-6)


@pytest.mark.parametrize(
  ("argv", "message"),
  [
    (["--evaluator", "network"], "--evaluator network needs --checkpoint FILE"),
    (
      ["--evaluator", "rollout", "--checkpoint", "x.msgpack"],
      "--checkpoint is for --evaluator network",
    ),
    (["--checkpoint", "missing.msgpack"], "missing.msgpack"),
  ],
)
def test_network_flags_are_checked_in_one_line(capsys, argv, message):
  status, out, err = run_search(capsys, "--game", "tic_tac_toe", *argv)
  assert status == 2 and out == ""
  assert message in err and len(err.strip().splitlines()) == 1
