"""One process of the two-process arena test (tests/test_distributed.py).

Usage: python distributed_worker.py COORDINATOR_ADDRESS PROCESS_ID NUM_PROCESSES OUT.json
Plays a small tic-tac-toe match with the games sharded over every process's CPU
devices and writes the result (from process 0) as JSON.
"""

import json
import sys

import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")


def main(coordinator: str, process_id: int, num_processes: int, out_path: str) -> None:
  if num_processes > 1:
    jax.distributed.initialize(
      coordinator_address=coordinator,
      num_processes=num_processes,
      process_id=process_id,
      local_device_ids=[0],
    )
  from mcgs_jax.apps.arena import Agent, play_match

  graph = Agent(policy="uct", evaluator="rollout", num_simulations=16)
  tree = Agent(policy="uct", evaluator="rollout", num_simulations=16, transpositions=False)
  result = play_match("tic_tac_toe", graph, tree, num_games=8, seed=3, opening_moves=1)
  if process_id == 0:
    with open(out_path, "w") as handle:
      json.dump(
        {
          "devices": jax.device_count(),
          "processes": jax.process_count(),
          "outcomes": [float(x) for x in result.outcomes],
          "openings": [[int(x) for x in row] for row in result.openings],
          "nodes_a": result.agents["a"]["mean_nodes"],
          "nodes_b": result.agents["b"]["mean_nodes"],
        },
        handle,
      )


if __name__ == "__main__":
  main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
