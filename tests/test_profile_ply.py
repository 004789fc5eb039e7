"""`benchmarks/profile_ply.py` (the ply's parts beside mctx) and
`benchmarks/selfplay_time.py` (a self-play iteration beside mctx's), which
`benchmarks/gpu.sh` runs on a lent GPU, `benchmarks/engine_ab.py` (two versions of
the engine in one process) and `benchmarks/throughput_parts.py` (the raw search's parts)
run end to end on tiny batches and print what they name."""

import json
import pathlib
import subprocess

import pytest
from helpers import benchmark_command

pytest.importorskip("mctx")
PARTS = ["ply", "reroot", "search", "search, no solver", "tree, no reuse", "evaluations", "mctx"]


@pytest.mark.slow
def test_profile_ply_writes_every_part(tmp_path):
  output = tmp_path / "profile.json"
  command = benchmark_command(
    "profile_ply", "--games", "4", "--plies", "1", "--repeats", "1", "--json", str(output)
  )
  done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
  header = next(line for line in done.stdout.splitlines() if line.startswith("| B |"))
  assert header == "| B | ply | nodes kept | " + " | ".join(PARTS) + " |"
  (result,) = json.loads(output.read_text())
  assert list(result["seconds"]) == PARTS and all(v > 0 for v in result["seconds"].values())
  assert result["games"] == 4 and result["nodes_after_reroot"] <= result["nodes_before_reroot"]


@pytest.mark.slow
def test_selfplay_time_prints_both_engines():
  # `benchmarks/selfplay_time.py` (also run by `benchmarks/gpu.sh`) on a tiny batch.
  command = benchmark_command(
    "selfplay_time", "--games", "4", "--simulations", "4", "--repeats", "1"
  )
  done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
  line = next(line for line in done.stdout.splitlines() if line.startswith("self-play"))
  mcgs, mctx = (float(line.split(name)[1].split()[0]) for name in ("(default) ", "mctx "))
  ratio = float(line.split("mcgs / mctx")[1])
  assert mcgs > 0 and mctx > 0
  # The seconds are printed to 0.01 s, the ratio from the unrounded seconds.
  low, high = (mcgs - 0.005) / (mctx + 0.005), (mcgs + 0.005) / max(mctx - 0.005, 1e-9)
  assert low - 0.005 <= ratio <= high + 0.005, line


@pytest.mark.slow
def test_selfplay_time_parts_print_each_ablation_and_its_dropped_playouts():
  # `--parts`: one line per ablation, timed against mctx and the default, with the
  # share of playouts that found the graph full (a share of the playouts: 0-100%).
  command = benchmark_command(
    "selfplay_time", "--games", "2", "--simulations", "2", "--repeats", "1", "--parts"
  )
  done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=True)
  parts = [line for line in done.stdout.splitlines() if line.startswith("part ")]
  names = [line.split()[1].rstrip(":") for line in parts]
  expected = ["no-reuse", "tree+reuse", "tree", "solver", "capacity-8S+1", "make-room"]
  assert names == expected, done.stdout
  for line in parts:
    share = float(line.split("full graph ")[1].rstrip("%"))
    assert 0.0 <= share <= 100.0 and float(line.split()[2]) > 0, line
  # A tree without reuse keeps no graph between moves, so nothing fills it; with room
  # made at every reroot, nothing does either.
  assert float(parts[2].split("full graph ")[1].rstrip("%")) == 0.0
  assert float(parts[5].split("full graph ")[1].rstrip("%")) == 0.0


@pytest.mark.slow
def test_engine_ab_finds_a_checkout_identical_to_itself():
  # `benchmarks/engine_ab.py` with this checkout as the older version: both copies
  # must give the same arrays, and every part is timed.
  checkout = pathlib.Path(__file__).resolve().parents[1]
  command = benchmark_command(
    "engine_ab", "--before", str(checkout), "--games", "4", "--plies", "1", "--repeats", "1"
  )
  done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=True)
  lines = done.stdout.splitlines()
  for part in ("reroot", "search", "no solver"):
    assert f"{part}: identical outputs True" in lines, done.stdout
  timed = [line.split()[-5] for line in lines if line.strip().endswith("of mctx's)")]
  assert len(timed) == 7 and all(float(ms) > 0 for ms in timed), done.stdout


@pytest.mark.slow
def test_throughput_parts_times_every_part(tmp_path):
  # `benchmarks/throughput_parts.py` (the raw search's parts beside mctx) on a tiny batch.
  output = tmp_path / "parts.json"
  command = benchmark_command(
    "throughput_parts",
    "--games",
    "4",
    "--simulations",
    "4",
    "--repeats",
    "1",
    "--json",
    str(output),
  )
  done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
  result = json.loads(output.read_text())
  names = ["mctx", "tree", "graph", "selection", "backup", "evaluations"]
  assert list(result["seconds"]) == names and all(v > 0 for v in result["seconds"].values())
  printed = {
    line.split("|")[1].strip(): float(line.split("|")[3])
    for line in done.stdout.splitlines()
    if line.startswith("| ") and not line.startswith("| part")
  }
  seconds = result["seconds"]
  assert printed == pytest.approx({n: seconds[n] / seconds["mctx"] for n in names}, abs=0.006)
  assert 1 <= result["final_graph_path_longest"] <= 4 and 1 <= result["mean_nodes"] <= 5
