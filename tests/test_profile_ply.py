"""`benchmarks/profile_ply.py` (the ply's parts beside mctx, also run by
`benchmarks/gpu.sh` on a lent GPU) runs end to end on a tiny match and writes every
part it names."""

import json
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
