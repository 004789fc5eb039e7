"""`benchmarks/training_race.py --evaluate-only` on two committed race networks:
learning-curve points, the solved-position shares and `--head-to-head`, on a few
games with few simulations."""

import json
import re

import pytest
from helpers import REPO, run_benchmark, run_in_checkout

pytest.importorskip("flax")
CHECKPOINTS = REPO / "benchmarks" / "checkpoints"
GAMES = 4


def fake_run(folder, name, network):
  """A finished run of variant `name` whose only saved network is `network`."""
  history = [dict(iteration=1, positions=10, selfplay_s=1.0, elapsed_s=2.0)]
  snapshot = dict(file=str(network), elapsed_s=2.0, iteration=1)
  payload = dict(config={}, history=history, snapshots=[snapshot], load_before=0.0)
  (folder / f"{name}_history.json").write_text(json.dumps(payload))


def evaluate(tmp_path, *extra):
  seed_folder = tmp_path / "seed0"
  seed_folder.mkdir(exist_ok=True)
  fake_run(seed_folder, "mctx", CHECKPOINTS / "race_mctx_seed0.msgpack")
  fake_run(seed_folder, "default", CHECKPOINTS / "race_default_seed0.msgpack")
  return run_benchmark(
    "training_race",
    "--evaluate-only",
    "--out-dir",
    str(tmp_path),
    "--seeds",
    "0",
    "--variants",
    "mctx,default",
    "--games",
    str(GAMES),
    "--eval-simulations",
    "2",
    "--positions",
    "2",
    *extra,
    timeout=900,
  )


@pytest.mark.slow
def test_head_to_head_plays_every_game_and_pools_them(tmp_path):
  done = evaluate(tmp_path, "--head-to-head", "default,mctx")
  assert done.returncode == 0, done.stderr
  lines = done.stdout.splitlines()
  start = next(i for i, line in enumerate(lines) if line.startswith("Head to head: default"))
  row = next(line for line in lines[start:] if line.startswith("| 0 |"))
  wins, draws, losses = map(int, re.search(r"\| (\d+)-(\d+)-(\d+) \|", row).groups())
  assert wins + draws + losses == GAMES
  score = float(row.split("|")[3])
  assert score == pytest.approx((wins + draws / 2) / GAMES, abs=5e-4)
  pooled = next(line for line in lines[start:] if line.startswith("| pooled |"))
  assert float(pooled.split("|")[3]) == pytest.approx(score, abs=5e-4)
  # The curve point of the default network against the reference was played too.
  assert any(line.startswith("| 0 | default | 1 | 10 |") for line in lines)


def test_head_to_head_names_two_of_the_variants(tmp_path):
  done = evaluate(tmp_path, "--head-to-head", "default,gumbel")
  assert done.returncode == 2
  assert "--head-to-head: two of --variants" in done.stderr


def test_every_variant_is_a_valid_train_config():
  """Each variant's flags parse with `mcgs-jax train`'s parser and make a `Config`, so
  that no race run dies on a typo after the others have trained."""
  from mcgs_jax.apps import train

  listed = run_in_checkout(
    [
      "-c",
      "import json; from benchmarks import training_race as race; "
      "common = race.common_flags(race.build_parser().parse_args([])); "
      "board = race.common_flags(race.build_parser().parse_args("
      "['--game', 'go_9x9', '--network', 'resnet:2,32'])); "
      "print(json.dumps([common, board, race.VARIANTS]))",
    ],
    timeout=300,
    check=True,
  )
  common, board, variants = json.loads(listed.stdout)
  parser = train.build_parser()
  configs = {}
  for name, flags in variants.items():
    args = parser.parse_args([*common, "--seed", "0", *flags])
    configs[name] = train.config_from_args(args)
    board_config = train.config_from_args(parser.parse_args([*board, "--seed", "0", *flags]))
    assert (board_config.game, board_config.network) == ("go_9x9", "resnet:2,32")
  assert configs["default+make-room"].make_room and not configs["default"].make_room
  assert configs["mctx"].engine == "mctx" and configs["default"].engine != "mctx"
  # Every variant trains something of its own, but for the rerun of the defaults.
  assert configs.pop("default-rerun") == configs["default"]
  assert len({repr(config) for config in configs.values()}) == len(configs)
