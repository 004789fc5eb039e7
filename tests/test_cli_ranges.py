"""Every command refuses out-of-range numbers and games it cannot play with exit
status 2 and one line naming the flag, before any search (issue: bad input on the
command line)."""

import pytest

from mcgs_jax.apps import benchmark
from mcgs_jax.apps.cli import arena_command, play_command, search_command
from mcgs_jax.games import nim


def status_and_error(main, argv, capsys):
  try:
    status = main(argv)
  except SystemExit as exit_:  # argparse's own refusals
    status = exit_.code
  captured = capsys.readouterr()
  lines = captured.err.strip().splitlines()
  return status, captured.out, lines


@pytest.mark.parametrize(
  "main, prog, argv, message",
  [
    (search_command.main, "search", ["--simulations", "3000000000"], "--simulations"),
    (search_command.main, "search", ["--seed", str(2**70)], "--seed"),
    (search_command.main, "search", ["--game", "2048"], "a game with chance"),
    (search_command.main, "search", ["--game", "nim:1000000"], "at most 16 heaps of at most 64"),
    (arena_command.main, "arena", ["--game", "2048", "--games", "2"], "has chance"),
    (arena_command.main, "arena", ["--seed", "-1"], "--seed"),
    (benchmark.main, "bench", ["--repeats", "0"], "--repeats"),
    (benchmark.main, "bench", ["--game", "no_such_game"], "--game"),
    (benchmark.main, "bench", ["--game", "2048"], "a game with chance"),
    (benchmark.main, "bench", ["--json", "/no/such/dir/x.json"], "--json"),
    (benchmark.main, "bench", ["--seed", str(2**70)], "--seed"),
    (benchmark.main, "bench", ["--simulations", "0"], "--simulations"),
    (play_command.main, "play", ["--seed", str(2**70)], "--seed"),
    (play_command.main, "play", ["--simulations", "3000000000"], "--simulations"),
  ],
)
def test_one_line_error(main, prog, argv, message, capsys):
  status, out, lines = status_and_error(main, argv, capsys)
  assert status == 2
  assert out == ""
  assert len(lines) == 1 and lines[0].startswith(f"mcgs-jax {prog}: error: "), lines
  assert message in lines[0], lines[0]


def test_nim_heaps_bounded():
  assert nim.parse_heaps("3,4,5") == (3, 4, 5)
  assert nim.parse_heaps(",".join(["16"] * 16)) == (16,) * 16  # 256 stones: the limit
  for text in ("65", ",".join(["1"] * 17), ",".join(["17"] * 16)):
    with pytest.raises(ValueError, match="at most 16 heaps"):
      nim.parse_heaps(text)
