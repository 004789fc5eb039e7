"""Graph reuse between moves (`mcgs_jax.reuse.reroot`): the kept subgraph is the old
one renumbered, continued searches keep the invariants, finished games restart, and a
tic-tac-toe self-play loop with reuse plays legal games to the end.

benchmarks/RESULTS.md, "Graph reuse", records the root visits carried over from one
move to the next on connect four.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mcgs_jax as mg
from mcgs_jax._src import hashing
from mcgs_jax._src.hashing import rebuild_hash_slots
from mcgs_jax._src.kept_nodes import reachable_nodes
from mcgs_jax._src.reuse import reroot
from mcgs_jax.testing import check_graph, commuting_game, make_self_play, node_formula, to_numpy

ROOT, RECURRENT = commuting_game()
BATCH = 4
SIMS = 40
CAPACITY = 80
MORE_SIMS = 20
NODE_FIELDS = (
  "node_visits",
  "raw_values",
  "node_values",
  "node_terminal",
  "node_proven",
  "proven_values",
  "edge_visits",
  "edge_rewards",
  "edge_discounts",
  "node_evaluations",
  "edge_values",
  "edge_non_finite",
)
# Fields reroot rebuilds rather than copies row by row, checked separately below.
REBUILT_FIELDS = (
  "node_keys",
  "path_marks",
  "children_index",
  "children_prior_logits",
  "children_actions",
  "node_dropped_actions",
  "node_unproven_edges",
  "embeddings",
  "hash_slots",
  "num_nodes",
  "transposition_hits",
  "dropped_inserts",
  "capacity_overflows",
  "parallel_collisions",
  "folded_evaluations",
  "non_finite_evaluations",
  "non_finite_roots",
  "playouts_started",
  "root_key_mismatches",
  "dropped_actions",
  "root_invalid_actions",
  "value_bounds",
  "extra_data",
)


def test_every_graph_field_is_handled():
  """A field added to Graph must be added to reroot (and to these lists)."""
  fields = {field.name for field in dataclasses.fields(mg.Graph)}
  assert fields == set(NODE_FIELDS) | set(REBUILT_FIELDS)


def child_root(root, action):
  """The root evaluation of the state `action` leads to, and its invalid actions
  (all of them where that state ends the game)."""
  output, embedding = RECURRENT(None, None, action, root.embedding)
  finished = output.discount == 0
  invalid = jnp.broadcast_to(finished[:, None], output.prior_logits.shape)
  return mg.RootFnOutput(
    prior_logits=output.prior_logits, value=output.value, embedding=embedding
  ), invalid


@functools.partial(jax.jit, static_argnames=("transpositions", "num_simulations"))
def first_search(key, root, invalid, *, transpositions, num_simulations=SIMS):
  # No root noise in this file: a known fraction of 0 leaves the Gamma sampler out of
  # the program (a third of a search's compile time), and reuse is not about it.
  return mg.muzero_policy(
    None,
    key,
    root,
    RECURRENT,
    num_simulations,
    dirichlet_fraction=0.0,
    invalid_actions=invalid,
    capacity=CAPACITY,
    transpositions=transpositions,
  )


@functools.partial(jax.jit, static_argnames=("transpositions",))
def continued_search(key, root, invalid, graph, *, transpositions):
  return mg.muzero_policy(
    None,
    key,
    root,
    RECURRENT,
    MORE_SIMS,
    dirichlet_fraction=0.0,
    invalid_actions=invalid,
    transpositions=transpositions,
    graph=graph,
  )


jitted_reroot = jax.jit(reroot)


@functools.cache
def searched_and_rerooted(transpositions):
  """A searched batch of the commuting game, its played actions and the rerooted
  graph."""
  root = ROOT(BATCH)
  invalid = jnp.zeros((BATCH, 3), jnp.bool_)
  out = first_search(jax.random.PRNGKey(0), root, invalid, transpositions=transpositions)
  return root, out, jitted_reroot(out.search_graph, out.action)


def reachable_np(children, start):
  """Old node indices reachable from `start` (numpy depth-first search)."""
  seen, stack = {start}, [start]
  while stack:
    for child in children[stack.pop()]:
      if child >= 0 and child not in seen:
        seen.add(int(child))
        stack.append(int(child))
  return seen


def incoming_visits(g, game):
  """`[num_nodes]`: the edge visits into every node of one game (numpy graph)."""
  used = int(g["num_nodes"][game])
  children, edge_visits = g["children_index"][game, :used], g["edge_visits"][game, :used]
  incoming = np.zeros(used, np.int64)
  np.add.at(incoming, children[children >= 0], edge_visits[children >= 0])
  return incoming


def carried_visits(rerooted):
  """Per game, the visits every node holds beyond the edges into it right after
  `reroot` (graph mode: passes that came through a parent that was freed)."""
  g = to_numpy(rerooted)
  return [
    np.maximum(g["node_visits"][game, : int(g["num_nodes"][game])] - incoming_visits(g, game), 0)
    for game in range(len(g["num_nodes"]))
  ]


def check_continued(graph, carried, *, tree_mode):
  """`check_graph` for a search continued from a rerooted graph.

  In graph mode a kept node may hold visits that came through a parent `reroot` freed
  (a move order the game did not take), so `check_graph`'s rule "visits <= edge
  visits into the node" holds only with those carried visits added; every other rule
  is checked by `check_graph` in tree mode and here in graph mode.
  """
  if tree_mode:
    assert all(np.all(c[1:] == 0) for c in carried)
    check_graph(graph, None, tree_mode=True)
    return
  g = to_numpy(graph)
  for game, before in enumerate(carried):
    used = int(g["num_nodes"][game])
    assert 1 <= used and np.all(g["node_visits"][game, used:] == 0)
    children, edge_visits = g["children_index"][game, :used], g["edge_visits"][game, :used]
    assert np.all(children < used) and np.all((edge_visits == 0) | (children >= 0))
    incoming = incoming_visits(g, game)
    extra = np.zeros(used, np.int64)
    extra[: before.size] = before
    for node in range(used):
      visits = g["node_visits"][game, node]
      if g["node_terminal"][game, node]:
        assert edge_visits[node].sum() == 0
        if node:
          assert incoming[node] + extra[node] == visits, (game, node)
        continue
      expected_visits, expected_value = node_formula(g, game, node)
      assert visits == expected_visits, (game, node)
      if node:
        assert incoming[node] + extra[node] >= visits, (game, node)
      else:
        np.testing.assert_allclose(g["node_values"][game, 0], expected_value, atol=1e-5)


def assert_empty_rows(new, game, used):
  """Rows past `num_nodes` hold the values of a fresh graph."""
  assert np.all(new["node_visits"][game, used:] == 0)
  assert np.all(new["children_index"][game, used:] == -1)
  assert np.all(new["edge_visits"][game, used:] == 0)
  assert np.all(~new["node_terminal"][game, used:])


def test_graph_mode_keeps_the_reachable_subgraph_by_key():
  _, out, graph = searched_and_rerooted(True)
  old_graph = out.search_graph
  old, new = to_numpy(old_graph), to_numpy(graph)
  old_keys, new_keys = np.asarray(old_graph.node_keys), np.asarray(graph.node_keys)
  old_priors = np.asarray(old_graph.children_prior_logits)
  new_priors = np.asarray(graph.children_prior_logits)
  old_emb, new_emb = old_graph.embeddings, graph.embeddings
  for game in range(BATCH):
    action = int(out.action[game])
    child = int(old["children_index"][game, 0, action])
    assert child > 0
    used_old, used = int(old["num_nodes"][game]), int(new["num_nodes"][game])
    by_key = {old_keys[game, n].tobytes(): n for n in range(used_old)}
    assert len(by_key) == used_old, "this game merges every transposition"
    kept = reachable_np(old["children_index"][game], child)
    assert used == len(kept)
    old_of = [by_key[new_keys[game, n].tobytes()] for n in range(used)]
    assert old_of[0] == child and set(old_of) == kept
    for n, o in enumerate(old_of):
      for field in NODE_FIELDS:
        np.testing.assert_array_equal(new[field][game, n], old[field][game, o], field)
      np.testing.assert_array_equal(new_priors[game, n], old_priors[game, o])
      for name in ("total", "steps"):
        assert int(new_emb[name][game, n]) == int(old_emb[name][game, o])
      for a, c in enumerate(new["children_index"][game, n]):
        old_c = old["children_index"][game, o, a]
        assert (c >= 0) == (old_c >= 0)
        if c >= 0:
          assert old_of[c] == old_c
    # Old index order among kept nodes, the new root first.
    assert old_of[1:] == sorted(old_of[1:])
    assert_empty_rows(new, game, used)
    # The rebuilt table finds every kept node at its own index, and nothing else.
    slots = np.asarray(graph.hash_slots[game])
    assert int(graph.dropped_inserts[game]) == 0
    assert np.sum(slots >= 0) == used
    for n in range(used):
      found, _ = hashing.probe(
        graph.hash_slots[game],
        graph.node_keys[game],
        graph.node_keys[game, n],
        hashing.DEFAULT_PROBE_WINDOW,
      )
      assert int(found) == n
  assert np.all(np.asarray(graph.path_marks) == -1)
  np.testing.assert_array_equal(graph.transposition_hits, old_graph.transposition_hits)
  # The new root holds the old child's visits.
  np.testing.assert_array_equal(
    graph.node_visits[:, 0],
    old_graph.node_visits[
      jnp.arange(BATCH), old_graph.children_index[jnp.arange(BATCH), 0, out.action]
    ],
  )


def test_rebuilt_table_with_a_full_window_counts_what_it_leaves_out():
  _, out, graph = searched_and_rerooted(True)
  narrow = jax.jit(reroot, static_argnames="probe_window")(
    out.search_graph, out.action, probe_window=1
  )
  assert np.any(np.asarray(narrow.dropped_inserts) > 0)
  slots = np.asarray(narrow.hash_slots)
  np.testing.assert_array_equal(
    np.sum(slots >= 0, axis=1) + narrow.dropped_inserts, narrow.num_nodes
  )
  num_slots = slots.shape[1]
  for game in range(BATCH):
    held = np.flatnonzero(slots[game] >= 0)
    starts = np.asarray(narrow.node_keys[game, slots[game, held], 0]) & (num_slots - 1)
    np.testing.assert_array_equal(starts, held)  # window 1: each key at its start
    assert slots[game, int(narrow.node_keys[game, 0, 0]) & (num_slots - 1)] == 0
  for field in ("node_visits", "children_index", "edge_visits", "node_keys"):
    np.testing.assert_array_equal(getattr(narrow, field), getattr(graph, field))


def test_tree_mode_keeps_the_subtree():
  _, out, graph = searched_and_rerooted(False)
  old, new = to_numpy(out.search_graph), to_numpy(graph)
  assert graph.hash_slots.shape == (BATCH, 0)
  for game in range(BATCH):
    child = int(old["children_index"][game, 0, int(out.action[game])])
    pairs, visited = [(child, 0)], 0
    while pairs:
      o, n = pairs.pop()
      visited += 1
      for field in NODE_FIELDS:
        np.testing.assert_array_equal(new[field][game, n], old[field][game, o], field)
      for a in range(3):
        old_c, new_c = old["children_index"][game, o, a], new["children_index"][game, n, a]
        assert (old_c >= 0) == (new_c >= 0)
        if new_c >= 0:
          assert new_c > n, "tree mode: a child's index stays above its parent's"
          pairs.append((old_c, new_c))
    assert visited == int(new["num_nodes"][game])
    assert_empty_rows(new, game, visited)
  check_graph(graph, None, tree_mode=True)


@pytest.mark.quick_variants("True")
@pytest.mark.parametrize("transpositions", [True, False])
def test_searching_on_keeps_invariants_and_adds_to_the_child(transpositions):
  root, out, graph = searched_and_rerooted(transpositions)
  new_root, invalid = child_root(root, out.action)
  more = continued_search(
    jax.random.PRNGKey(1), new_root, invalid, graph, transpositions=transpositions
  ).search_graph
  check_continued(more, carried_visits(graph), tree_mode=not transpositions)
  np.testing.assert_array_equal(
    more.node_visits[:, 0], np.asarray(graph.node_visits[:, 0]) + MORE_SIMS
  )
  # Nothing learned before is lost: every kept node's visits can only grow.
  for game in range(BATCH):
    used = int(graph.num_nodes[game])
    assert np.all(
      np.asarray(more.node_visits[game, :used]) >= np.asarray(graph.node_visits[game, :used])
    )
    np.testing.assert_array_equal(more.node_keys[game, :used], graph.node_keys[game, :used])


def test_finished_and_unexpanded_games_restart():
  # Game 0 plays an unexpanded edge (one is cut off by hand if the search expanded
  # all three). Game 1: every move ends the game (steps = 5 of 6). Game 2: its graph
  # is already empty. Game 3: an ordinary move.
  root = ROOT(BATCH)
  steps = jnp.array([0, 5, 0, 0], jnp.int32)
  root = root.replace(embedding={"total": root.embedding["total"], "steps": steps})
  invalid = jnp.zeros((BATCH, 3), jnp.bool_)
  out = first_search(
    jax.random.PRNGKey(3), root, invalid, transpositions=True, num_simulations=SIMS
  )
  graph = out.search_graph
  graph = graph.replace(num_nodes=graph.num_nodes.at[2].set(0))
  children = np.asarray(graph.children_index[:, 0])
  unexpanded = np.flatnonzero(children[0] < 0)
  if unexpanded.size == 0:  # every root edge expanded: cut one edge off by hand
    graph = graph.replace(
      children_index=graph.children_index.at[0, 0, 2].set(-1),
      edge_visits=graph.edge_visits.at[0, 0, 2].set(0),
    )
    unexpanded = np.array([2])
  action = jnp.array([unexpanded[0], 0, 1, int(out.action[3])], jnp.int32)
  assert bool(graph.node_terminal[1, children[1, 0]])
  rerooted = jitted_reroot(graph, action)
  for game in (0, 1, 2):
    assert int(rerooted.num_nodes[game]) == 0
    assert np.all(np.asarray(rerooted.node_visits[game]) == 0)
    assert np.all(np.asarray(rerooted.children_index[game]) == -1)
    assert np.all(np.asarray(rerooted.hash_slots[game]) == -1)
    assert int(rerooted.transposition_hits[game]) == 0
  assert int(rerooted.num_nodes[3]) > 0
  # A value out of range is refused when it is known; under jit it empties the game.
  with pytest.raises(ValueError, match="out of range"):
    reroot(graph, np.array([0, 0, 3, 0]))
  with pytest.raises(ValueError, match="shape"):
    reroot(graph, np.zeros((BATCH, 1), np.int32))
  with pytest.raises(ValueError, match="integer"):
    reroot(graph, np.zeros((BATCH,), np.float32))
  dynamic = jitted_reroot(graph, action.at[3].set(-1))
  assert int(dynamic.num_nodes[3]) == 0
  # Searching on restarts the empty games from their new roots.
  new_root, new_invalid = child_root(root, action)
  more = continued_search(
    jax.random.PRNGKey(4), new_root, new_invalid, rerooted, transpositions=True
  ).search_graph
  carried = carried_visits(rerooted)
  assert carried[3].sum() > 0, "this seed frees a parent of a kept node"
  check_continued(more, carried, tree_mode=False)
  with pytest.raises(AssertionError, match="more passes through a node"):
    check_graph(more, None, tree_mode=False)
  visits = np.asarray(more.node_visits[:, 0])
  # A finished game: a terminal root, no edge ever taken.
  assert bool(more.node_terminal[1, 0]) and int(more.edge_visits[1, 0].sum()) == 0
  assert visits[0] == visits[2] == MORE_SIMS + 1
  assert visits[3] == int(rerooted.node_visits[3, 0]) + MORE_SIMS


def test_reachable_nodes_follows_cycles_and_skips_inactive_games():
  children = -np.ones((2, 5, 2), np.int32)
  children[0, 0] = [1, 2]
  children[0, 2] = [3, 0]  # back to the start: a cycle
  children[0, 4] = [0, -1]  # points in, never reached
  children[1, 0] = [1, -1]
  reached = reachable_nodes(jnp.asarray(children), jnp.array([2, 0]), jnp.array([True, False]))
  np.testing.assert_array_equal(reached, [[True, True, True, True, False], [False] * 5])


def _reached_by_search(children: np.ndarray, start: int) -> set[int]:
  """The nodes reachable from `start` in one game's `children [N, A]`, by a
  depth-first search."""
  reached, stack = {start}, [start]
  while stack:
    for child in children[stack.pop()]:
      if child >= 0 and child not in reached:
        reached.add(int(child))
        stack.append(int(child))
  return reached


_jitted_reachable_nodes = jax.jit(reachable_nodes)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), edge_fraction=st.floats(0.05, 0.6))
def test_reachable_nodes_is_what_a_graph_search_reaches(seed, edge_fraction):
  # Random tables with edges to higher and lower indices alike (the sweeps in index
  # order must repeat for the lower ones), cycles and self-loops included.
  rng = np.random.default_rng(seed)
  batch_size, capacity, num_actions = 4, 24, 3
  children = rng.integers(0, capacity, (batch_size, capacity, num_actions)).astype(np.int32)
  children[rng.random(children.shape) > edge_fraction] = -1
  start = rng.integers(0, capacity, batch_size).astype(np.int32)
  active = rng.random(batch_size) < 0.8
  reached = np.asarray(_jitted_reachable_nodes(children, start, active))
  for game in range(batch_size):
    expected = _reached_by_search(children[game], start[game]) if active[game] else set()
    assert set(np.flatnonzero(reached[game]).tolist()) == expected, game


def _table_by_rounds(keys: np.ndarray, num_nodes: int, num_slots: int, window: int):
  """One game's `(hash_slots, dropped)` by the rounds `rebuild_hash_slots` states:
  every pending node claims the first free slot of its window, the smallest index
  claiming a slot wins it, a node with no free slot is dropped."""
  slots = -np.ones(num_slots, np.int64)
  pending, dropped = list(range(num_nodes)), 0
  while pending:
    claimed = {}  # node -> the slot it claims this round
    for node in pending:
      window_slots = [(int(keys[node, 0]) + offset) % num_slots for offset in range(window)]
      free = [slot for slot in window_slots if slots[slot] < 0]
      if free:
        claimed[node] = free[0]
      else:
        dropped += 1
    for node in sorted(claimed, reverse=True):  # the smallest index writes last: it wins
      slots[claimed[node]] = node
    pending = [node for node, slot in claimed.items() if slots[slot] != node]
  return slots, dropped


_jitted_rebuild = jax.jit(rebuild_hash_slots, static_argnums=(2, 3))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), window=st.sampled_from([1, 2, 4, 16]))
def test_rebuilt_hash_table_is_the_one_the_rounds_state(seed, window):
  # Few key values in a small table: windows collide and fill, nodes get dropped.
  rng = np.random.default_rng(seed)
  batch_size, capacity, num_slots = 3, 20, 16
  keys = rng.integers(0, 2**32, (batch_size, capacity, 2), dtype=np.uint32)
  keys[..., 0] = rng.choice(rng.integers(0, 2**32, 6, dtype=np.uint32), (batch_size, capacity))
  num_nodes = rng.integers(0, capacity + 1, batch_size).astype(np.int32)
  slots, dropped = _jitted_rebuild(keys, num_nodes, num_slots, window)
  for game in range(batch_size):
    expected_slots, expected_dropped = _table_by_rounds(
      keys[game], int(num_nodes[game]), num_slots, window
    )
    np.testing.assert_array_equal(np.asarray(slots[game]), expected_slots)
    assert int(dropped[game]) == expected_dropped


# --- Self-play with reuse on pgx games ---------------------------------------------


@pytest.mark.slow
def test_tic_tac_toe_self_play_with_reuse():
  batch_size = 8
  _, init, step = make_self_play(
    "tic_tac_toe", batch_size=batch_size, num_simulations=64, capacity=400
  )
  key = jax.random.PRNGKey(5)
  key, init_key = jax.random.split(key)
  state, graph = init(init_key)
  carried_total = 0
  for move in range(9):
    was_finished = np.asarray(state.terminated)
    key, step_key = jax.random.split(key)
    state, graph, action, carried, legal = step(step_key, state, graph)
    assert np.all(np.asarray(legal)), f"illegal move at move {move}: {action}"
    carried = np.asarray(carried)
    assert np.all(carried[was_finished] == 0)
    if move == 0:
      assert np.all(carried == 0)
    carried_total += carried.sum()
    # The rerooted graph is sound, and empty exactly where the game is over.
    finished = np.asarray(state.terminated)
    assert np.all(np.asarray(graph.num_nodes)[finished] == 0)
    in_table = np.sum(np.asarray(graph.hash_slots) >= 0, axis=1)
    np.testing.assert_array_equal(in_table + graph.dropped_inserts, graph.num_nodes)
    live = graph.num_nodes > 0
    if np.any(live):
      assert np.all(np.asarray(graph.node_visits[:, 0])[np.asarray(live)] >= 1)
    if finished.all():
      break
  assert np.asarray(state.terminated).all(), "every game ends within 9 moves"
  assert carried_total > 0, "reuse carried no visits over"
