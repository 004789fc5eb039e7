"""Memory estimates made before allocating (`mcgs_jax.apps.memory_estimates`): self-play of the
training loop and the groups of `mcgs-jax bench` are refused with their estimate when
they cannot fit, and warn near the limit. (The arena's match:
`tests/test_checkpoint_files.py::test_a_match_that_cannot_fit_is_refused_with_its_estimate`.)
"""

import re
import time

import jax
import pytest

from mcgs_jax.apps import benchmark, registry
from mcgs_jax.apps import memory_estimates as memory
from mcgs_jax.apps import train as train_lib

pytest.importorskip("pgx")

GB = 10**9


@pytest.fixture(scope="module")
def tic_tac_toe():
  return registry.game_from_spec("tic_tac_toe")


def test_self_play_of_a_huge_config_is_refused_with_its_estimate(tic_tac_toe):
  config = train_lib.Config.quick(num_simulations=100_000, num_games=1024)
  estimate = memory.estimated_self_play_bytes(tic_tac_toe, config)
  assert estimate > 100 * GB
  with pytest.raises(ValueError, match=r"^self-play needs about \d+\.\d GB .*graphs \d") as caught:
    memory.check_self_play_memory(tic_tac_toe, config, available=64 * GB)
  assert isinstance(caught.value, memory.InsufficientMemoryError)
  assert f"about {estimate / 1e9:.1f} GB" in str(caught.value)
  assert "64.0 GB are available" in str(caught.value)
  # On this machine too, whatever it has.
  if memory.available_bytes() is not None and memory.available_bytes() < estimate:
    with pytest.raises(memory.InsufficientMemoryError):
      memory.check_self_play_memory(tic_tac_toe, config)


def test_a_small_self_play_config_is_accepted_silently(tic_tac_toe, capsys):
  config = train_lib.Config.quick()
  estimate = memory.estimated_self_play_bytes(tic_tac_toe, config)
  assert 0 < estimate < 100 * 10**6
  memory.check_self_play_memory(tic_tac_toe, config)
  memory.check_self_play_memory(tic_tac_toe, config, available=10 * estimate)
  assert capsys.readouterr().err == ""


def test_a_self_play_config_near_the_limit_warns(tic_tac_toe, capsys):
  config = train_lib.Config.quick()
  estimate = memory.estimated_self_play_bytes(tic_tac_toe, config)
  memory.check_self_play_memory(tic_tac_toe, config, available=int(estimate / 0.8))
  assert capsys.readouterr().err.startswith("warning: self-play's ")
  memory.check_self_play_memory(tic_tac_toe, config, available=int(estimate / 0.8), warn=False)
  assert capsys.readouterr().err == ""


def test_the_self_play_estimate_grows_linearly_with_games_and_capacity(tic_tac_toe):
  def estimate(**overrides):
    return memory.estimated_self_play_bytes(tic_tac_toe, train_lib.Config.quick(**overrides))

  one, two, three = (estimate(num_games=games) for games in (16, 32, 48))
  assert three - two == two - one > 0  # linear (the replay buffer is the constant)
  parts = memory.self_play_parts(tic_tac_toe, train_lib.Config.quick(num_games=16))
  assert one - parts["replay buffer"] == (two - one)
  # The graphs follow the capacity: 4 S + 1 with reuse, S + 1 without.
  reused = memory.self_play_parts(tic_tac_toe, train_lib.Config.quick(num_simulations=64))
  fresh = memory.self_play_parts(
    tic_tac_toe, train_lib.Config.quick(num_simulations=64, reuse=False)
  )
  assert reused["graphs"] * 65 == fresh["graphs"] * 257
  assert reused["replay buffer"] == fresh["replay buffer"] == 5_000 * (18 + 4 * 9 + 4)


def test_a_bench_that_cannot_fit_is_refused_before_any_work(capsys):
  started = time.perf_counter()
  with pytest.raises(SystemExit) as caught:
    benchmark.main(
      [
        "--game",
        "tic_tac_toe",
        "--batch-sizes",
        "1000000",
        "--simulations",
        "1000000",
        "--scaling-simulations",
        "none",
      ]
    )
  assert caught.value.code == 2
  captured = capsys.readouterr()
  assert captured.out == ""
  assert captured.err.count("\n") == 1
  assert re.match(
    r"mcgs-jax bench: error: the benchmark's throughput part \(B 1000000\) needs about "
    r"\d+\.\d GB for its searches' graphs .* GB are available: a smaller --batch-sizes",
    captured.err,
  ), captured.err
  assert time.perf_counter() - started < 30  # refused, not run


def test_bench_groups_are_estimated_as_run_times_them(tic_tac_toe, capsys):
  groups = benchmark.planned_groups(
    batch_sizes=(8, 16),
    simulations=(4,),
    scaling_batch_size=2,
    scaling_simulations=(4, 8),
    capacities=(9, 33),
    capacity_batch_size=1,
    probe_windows=(8, 16),
    probe_batch_size=8,
    probe_simulations=4,
  )
  assert [(group.part, group.batch_size, len(group.capacities)) for group in groups] == [
    ("throughput", 8, 3),
    ("throughput", 16, 3),
    ("scaling", 2, 6),
    ("capacity", 1, 8),
    ("probe-window", 8, 2),
  ]
  state = jax.eval_shape(lambda key: tic_tac_toe.init(key, 1), jax.random.PRNGKey(0))
  per_node = memory.node_bytes(tic_tac_toe, state)
  # The largest group is the second throughput one, 16 games of capacity 5: three
  # kept results and two copies of one.
  largest = 16 * 5 * per_node * (3 + memory.GRAPHS_PER_SEARCH - 1)
  benchmark.check_run_memory(tic_tac_toe, groups, available=10 * largest)
  assert capsys.readouterr().err == ""
  benchmark.check_run_memory(tic_tac_toe, groups, available=int(largest / 0.9))
  assert capsys.readouterr().err.startswith("warning: the benchmark's throughput part (B 16)")
  with pytest.raises(memory.InsufficientMemoryError, match=r"throughput part \(B 16\)"):
    benchmark.check_run_memory(tic_tac_toe, groups, available=largest - 1)


def test_train_refuses_a_self_play_that_cannot_fit_before_any_work(tmp_path, capsys):
  huge = dict(num_simulations=100_000, num_games=4096, progress=False)
  with pytest.raises(ValueError, match="self-play needs about"):
    train_lib.train(train_lib.Config.quick(**huge, checkpoint_dir=str(tmp_path / "ck")))
  assert not (tmp_path / "ck").exists() or not any((tmp_path / "ck").iterdir())
  status = train_lib.main(["--quick", "--simulations", "100000", "--games", "4096"])
  captured = capsys.readouterr()
  lines = captured.err.strip().splitlines()
  assert status == 2 and captured.out == "" and len(lines) == 1, captured
  assert lines[0].startswith("mcgs-jax train: error: ") and "self-play needs about" in lines[0]


class _Accelerator:
  """A stand-in accelerator: its platform, process and memory limit."""

  platform, process_index = "gpu", 0

  def __init__(self, limit: int):
    self.limit = limit

  def memory_stats(self) -> dict[str, int]:
    return {"bytes_limit": self.limit}


def test_self_play_on_several_accelerators_needs_one_share_of_each(tic_tac_toe, capsys):
  """The graphs and trajectories are split over the devices, the replay buffer is on
  the host: a device holding 40% of the first two, and far less than the buffer, is
  enough with 4 devices, not with 1 or 2."""
  config = train_lib.Config.quick(num_simulations=64, num_games=4096, buffer_size=20_000_000)
  parts = memory.self_play_parts(tic_tac_toe, config)
  on_devices = parts["graphs"] + parts["trajectories"]
  limit = int(0.4 * on_devices)
  assert parts["graphs"] > GB and parts["replay buffer"] > 2 * limit
  memory.check_self_play_memory(tic_tac_toe, config, devices=[_Accelerator(limit)] * 4)
  assert capsys.readouterr().err == ""
  for count in (1, 2):
    share = f"{-(-parts['graphs'] // count) / 1e9:.1f}"
    with pytest.raises(
      memory.InsufficientMemoryError,
      match=rf"^self-play on each of its {count} device\(s\) needs about .* \(graphs {share}, ",
    ):
      memory.check_self_play_memory(tic_tac_toe, config, devices=[_Accelerator(limit)] * count)
  # On the CPU every part shares the host's memory: the whole is compared.
  with pytest.raises(memory.InsufficientMemoryError, match="replay buffer"):
    memory.check_self_play_memory(tic_tac_toe, config, available=limit * 4)


def test_a_search_that_cannot_fit_is_refused_with_its_estimate(capsys):
  """`mcgs-jax search` refuses before any work, with the estimate, a search whose
  graphs cannot fit (it ran into XLA's out-of-memory error and a traceback; issue 60,
  defect 3), and accepts a small one silently."""
  from mcgs_jax.apps.cli import search_command  # noqa: PLC0415

  argv = ["--game", "chess", "--simulations", "1000000", "--max-children", "0"]
  started = time.perf_counter()
  assert search_command.main(argv) == 2
  captured = capsys.readouterr()
  assert captured.out == "" and captured.err.count("\n") == 1
  assert re.match(
    r"mcgs-jax search: error: the search needs about \d+\.\d GB for its graphs .* GB are "
    r"available: fewer --simulations",
    captured.err,
  ), captured.err
  assert time.perf_counter() - started < 30  # refused, not run
  assert search_command.main(["--game", "tic_tac_toe", "--simulations", "8"]) == 0
  assert "warning" not in capsys.readouterr().err
