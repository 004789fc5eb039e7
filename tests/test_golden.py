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

When a change of the search is intended, look at what moved (the failure message
says which field of which game), then regenerate and commit the new files with the
change that explains them:

  MCGS_REGENERATE_GOLDEN=1 python -m pytest -q -p no:benchmark tests/test_golden.py

The files also record the jax version they were made with: the Dirichlet and Gumbel
noise come from `jax.random`, so another jax version may move muzero's and gumbel's
numbers (uct's use the key only to break ties).
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


def described_config(policy):
  """What the numbers depend on, as stored beside them (functions by name)."""

  def describe(value):
    return getattr(value, "__name__", value)

  _, hyperparameters = POLICIES[policy]
  return dict(
    policy=policy,
    game=GAME,
    batch=BATCH,
    simulations=SIMS,
    key=0,
    graph_options={name: describe(value) for name, value in GRAPH_OPTIONS.items()},
    hyperparameters={name: describe(value) for name, value in hyperparameters.items()},
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
  expected = stored["numbers"]
  assert set(expected) == set(INTEGER_FIELDS + FLOAT_FIELDS)
  made_with = f" (golden made with jax {stored['jax_version']}, running {jax.__version__})"
  for name in INTEGER_FIELDS:
    np.testing.assert_array_equal(
      numbers[name], expected[name], err_msg=f"{policy}: {name}{made_with}"
    )
  for name in FLOAT_FIELDS:
    np.testing.assert_allclose(
      numbers[name], expected[name], rtol=0, atol=FLOAT_ATOL, err_msg=f"{policy}: {name}{made_with}"
    )
