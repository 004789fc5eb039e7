"""The measuring parts of `mcgs-jax bench` (`mcgs_jax.apps.benchmark`) that are not
timers: path statistics, memory per node, and its argument checks."""

import numpy as np
import pytest

from mcgs_jax.apps import benchmark


def test_deepest_nodes_follows_shortest_paths_and_survives_cycles():
  children = np.full((3, 5, 2), -1)
  children[0, 0] = [1, 2]  # game 0: 0 -> 1 -> 3 -> 4, and 0 -> 2 -> 3 (shorter)
  children[0, 1] = [3, -1]
  children[0, 2] = [3, -1]
  children[0, 3] = [4, 0]  # an edge back to the root (a cycle)
  children[1, 0] = [1, -1]  # game 1: 0 -> 1 -> 0 -> ... (a cycle only)
  children[1, 1] = [0, -1]
  # game 2: the root alone
  np.testing.assert_array_equal(benchmark.deepest_nodes(children), [3, 1, 0])


@pytest.mark.slow
def test_memory_per_node_drops_exactly_the_observation():
  """The measured growth per node of a compiled graph search differs, with and without
  stored observations, by exactly one tic-tac-toe observation (bool [3, 3, 2])."""
  rows = benchmark.memory_rows(
    ["tic_tac_toe"],
    budget_bytes=1e9,
    batch_size=2,
    capacities=(17, 33),
    num_simulations=4,
    progress=lambda row: None,
  )
  stored, dropped = (
    next(r for r in rows if r["store_observation"] is flag) for flag in (True, False)
  )
  assert stored["bytes_per_node"] - dropped["bytes_per_node"] == 18
  assert stored["state_bytes"] - dropped["state_bytes"] == 18
  # Node tables, A = 9 wide edge tables and the state: well over the state alone.
  assert dropped["bytes_per_node"] > dropped["state_bytes"] + 9 * 20
  assert dropped["max_nodes"] == int(1e9 // dropped["bytes_per_node"])


def test_memory_names_a_misspelt_game(capsys):
  with pytest.raises(SystemExit) as exit_info:
    benchmark.main(["--memory", "chesss", "--batch-sizes", "none", "--scaling-simulations", "none"])
  assert exit_info.value.code == 2
  error = capsys.readouterr().err
  assert "--memory" in error and "did you mean 'chess'" in error


@pytest.mark.slow
def test_capacity_part_times_the_same_search_with_new_and_recycled_tables():
  """The capacity part runs every capacity with new tables and with the previous
  search's tables recycled: same keys, so the same searches (nodes, path lengths)."""
  rows = benchmark.run(
    game_id="tic_tac_toe",
    batch_sizes=(),
    scaling_simulations=(),
    capacities=(9, 33),
    capacity_simulations=8,
    capacity_batch_size=2,
    repeats=2,
    progress=lambda row: None,
  )
  assert len(rows) == 8
  for impl in ("tree", "graph"):
    for capacity in (9, 33):
      new, recycled = (
        next(
          r for r in rows if (r["impl"], r["capacity"], r["recycle"]) == (impl, capacity, recycle)
        )
        for recycle in (False, True)
      )
      for field in ("edge_steps", "deepest", "mean_nodes"):
        assert new.get(field) == recycled.get(field), (impl, capacity, field)
      assert recycled["cost_vs_smallest"] > 0
  text = benchmark.markdown(rows, {}, "header")
  assert "| graph | recycled | 33 |" in text
