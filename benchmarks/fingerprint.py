"""Fingerprints of the search's results, to show that a change of the engine's code
changes none of them: one SHA-256 per jitted search over every output array's bytes
(the leaves of the `PolicyOutput`, `search_graph` included), and one over them all.

The searches cover the options: muzero, gumbel and uct policies; graph and tree;
`solver`; `num_parallel` 2 and 4; the stop rules (`"catch_up"` with a leak,
`"value_lag"`, `"never"`); `fold_evaluations`; a capacity too small (overflows);
reuse over three moves (`mg.reroot` and `graph=`); `recycle=`; `mg.search` itself;
and Stochastic MuZero on 2048. Batches are small and keys fixed; only the public
API is used, so the same script runs on an older commit.

Run it as a module from the root of the checkout to fingerprint, with the same XLA
flags on both sides; `python -m` puts the current directory first on `sys.path`, so
it imports that checkout's `mcgs_jax` (copy this file into an older checkout's
`benchmarks/` first if it lacks it):

  cd /path/to/checkout && python -m benchmarks.fingerprint [--json FILE]

Hashes depend on the platform and the jax version; compare runs on one machine.
"""

import argparse
import hashlib
import json

import jax
import numpy as np

import mcgs_jax as mg
from mcgs_jax import games, testing
from mcgs_jax.games import play2048

NUM_ACTIONS = 4
COMMUTING_ROOT, COMMUTING_STEP = testing.commuting_game(
  num_actions=NUM_ACTIONS, modulus=13, horizon=8
)


def digest(tree) -> str:
  """SHA-256 over every leaf of `tree`: its path, dtype, shape and bytes."""
  hasher = hashlib.sha256()
  for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
    array = np.asarray(leaf)
    hasher.update(f"{jax.tree_util.keystr(path)} {array.dtype} {array.shape}".encode())
    hasher.update(np.ascontiguousarray(array).tobytes())
  return hasher.hexdigest()


def key(seed: int) -> jax.Array:
  return jax.random.PRNGKey(seed)


def commuting_invalid(batch_size: int) -> np.ndarray:
  """`[B, A]` invalid root actions: some rows partly invalid, one row all invalid."""
  invalid = np.zeros((batch_size, NUM_ACTIONS), bool)
  invalid[1, 0] = True
  invalid[2, 1:3] = True
  invalid[3, :] = True
  return invalid


def commuting_search(policy, batch_size: int, num_simulations: int, seed: int, **kwargs):
  """One jitted search of `policy` on the commuting game."""
  invalid = kwargs.pop("invalid_actions", None)

  @jax.jit
  def run(rng_key):
    return policy(
      None,
      rng_key,
      COMMUTING_ROOT(batch_size, offset=seed),
      COMMUTING_STEP,
      num_simulations,
      invalid_actions=invalid,
      **kwargs,
    )

  return run(key(seed))


def commuting_next_root(root: mg.RootFnOutput, action: jax.Array, rng_key) -> mg.RootFnOutput:
  """The root after `action`, from the commuting game's own step."""
  output, embedding = COMMUTING_STEP(None, rng_key, action, root.embedding)
  return mg.RootFnOutput(prior_logits=output.prior_logits, value=output.value, embedding=embedding)


def reuse_over_moves(policy, num_moves: int = 3, batch_size: int = 6, **kwargs):
  """`num_moves` searches, each continuing the previous graph rerooted at the action
  played (`graph=`); returns every move's output."""

  @jax.jit
  def move(rng_key, root, graph):
    return policy(None, rng_key, root, COMMUTING_STEP, 16, graph=graph, capacity=48, **kwargs)

  root = COMMUTING_ROOT(batch_size, offset=2)
  graph = None
  outputs = []
  for index in range(num_moves):
    output = move(key(100 + index), root, graph)
    outputs.append(output)
    graph = mg.reroot(output.search_graph, output.action)
    root = commuting_next_root(root, output.action, key(200 + index))
  return outputs


def recycled(batch_size: int = 6):
  """A search that overwrites the arrays of a previous search's graph."""

  @jax.jit
  def run(rng_key, root, recycle):
    return mg.muzero_policy(None, rng_key, root, COMMUTING_STEP, 24, recycle=recycle)

  first = run(key(300), COMMUTING_ROOT(batch_size, offset=0), None)
  second = run(key(301), COMMUTING_ROOT(batch_size, offset=5), first.search_graph)
  return first, second


def direct_search(batch_size: int = 5):
  """`mg.search` with the PUCT rules, graph mode, catch-up stops."""
  rule = mg.muzero_action_selection

  @jax.jit
  def run(rng_key):
    return mg.search(
      None,
      rng_key,
      root=COMMUTING_ROOT(batch_size, offset=3),
      recurrent_fn=COMMUTING_STEP,
      root_action_selection_fn=lambda k, graph, node: rule(k, graph, node, 0),
      interior_action_selection_fn=rule,
      num_simulations=20,
      max_depth=6,
      options=mg.GraphOptions(stop_rule="catch_up"),
    )

  return run(key(400))


def dag_search(policy, seed: int, *, batch_size: int = 4, num_simulations: int = 32, **kwargs):
  """One jitted search on a DAG game with a random-rollout evaluator (a value that
  differs between evaluations of one state)."""
  env = games.make_game("dag:actions=3,depth=7,width=6,seed=1").env
  game = games.make_game(env, games.rollout_evaluator(env))

  @jax.jit
  def run(rng_key):
    init_key, root_key, search_key = jax.random.split(rng_key, 3)
    state = game.init(init_key, batch_size)
    return policy(
      None,
      search_key,
      game.root(None, root_key, state),
      game.recurrent_fn,
      num_simulations,
      invalid_actions=game.invalid_actions(state),
      hash_fn=game.hash_fn,
      **kwargs,
    )

  return run(key(seed))


def stochastic_2048(seed: int, *, num_moves: int = 1, evaluator=None, **kwargs):
  """Stochastic MuZero on 3x3 2048 (B = 4, S = 32); with `num_moves > 1` each move
  continues the graph rerooted by the action and then the chance outcome."""
  game = play2048.make_2048(evaluator, size=3)

  @jax.jit
  def move(rng_key, boards, graph):
    return mg.stochastic_muzero_policy(
      None,
      rng_key,
      game.root(None, rng_key, boards),
      game.decision_recurrent_fn,
      game.chance_recurrent_fn,
      32,
      invalid_actions=game.invalid_actions(boards),
      hash_fn=game.hash_fn,
      afterstate_hash_fn=game.afterstate_hash_fn,
      graph=graph,
      capacity=96,
      **kwargs,
    )

  boards = game.random_positions(key(seed), 4, 6)
  graph = None
  outputs = []
  for index in range(num_moves):
    output = move(key(seed + 1 + index), boards, graph)
    outputs.append(output)
    boards, _, outcomes = game.step(key(seed + 50 + index), boards, output.action)
    graph = mg.reroot(mg.reroot(output.search_graph, output.action), outcomes)
  return outputs


def cases():
  """`{name: thunk}`: each thunk runs one search (or one sequence) and returns its
  outputs."""
  muzero, gumbel, uct = mg.muzero_policy, mg.gumbel_muzero_policy, mg.uct_policy
  gumbel_kwargs = {"max_num_considered_actions": 4}
  return {
    "muzero_graph": lambda: commuting_search(muzero, 8, 32, 0),
    "muzero_tree": lambda: commuting_search(muzero, 8, 32, 1, transpositions=False),
    "muzero_catch_up_leak": lambda: commuting_search(
      muzero, 8, 32, 2, stop_rule="catch_up", stop_leak=0.3
    ),
    "muzero_value_lag": lambda: commuting_search(muzero, 8, 32, 3, stop_rule="value_lag"),
    "muzero_parallel_2": lambda: commuting_search(muzero, 8, 32, 4, num_parallel=2),
    "muzero_parallel_4_catch_up": lambda: commuting_search(
      muzero, 8, 32, 5, num_parallel=4, stop_rule="catch_up"
    ),
    "muzero_overflow": lambda: commuting_search(muzero, 8, 32, 6, capacity=9),
    "muzero_forced_invalid": lambda: commuting_search(
      muzero,
      4,
      16,
      7,
      forced_playouts=2.0,
      temperature=0.0,
      dirichlet_fraction=0.0,
      invalid_actions=commuting_invalid(4),
    ),
    "gumbel_graph": lambda: commuting_search(gumbel, 8, 32, 8, **gumbel_kwargs),
    "gumbel_tree_invalid": lambda: commuting_search(
      gumbel, 4, 16, 9, transpositions=False, invalid_actions=commuting_invalid(4)
    ),
    "gumbel_parallel_2_catch_up": lambda: commuting_search(
      gumbel, 8, 32, 10, num_parallel=2, stop_rule="catch_up", **gumbel_kwargs
    ),
    "gumbel_overflow": lambda: commuting_search(gumbel, 8, 32, 11, capacity=10),
    "uct_graph_value_lag": lambda: commuting_search(
      uct, 8, 32, 12, c=1.0, stop_rule="value_lag", stop_epsilon=0.0
    ),
    "uct_tree_parallel_4": lambda: commuting_search(
      uct, 8, 32, 13, transpositions=False, num_parallel=4
    ),
    "dag_muzero_solver": lambda: dag_search(muzero, 14, solver=True),
    "dag_uct_solver_parallel_2": lambda: dag_search(uct, 15, solver=True, num_parallel=2),
    "dag_gumbel_solver": lambda: dag_search(gumbel, 16, solver=True, **gumbel_kwargs),
    "dag_muzero_fold": lambda: dag_search(muzero, 17, fold_evaluations=True),
    "dag_uct_fold_catch_up_parallel_2": lambda: dag_search(
      uct, 18, fold_evaluations=True, stop_rule="catch_up", stop_leak=0.5, num_parallel=2
    ),
    "dag_muzero_solver_fold_overflow": lambda: dag_search(
      muzero, 19, solver=True, fold_evaluations=True, capacity=12
    ),
    "reuse_muzero_3_moves": lambda: reuse_over_moves(muzero, stop_rule="catch_up"),
    "reuse_gumbel_3_moves": lambda: reuse_over_moves(gumbel, **gumbel_kwargs),
    "recycle_muzero": recycled,
    "search_direct": direct_search,
    "stochastic_2048_rollout": lambda: stochastic_2048(
      20, evaluator=play2048.rollout_evaluator(num_steps=4)
    ),
    "stochastic_2048_tree_parallel_2": lambda: stochastic_2048(
      30, transpositions=False, num_parallel=2
    ),
    "stochastic_2048_reuse_3_moves": lambda: stochastic_2048(40, num_moves=3, stop_rule="catch_up"),
  }


def main(argv=None) -> dict:
  """Prints (and with `--json` writes) the hashes; returns them."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--json", help="write the hashes to this file")
  parser.add_argument("--only", help="comma-separated case names (default: all)")
  args = parser.parse_args(argv)
  selected = cases()
  if args.only:
    selected = {name: selected[name] for name in args.only.split(",")}
  hashes = {}
  for name, run in selected.items():
    hashes[name] = digest(jax.device_get(run()))
    print(f"{hashes[name]}  {name}", flush=True)
  combined = hashlib.sha256("".join(hashes[name] for name in sorted(hashes)).encode()).hexdigest()
  print(f"{combined}  combined ({len(hashes)} searches, mcgs_jax from {mg.__file__})")
  if args.json:
    with open(args.json, "w") as file:
      json.dump({"searches": hashes, "combined": combined}, file, indent=2, sort_keys=True)
  return {"searches": hashes, "combined": combined}


def run(argv=None) -> dict:
  """The suite's `python -m benchmarks fingerprint`: `main`'s hashes as a table."""
  found = main(argv)
  rows = [[name, found["searches"][name]] for name in sorted(found["searches"])]
  rows.append(["combined", found["combined"]])
  table = dict(title="SHA-256 per jitted search", columns=["search", "sha256"], rows=rows)
  return dict(tables=[table], notes=[f"mcgs_jax from {mg.__file__}"])


if __name__ == "__main__":
  main()
