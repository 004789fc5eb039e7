"""With the solver, selection records the legal edges of every node on its path
(`Path.legal`) so that backup's proofs need not read the prior again: the recorded
edges are those `proofs.legal_edges` gives, at the root and below, and backup with
them leaves the graph bit for bit as backup that computes them itself."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import select_and_expand

import mcgs_jax as mg
from mcgs_jax._src import action_selection as selection
from mcgs_jax._src import proofs
from mcgs_jax._src import search as search_steps
from mcgs_jax._src.search import descent as select_lib
from mcgs_jax.testing import commuting_game

BATCH = 6
NUM_ACTIONS = 3
MAX_DEPTH = 10
OPTIONS = mg.GraphOptions(solver=True, capacity=160)
ROOT, ALL_LEGAL = commuting_game(num_actions=NUM_ACTIONS)
RULES = selection.make_muzero_selection(
  pb_c_init=1.25, pb_c_base=19652.0, qtransform=mg.qtransform_by_parent_and_siblings
)


def recurrent_fn(params, rng_key, action, embedding):
  """The commuting game with its last action illegal where the total is even, so that
  nodes differ in their legal edges."""
  output, embedding = ALL_LEGAL(params, rng_key, action, embedding)
  illegal = (embedding["total"] % 2 == 0)[:, None] & (jnp.arange(NUM_ACTIONS) == NUM_ACTIONS - 1)
  return output.replace(prior_logits=jnp.where(illegal, -jnp.inf, output.prior_logits)), embedding


def legal_edges_of(graph, nodes):
  """`[B, D, A]`: `proofs.legal_edges` of every game's nodes `[B, D]`."""
  return jax.vmap(lambda g, game_nodes: jax.vmap(lambda n: proofs.legal_edges(g, n))(game_nodes))(
    graph, nodes
  )


@jax.jit
def one_simulation(key, graph):
  """`(graph after backup with the recorded edges, the same without, path, expected
  legal edges of the path's nodes)`."""
  graph, path, linked = select_and_expand(
    key, graph, rules=RULES, recurrent_fn=recurrent_fn, max_depth=MAX_DEPTH, options=OPTIONS
  )
  recorded = search_steps.backup(graph, linked, options=OPTIONS)
  recomputed = search_steps.backup(graph, linked.replace(legal=None), options=OPTIONS)
  return recorded, recomputed, path, legal_edges_of(graph, path.nodes)


@pytest.mark.slow
def test_recorded_legal_edges_are_the_proofs_and_prove_the_same():
  root_invalid = jnp.zeros((BATCH, NUM_ACTIONS), bool).at[::2, 0].set(True)
  graph = mg.muzero_policy(
    None,
    jax.random.PRNGKey(0),
    ROOT(BATCH),
    recurrent_fn,
    8,
    invalid_actions=root_invalid,
    max_depth=MAX_DEPTH,
    dirichlet_fraction=0.0,
    options=OPTIONS,
  ).search_graph
  proven_before = int(jnp.sum(graph.node_proven & ~graph.node_terminal))
  illegal_seen = 0
  for key in jax.random.split(jax.random.PRNGKey(1), 40):
    recorded, recomputed, path, expected = one_simulation(key, graph)
    chex.assert_trees_all_equal(recorded, recomputed)
    on_path = np.arange(path.nodes.shape[1]) < np.asarray(path.length)[:, None]
    np.testing.assert_array_equal(np.asarray(path.legal)[on_path], np.asarray(expected)[on_path])
    # The root's row leaves out the root's invalid actions.
    started = np.asarray(path.length) > 0
    assert not np.any(np.asarray(path.legal)[:, 0][started] & np.asarray(root_invalid)[started])
    illegal_seen += int(np.sum(~np.asarray(expected)[on_path]))
    graph = recorded
  assert illegal_seen > 0, "every node on the paths had every edge legal"
  assert int(jnp.sum(graph.node_proven & ~graph.node_terminal)) > proven_before, "nothing proven"


@functools.cache
def _searched_with_room_for_the_cap():
  """`(options, graph)`: a searched graph of 5,462 nodes, room for the paths below."""
  options = mg.GraphOptions(solver=True, capacity=5462)
  search = jax.jit(
    lambda key: (
      mg.muzero_policy(
        None, key, ROOT(2), recurrent_fn, 4, dirichlet_fraction=0.0, options=options
      ).search_graph
    )
  )
  return options, search(jax.random.PRNGKey(0))


@pytest.mark.parametrize("max_depth", [5461, 5462])
@pytest.mark.slow
def test_legal_edges_are_recorded_only_up_to_the_cap(max_depth):
  """`D * A` entries per game at most (`MAX_RECORDED_LEGAL`, 16,384: 5,461 depths of
  3 actions fit, 5,462 do not); past it the path carries none and backup reads the
  prior itself."""
  options, graph = _searched_with_room_for_the_cap()
  _, path = search_steps.select(
    jax.random.PRNGKey(1),
    graph,
    root_action_selection_fn=RULES[0],
    interior_action_selection_fn=RULES[1],
    max_depth=max_depth,
    options=options,
  )
  fits = max_depth * NUM_ACTIONS <= select_lib.MAX_RECORDED_LEGAL
  assert fits == (max_depth == 5461)
  assert (path.legal is not None) == fits


PARALLEL = mg.GraphOptions(solver=True, capacity=160, num_parallel=2)


# The gumbel variant repeats the check on another policy's rules: it runs in the slow set.
@pytest.mark.parametrize(
  ("policy", "options"),
  [(mg.muzero_policy, PARALLEL), (mg.gumbel_muzero_policy, OPTIONS)],
  ids=["muzero, 2 parallel playouts", "gumbel"],
)
@pytest.mark.slow
def test_searches_with_and_without_recorded_legal_edges_are_the_same(policy, options, monkeypatch):
  """A whole search with the solver, recording the legal edges or not (the cap set to
  0), ends in the same graph bit for bit: with parallel playouts, whose other paths
  are backed up between a path's selection and its backup, and with Gumbel's own
  interior rule."""

  def search():
    # Jitted whole (called eagerly, each operation outside the playout loop would
    # compile a program of its own); a new function at each call, traced with the
    # cap as it is then.
    return jax.jit(
      lambda key: (
        policy(
          None, key, ROOT(BATCH), recurrent_fn, 24, max_depth=MAX_DEPTH, options=options
        ).search_graph
      )
    )(jax.random.PRNGKey(3))

  recorded = search()
  monkeypatch.setattr(select_lib, "MAX_RECORDED_LEGAL", 0)
  recomputed = search()
  assert int(jnp.sum(recorded.node_proven & ~recorded.node_terminal)) > 0, "nothing proven"
  chex.assert_trees_all_equal(recorded, recomputed)
