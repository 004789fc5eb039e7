"""The graph's schema: every `Graph` field declares its role and empty value in its
metadata, the field lists hold known tables by role, exactly the row tables have the
rows of a real graph, and `StochasticGraph.from_graph` keeps every field."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax._src import graph as graph_lib
from mcgs_jax._src import initial
from mcgs_jax._src.types import StochasticGraph
from mcgs_jax.testing import commuting_game

BATCH, CAPACITY, SLOTS, LANES = 2, 5, 8, 2
ROLES = {"node", "edge", "counter", "other"}


def small_graph():
  root_fn, _ = commuting_game()
  root = root_fn(BATCH)
  return initial.empty_graph(
    root,
    capacity=CAPACITY,
    num_slots=SLOTS,
    root_key=jnp.ones((BATCH, LANES), jnp.uint32),
    root_invalid_actions=jnp.zeros_like(root.prior_logits, bool),
  )


def test_every_field_declares_a_role_and_an_empty_value():
  for field in dataclasses.fields(graph_lib.Graph):
    assert field.metadata["role"] in ROLES, field.name
    assert "empty" in field.metadata, field.name


def test_the_field_lists_sort_the_graph_tables_by_role():
  node_tables = {"node_visits", "node_values", "node_terminal", "embeddings"}
  edge_tables = {"children_index", "edge_visits", "edge_rewards", "edge_values"}
  counters = {"transposition_hits", "dropped_inserts", "capacity_overflows"}
  assert node_tables | {"children_prior_logits"} <= set(graph_lib.NODE_FIELDS)
  assert edge_tables <= set(graph_lib.EDGE_FIELDS)
  assert counters <= set(graph_lib.COUNTER_FIELDS)
  assert not set(graph_lib.NODE_FIELDS) & set(graph_lib.EDGE_FIELDS)
  assert not set(graph_lib.ROW_FIELDS) & set(graph_lib.COUNTER_FIELDS)
  assert not {"num_nodes", "hash_slots", "root_invalid_actions"} & set(graph_lib.ROW_FIELDS)
  assert graph_lib.EDGE_FIELDS["children_index"] == graph_lib.UNEXPANDED == -1
  assert graph_lib.NODE_FIELDS["node_visits"] == graph_lib.EDGE_FIELDS["edge_visits"] == 0


def test_the_roles_match_the_shapes_of_a_graph():
  """Exactly the row tables are `[B, N, ...]`; edge tables are `[B, N, A]`, counters
  `[B]` int32."""
  graph = small_graph()
  num_actions = graph.num_actions
  for field in dataclasses.fields(graph_lib.Graph):
    for leaf in jax.tree_util.tree_leaves(getattr(graph, field.name)):
      is_row = leaf.shape[:2] == (BATCH, CAPACITY)
      assert is_row == (field.name in graph_lib.ROW_FIELDS), field.name
  for name in graph_lib.EDGE_FIELDS:
    assert getattr(graph, name).shape == (BATCH, CAPACITY, num_actions), name
  for name in graph_lib.COUNTER_FIELDS:
    counter = getattr(graph, name)
    assert counter.shape == (BATCH,) and counter.dtype == jnp.int32, name


def test_unused_rows_hold_the_declared_empty_values():
  graph = small_graph()
  for name, empty in graph_lib.ROW_FIELDS.items():
    for leaf in jax.tree_util.tree_leaves(getattr(graph, name)):
      np.testing.assert_array_equal(np.asarray(leaf)[:, 1:], empty, err_msg=name)


def test_from_graph_keeps_every_field():
  graph = small_graph()
  stochastic = StochasticGraph.from_graph(graph)
  assert type(stochastic) is StochasticGraph
  for field in dataclasses.fields(graph_lib.Graph):
    assert getattr(stochastic, field.name) is getattr(graph, field.name), field.name


def test_root_key_mismatches_is_a_counter_of_every_graph():
  assert "root_key_mismatches" in graph_lib.COUNTER_FIELDS
  np.testing.assert_array_equal(small_graph().root_key_mismatches, np.zeros(BATCH, np.int32))
