"""Games, evaluators and exact solvers for `mcgs_jax`.

`make_game(name)` wraps a pgx game (or the built-in Nim and DAG games) into the
`root` / `recurrent_fn` / `hash_fn` a search takes. Names are resolved lazily, so
`import mcgs_jax.games` needs neither pgx nor flax; `make_game` needs pgx (the
`games` extra) and the network needs flax (the `train` extra).
"""

from mcgs_jax._src.lazy import lazy_exports

# Public name -> module that defines it.
_EXPORTS = {
  "Game": "mcgs_jax.games.adapter",
  "make_game": "mcgs_jax.games.adapter",
  "search_game": "mcgs_jax.games.adapter",
  "SUPPORTED_GAMES": "mcgs_jax.games.adapter",
  "transposition_key_fn": "mcgs_jax.games.keys",
  "max_legal_actions": "mcgs_jax.games.bounds",
  "state_bytes": "mcgs_jax.games.storage",
  "Nim": "mcgs_jax.games.nim",
  "DagGame": "mcgs_jax.games.dag",
  "Evaluator": "mcgs_jax.games.evaluators",
  "uniform_evaluator": "mcgs_jax.games.evaluators",
  "rollout_evaluator": "mcgs_jax.games.evaluators",
  "network_evaluator": "mcgs_jax.games.evaluators",
  "MLPPolicyValueNet": "mcgs_jax.games.networks",
  "init_network": "mcgs_jax.games.networks",
  "nim_value": "mcgs_jax.games.solvers",
  "nim_action_values": "mcgs_jax.games.solvers",
  "tic_tac_toe_values": "mcgs_jax.games.solvers",
  "tic_tac_toe_values_from_actions": "mcgs_jax.games.solvers",
  "connect_four_values": "mcgs_jax.games.solvers",
  "ConnectFourPosition": "mcgs_jax.games.solvers",
  "dag_values": "mcgs_jax.games.solvers",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
