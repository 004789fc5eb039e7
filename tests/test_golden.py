"""Golden outputs: one small graph-mode search per policy, compared with numbers
stored in tests/golden/<policy>.json.

The search: `mcgs_jax.testing.commuting_game` (4 actions, totals mod 7, 5 moves;
many transpositions), a batch of 4 games, 32 simulations, one fixed key. Every
`mg.GraphOptions` field and every policy hyperparameter is given explicitly
(`GRAPH_OPTIONS`, `POLICIES`), so a change of a default does not move these numbers;
only a change of what the search computes does. A new `GraphOptions` field fails
`test_every_graph_option_is_pinned` until it is pinned here too.

Stored and compared: root visit counts, root Q-values, root value, action weights,
the action, nodes used, transposition hits and the other graph counters. Integers
must be equal, floats within 1e-5 (as mctx's tree tests compare).

Whole graphs, stored in tests/golden/graph_<case>.json (`GRAPH_CASES`): the options
those searches leave off, each on a game where it acts (`num_parallel=2` on the
commuting game; `solver=True` with UCT and random rollouts on tic-tac-toe end games;
`fold_evaluations=True` with UCT and random rollouts on Nim 3-4-5), and
`stochastic_muzero_policy` on 2048 (a 3x3 board, rollouts). Every node and edge table
is stored up to the most nodes used, with the counters, the root's Q-values, the
action and its weights, compared as above.

When a change of the search is intended, look at what moved (the failure message
says which field of which game), then regenerate and commit the new files with the
change that explains them:

  MCGS_REGENERATE_GOLDEN=1 python -m pytest -q -p no:benchmark tests/test_golden.py

The files also record the jax version they were made with: the Dirichlet and Gumbel
noise and the random rollouts come from `jax.random`, so another jax version may move
those numbers (uct on the commuting game uses the key only to break ties).
"""

import dataclasses
import json
import os
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax.games import evaluators, play2048, search_game
from mcgs_jax.games.adapter import make_game
from mcgs_jax.games.nim import Nim
from mcgs_jax.testing import check_graph, commuting_game

GOLDEN_DIR = pathlib.Path(__file__).parent / "golden"
REGENERATE = os.environ.get("MCGS_REGENERATE_GOLDEN") == "1"
BATCH, SIMS = 4, 32
GAME = dict(num_actions=4, modulus=7, horizon=5)
FLOAT_ATOL = 1e-5


def transposition_key(embedding):
  """The commuting game's state (total, steps) as a 2-lane key; lane 0 mixed, since
  it picks the hash slot."""
  total = embedding["total"].astype(jnp.uint32)
  steps = embedding["steps"].astype(jnp.uint32)
  mixed = (total * jnp.uint32(16) + steps + jnp.uint32(1)) * jnp.uint32(0x9E3779B1)
  return jnp.stack([mixed, total * jnp.uint32(16) + steps], axis=-1)


# Every GraphOptions field, at the value the golden files were made with.
GRAPH_OPTIONS = dict(
  hash_fn=transposition_key,
  transpositions=True,
  stop_rule="catch_up",
  stop_leak=0.0,
  stop_epsilon=0.0,
  capacity=SIMS + 1,
  probe_window=16,
  solver=False,
  value_bounds=(-1.0, 1.0),
  num_parallel=1,
  fold_evaluations=False,
  max_children=None,
  proof_first=False,
)

# Each policy with every hyperparameter given.
POLICIES = {
  "muzero": (
    mg.muzero_policy,
    dict(
      qtransform=mg.qtransform_by_parent_and_siblings,
      dirichlet_fraction=0.25,
      dirichlet_alpha=0.3,
      pb_c_init=1.25,
      pb_c_base=19652.0,
      temperature=1.0,
    ),
  ),
  "uct": (mg.uct_policy, dict(c=1.41)),
  "gumbel": (
    mg.gumbel_muzero_policy,
    dict(
      qtransform=mg.qtransform_completed_by_mix_value,
      max_num_considered_actions=4,
      gumbel_scale=1.0,
    ),
  ),
}

INTEGER_FIELDS = (
  "root_visit_counts",
  "root_node_visits",
  "action",
  "num_nodes",
  "transposition_hits",
  "dropped_inserts",
  "capacity_overflows",
  "parallel_collisions",
)
FLOAT_FIELDS = ("root_qvalues", "root_value", "action_weights")


def run(policy):
  """The golden search of `policy`: its numbers as lists, and the graph."""
  policy_fn, hyperparameters = POLICIES[policy]
  root_fn, recurrent_fn = commuting_game(**GAME)
  root = root_fn(BATCH)
  out = jax.jit(
    lambda key: policy_fn(
      None, key, root, recurrent_fn, SIMS, max_depth=None, **hyperparameters, **GRAPH_OPTIONS
    )
  )(jax.random.PRNGKey(0))
  graph = out.search_graph
  summary = graph.summary()
  numbers = dict(
    root_visit_counts=graph.children_visits[:, 0],
    root_node_visits=graph.node_visits[:, 0],
    action=out.action,
    num_nodes=graph.num_nodes,
    transposition_hits=graph.transposition_hits,
    dropped_inserts=graph.dropped_inserts,
    capacity_overflows=graph.capacity_overflows,
    parallel_collisions=graph.parallel_collisions,
    root_qvalues=summary.qvalues,
    root_value=summary.value,
    action_weights=out.action_weights,
  )
  numbers = {name: np.asarray(value).tolist() for name, value in numbers.items()}
  return numbers, graph


def described(value):
  """An option as stored in a golden file: a function by its name."""
  return getattr(value, "__name__", value)


def described_config(policy):
  """What the numbers depend on, as stored beside them."""
  _, hyperparameters = POLICIES[policy]
  return dict(
    policy=policy,
    game=GAME,
    batch=BATCH,
    simulations=SIMS,
    key=0,
    graph_options={name: described(value) for name, value in GRAPH_OPTIONS.items()},
    hyperparameters={name: described(value) for name, value in hyperparameters.items()},
  )


def golden_text(config, numbers):
  """The JSON of a golden file, one number field per line (readable diffs)."""
  fields = ",\n".join(
    f"  {json.dumps(name)}: {json.dumps(value)}" for name, value in numbers.items()
  )
  return (
    f'{{\n "config": {json.dumps(config, sort_keys=True)},\n'
    f' "jax_version": {json.dumps(jax.__version__)},\n'
    f' "numbers": {{\n{fields}\n }}\n}}\n'
  )


def assert_numbers_match(label, numbers, stored, integer_fields, float_fields):
  """`numbers` are the golden file `stored`'s: integers equal, floats within
  `FLOAT_ATOL`; a failure names `label`, the field and both jax versions."""
  expected = stored["numbers"]
  assert set(expected) == set(integer_fields + float_fields)
  made_with = f" (golden made with jax {stored['jax_version']}, running {jax.__version__})"
  for name in integer_fields:
    np.testing.assert_array_equal(
      numbers[name], expected[name], err_msg=f"{label}: {name}{made_with}"
    )
  for name in float_fields:
    np.testing.assert_allclose(
      numbers[name], expected[name], rtol=0, atol=FLOAT_ATOL, err_msg=f"{label}: {name}{made_with}"
    )


def test_every_graph_option_is_pinned():
  fields = {field.name for field in dataclasses.fields(mg.GraphOptions)}
  assert set(GRAPH_OPTIONS) == fields, (
    f"GraphOptions fields not pinned in {__name__}: {sorted(fields - set(GRAPH_OPTIONS))}"
    f"; gone: {sorted(set(GRAPH_OPTIONS) - fields)}. Pin each at the value that "
    "reproduces the golden files (the old behaviour), or regenerate them."
  )


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_golden(policy):
  numbers, graph = run(policy)
  path = GOLDEN_DIR / f"{policy}.json"
  if REGENERATE:
    GOLDEN_DIR.mkdir(exist_ok=True)
    path.write_text(golden_text(described_config(policy), numbers))
    pytest.skip(f"regenerated {path}")
  stored = json.loads(path.read_text())
  assert stored["config"] == json.loads(json.dumps(described_config(policy))), (
    "the test's configuration differs from the one the golden file was made with"
  )
  # The search is sound and finds transpositions: the numbers are worth keeping.
  check_graph(graph, SIMS, tree_mode=False)
  assert min(numbers["transposition_hits"]) > 0
  assert_numbers_match(policy, numbers, stored, INTEGER_FIELDS, FLOAT_FIELDS)


# ---------------------------------------------------------------------------------
# Whole graphs: the options the searches above leave off, and the stochastic policy.
# Each case pins `GRAPH_OPTIONS` with its own overrides (capacity S + 1; on a real
# game, the game's state keys as `hash_fn`) and stores every row of the graph up to
# the most nodes any of its games used, and the graph's counters.

GRAPH_CASES = {
  "num_parallel": dict(
    game="commuting", policy="muzero", batch=4, simulations=32, options=dict(num_parallel=2)
  ),
  "solver": dict(
    game="tic_tac_toe", policy="uct", batch=2, simulations=48, options=dict(solver=True)
  ),
  "fold_evaluations": dict(
    game="nim", policy="uct", batch=2, simulations=48, options=dict(fold_evaluations=True)
  ),
  "stochastic_2048": dict(
    game="2048",
    policy="stochastic_muzero",
    batch=2,
    simulations=24,
    options=dict(value_bounds=None),
  ),
}
GAMES = {
  "tic_tac_toe": "tic_tac_toe, random-rollout evaluator, after the moves (X first) "
  "0 4 8 2 6 and 4 0 8 2 1 6",
  "nim": "Nim 3-4-5, random-rollout evaluator",
  "2048": "2048 on a 3x3 board (make_game('2048:3')), rollouts of 8 moves",
}
TIC_TAC_TOE_MOVES = ((0, 4, 8, 2, 6), (4, 0, 8, 2, 1, 6))

# [B, N, ...] tables, stored up to the most nodes any game used.
GRAPH_EXACT_ROWS = (
  "node_visits",
  "node_evaluations",
  "node_terminal",
  "node_proven",
  "children_index",
  "edge_visits",
)
GRAPH_FLOAT_ROWS = ("node_values", "raw_values", "proven_values", "edge_rewards")
GRAPH_COUNTERS = (
  "num_nodes",
  "transposition_hits",
  "dropped_inserts",
  "capacity_overflows",
  "parallel_collisions",
  "folded_evaluations",
)
GRAPH_INTEGER_FIELDS = (*GRAPH_EXACT_ROWS, *GRAPH_COUNTERS, "action")
GRAPH_FLOAT_FIELDS = (*GRAPH_FLOAT_ROWS, "root_qvalues", "action_weights")


def graph_case(case):
  """`(search, graph options, hyperparameters)` of a whole-graph case, where
  `search(key) -> PolicyOutput` runs its policy with every option given."""
  spec = GRAPH_CASES[case]
  batch, simulations = spec["batch"], spec["simulations"]
  options = {**GRAPH_OPTIONS, "capacity": simulations + 1, **spec["options"]}
  if spec["game"] == "commuting":
    policy_fn, hyperparameters = POLICIES[spec["policy"]]
    root_fn, recurrent_fn = commuting_game(**GAME)

    def search(key):
      return policy_fn(
        None,
        key,
        root_fn(batch),
        recurrent_fn,
        simulations,
        max_depth=None,
        **hyperparameters,
        **options,
      )

    return search, options, hyperparameters
  if spec["game"] == "2048":
    game = make_game("2048:3", play2048.rollout_evaluator(8))
    boards = game.init(jax.random.PRNGKey(1), batch)
    options["hash_fn"] = game.hash_fn
    hyperparameters = {**POLICIES["muzero"][1], "afterstate_hash_fn": game.afterstate_hash_fn}

    def search(key):
      return mg.stochastic_muzero_policy(
        None,
        key,
        game.root(None, key, boards),
        game.decision_recurrent_fn,
        game.chance_recurrent_fn,
        simulations,
        invalid_actions=game.invalid_actions(boards),
        max_depth=None,
        **hyperparameters,
        **options,
      )

    return search, options, hyperparameters
  if spec["game"] == "tic_tac_toe":
    game = make_game("tic_tac_toe", evaluators.rollout_evaluator(make_game("tic_tac_toe").env))
    state = jax.tree.map(lambda *x: jnp.stack(x), *[game.play(m) for m in TIC_TAC_TOE_MOVES])
  else:
    env = Nim((3, 4, 5))
    game = make_game(env, evaluators.rollout_evaluator(env))
    state = game.init(jax.random.PRNGKey(1), batch)
  policy_fn, hyperparameters = POLICIES[spec["policy"]]
  options["hash_fn"] = game.hash_fn  # search_game passes the game's keys
  given = {name: value for name, value in options.items() if name != "hash_fn"}

  def search(key):
    return search_game(
      policy_fn, game, state, simulations, key, max_depth=None, **hyperparameters, **given
    )

  return search, options, hyperparameters


def run_graph_case(case):
  """The golden search of `case`: its numbers as lists, and the graph."""
  search, _, _ = graph_case(case)
  out = jax.jit(search)(jax.random.PRNGKey(0))
  graph = out.search_graph
  used = int(np.max(graph.num_nodes))
  numbers = {name: getattr(graph, name)[:, :used] for name in GRAPH_EXACT_ROWS + GRAPH_FLOAT_ROWS}
  numbers.update({name: getattr(graph, name) for name in GRAPH_COUNTERS})
  numbers.update(
    action=out.action, root_qvalues=graph.summary().qvalues, action_weights=out.action_weights
  )
  return {name: np.asarray(value).tolist() for name, value in numbers.items()}, graph


def described_graph_case(case):
  """What a whole-graph case's numbers depend on, as stored beside them."""
  spec = GRAPH_CASES[case]
  _, options, hyperparameters = graph_case(case)
  # A game's own key functions by what they are, not by their internal names.
  if spec["game"] != "commuting":
    options = {**options, "hash_fn": "the game's"}
  if "afterstate_hash_fn" in hyperparameters:
    hyperparameters = {**hyperparameters, "afterstate_hash_fn": "the game's"}
  return dict(
    case=case,
    game=GAME if spec["game"] == "commuting" else GAMES[spec["game"]],
    policy=spec["policy"],
    batch=spec["batch"],
    simulations=spec["simulations"],
    key=0,
    graph_options={name: described(value) for name, value in options.items()},
    hyperparameters={name: described(value) for name, value in hyperparameters.items()},
  )


# What each case's option visibly did, so that its numbers are worth keeping.
GRAPH_CASE_EFFECTS = {
  "num_parallel": lambda graph: np.any(np.asarray(graph.parallel_collisions) > 0),
  "solver": lambda graph: np.any(np.asarray(graph.node_proven)),
  "fold_evaluations": lambda graph: np.all(np.asarray(graph.folded_evaluations) > 0),
  "stochastic_2048": lambda graph: np.all(np.asarray(graph.transposition_hits) > 0),
}


@pytest.mark.parametrize("case", sorted(GRAPH_CASES))
@pytest.mark.quick_variants("solver")
def test_golden_graph(case):
  numbers, graph = run_graph_case(case)
  path = GOLDEN_DIR / f"graph_{case}.json"
  config = described_graph_case(case)
  if REGENERATE:
    GOLDEN_DIR.mkdir(exist_ok=True)
    path.write_text(golden_text(config, numbers))
    pytest.skip(f"regenerated {path}")
  stored = json.loads(path.read_text())
  assert stored["config"] == json.loads(json.dumps(config)), (
    "the test's configuration differs from the one the golden file was made with"
  )
  check_graph(graph, GRAPH_CASES[case]["simulations"], tree_mode=False)
  assert GRAPH_CASE_EFFECTS[case](graph)
  assert_numbers_match(case, numbers, stored, GRAPH_INTEGER_FIELDS, GRAPH_FLOAT_FIELDS)
