"""The solver's node proofs, computed in one reduction over the actions, against the
plain formulas they replace (one `jnp.any`, `jnp.all` or `jnp.max` each), bit for
bit, on random nodes with NaN and signed-zero values, values at and past the bounds,
unexpanded and illegal edges, and the root's invalid actions."""

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcgs_jax._src import proofs

# Values: half of them plain outcomes, half the awkward ones (a signed zero, a rounding
# inside a bound, values past it, NaN).
_VALUES = st.sampled_from([-1.0, 0.0, 1.0, 0.5]) | st.sampled_from(
  [-0.0, -0.5, 1.0 - 1e-7, -1.0 + 1e-7, 1.0 + 1e-6, 3.0, np.nan]
)
_BOUNDS = [(-1.0, 1.0), (-jnp.inf, jnp.inf), (0.0, 10.0), (-1.0, 0.5)]


def make_node(edges, node_index, value_bounds):
  """`(graph, node_index)`: one game's graph, as the proof functions read it, whose
  node `node_index` (0, the root, or 1) has one edge per entry of `edges`: `(expanded,
  child proven, reward, discount, child's proven value, prior logit, invalid at the
  root)`; edge `a` leads to node `2 + a`."""
  num_actions = len(edges)
  size = num_actions + 2
  children_index = np.full((size, num_actions), -1, np.int32)
  node_proven = np.zeros(size, bool)
  proven_values = np.zeros(size, np.float32)
  rewards = np.zeros((size, num_actions), np.float32)
  discounts = np.zeros((size, num_actions), np.float32)
  logits = np.zeros((size, num_actions), np.float32)
  for action, (expanded, proven, reward, discount, value, logit, _) in enumerate(edges):
    child = 2 + action
    children_index[node_index, action] = child if expanded else -1
    node_proven[child] = proven
    proven_values[child] = value
    rewards[node_index, action] = reward
    discounts[node_index, action] = discount
    logits[node_index, action] = logit
  if not np.isfinite(logits[node_index]).any():
    logits[node_index, 0] = 0.0  # a node has at least one finite logit
  graph = types.SimpleNamespace(
    children_index=jnp.asarray(children_index),
    node_proven=jnp.asarray(node_proven),
    proven_values=jnp.asarray(proven_values),
    edge_rewards=jnp.asarray(rewards),
    edge_discounts=jnp.asarray(discounts),
    children_prior_logits=jnp.asarray(logits),
    node_dropped_actions=None,  # a dense graph
    root_invalid_edges=jnp.asarray([invalid for *_, invalid in edges]),
    value_bounds=jnp.asarray(value_bounds, jnp.float32),
  )
  return graph, node_index


_EDGE = st.tuples(
  st.booleans(),  # expanded
  st.booleans(),  # child proven
  _VALUES,  # reward
  st.sampled_from([0.0, 1.0, -1.0, 0.5]),  # discount
  _VALUES,  # child's proven value
  st.sampled_from([0.0, 2.0, -1e30, -jnp.inf]),  # prior logit
  st.booleans(),  # invalid at the root
)
_NODES = st.builds(
  make_node,
  st.lists(_EDGE, min_size=1, max_size=6),
  st.sampled_from([0, 1]),
  st.sampled_from(_BOUNDS),
)

# Edges `(expanded, proven, reward, discount, child value, logit, invalid at the root)`.
_WIN = (True, True, 1.0, 0.0, 0.0, 0.0, False)  # proven worth the highest bound
_LOSS = (True, True, -1.0, 0.0, 0.0, 0.0, False)  # proven worth the lowest bound
_DRAW = (True, True, 0.0, -1.0, 0.0, 0.0, False)  # proven worth -0.0
_OPEN = (False, False, 0.0, 0.0, 0.0, 0.0, False)  # unexpanded
# Nodes of every kind, checked in every run whatever hypothesis draws.
_KINDS = {
  "early win": make_node([_WIN, _OPEN], 1, (-1.0, 1.0)),
  "settled": make_node([_LOSS, _DRAW, (True, True, 0.0, 0.0, 0.0, 0.0, False)], 1, (-1.0, 1.0)),
  "loss excluded": make_node([_LOSS, _OPEN], 1, (-1.0, 1.0)),
  "every edge a loss": make_node([_LOSS, _LOSS], 1, (-1.0, 1.0)),
  "out of bounds": make_node(
    [_WIN, (True, True, 3.0, 0.0, 0.0, 0.0, False), _OPEN], 1, (-1.0, 1.0)
  ),
  "NaN": make_node([_WIN, (True, True, np.nan, 0.0, 0.0, 0.0, False), _OPEN], 1, (-1.0, 1.0)),
  "invalid at the root": make_node([(*_WIN[:6], True), _OPEN], 0, (-1.0, 1.0)),
}


def _plain_prove_node(graph, node_index):
  legal = proofs.legal_edges(graph, node_index)
  proven, exact = proofs.proven_edges(graph, node_index)
  proven &= legal
  wins = jnp.any(proofs.winning_edges(graph, proven, exact))
  settled = jnp.any(legal) & jnp.all(proven | ~legal)
  value = jnp.max(jnp.where(proven, exact, -jnp.inf))
  is_proven = wins | settled
  return is_proven, jnp.where(is_proven, value, 0.0).astype(graph.proven_values.dtype)


def _plain_excluded_edges(graph, node_index):
  legal = proofs.legal_edges(graph, node_index)
  proven, exact = proofs.proven_edges(graph, node_index)
  proven &= legal
  best = jnp.max(jnp.where(proven, exact, -jnp.inf))
  losing = proofs.at_bound(exact, graph.value_bounds[0], -1.0) & proofs.in_bounds(
    graph, proven, exact
  )
  excluded = proven & (losing | (exact < best))
  return excluded & jnp.any(legal & ~excluded)


def _bits(value):
  return np.asarray(value, np.float32).view(np.int32)


@jax.jit
def _both(tables, node_index):
  """Both versions on one node, compiled once per number of actions."""
  graph = types.SimpleNamespace(**tables)
  return (
    proofs.prove_node(graph, node_index),
    _plain_prove_node(graph, node_index),
    proofs.excluded_edges(graph, node_index),
    _plain_excluded_edges(graph, node_index),
  )


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.sampled_from(list(_KINDS.values())), _NODES))
def test_proofs_in_one_reduction_equal_the_plain_formulas_bit_for_bit(node):
  graph, node_index = node
  (proven, value), (expected_proven, expected_value), excluded, expected_excluded = _both(
    vars(graph), node_index
  )
  assert bool(proven) == bool(expected_proven)
  assert _bits(value) == _bits(expected_value), (float(value), float(expected_value))
  np.testing.assert_array_equal(excluded, expected_excluded)


@pytest.mark.parametrize(
  "kind, proven, value, excluded",
  [
    ("early win", True, 1.0, [False, False]),
    ("settled", True, 0.0, [True, False, False]),
    ("loss excluded", False, 0.0, [True, False]),
    ("every edge a loss", True, -1.0, [False, False]),
    # A value past the bounds: no early win, and the worse edge is still beaten.
    ("out of bounds", False, 0.0, [True, False, False]),
    ("NaN", False, 0.0, [False, False, False]),
    ("invalid at the root", False, 0.0, [False, False]),
  ],
)
def test_the_nodes_every_run_checks_are_of_their_kind(kind, proven, value, excluded):
  """The fixed nodes that the bit-for-bit test always includes prove, or not, as
  their names say, so that test covers early wins, full expansion, exclusions, the
  guard that keeps one edge, values past the bounds, NaN and the root's invalid
  actions whatever hypothesis draws."""
  graph, node_index = _KINDS[kind]
  (is_proven, proven_value), _, excluded_edges, _ = _both(vars(graph), node_index)
  assert bool(is_proven) == proven
  assert float(proven_value) == value
  np.testing.assert_array_equal(excluded_edges, excluded)
