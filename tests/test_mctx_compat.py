"""Drop-in for readers of the tree: mctx's own code, run on a tree-mode `mg.Graph`,
gives the numbers it gives on `mctx.Tree`.

The same search runs in mctx and in mcgs_jax (`transpositions=False`) on the same
inputs and key, on the commuting toy game (terminal states within the search's
reach, two players, root actions masked). mctx's functions (its Q-transforms, its
selection rules, `summary()`, `qvalues`) then read both results, and what they
read must agree: at the root, and at every node the two trees share (matched by the
actions that lead there).

What cannot agree by design, and is left out of the comparison:
  * Node numbering below a terminal state. mctx expands a node under a terminal
    child on every later visit to it; mcgs_jax stops the playout at the terminal
    child. So node indices differ between the two trees (nodes are matched by
    path here), and the statistics of a terminal node itself (its visits below,
    `children_values` of the edge into it: mctx keeps the network's value of the
    terminal state there, mcgs_jax 0) differ. Q-values of such edges agree: their
    discount is 0.
  * `parents` and `action_from_parent`: a graph node can have several parents, so
    a `Graph` has neither field, and mctx code that walks up the tree through them
    cannot run on a graph (`mg.reroot` replaces tree reuse built on them).
  * `summary().visit_probs` of a root with no valid action (mctx: uniform,
    mcgs_jax: zeros); no such root is searched here.
"""

import functools

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax.apps import registry
from mcgs_jax.testing import check_graph, commuting_game

BATCH, SIMS, NUM_ACTIONS = 8, 48, 4
ROOT_FN, RECURRENT_FN = commuting_game(num_actions=NUM_ACTIONS, modulus=7, horizon=5)
# Some games may not take some root actions (never all of them).
INVALID = jnp.array(
  [
    [False] * 4,
    [True, False, False, False],
    [False, False, True, True],
    [False] * 4,
    [False, True, False, True],
    [False] * 4,
    [True, True, True, False],
    [False] * 4,
  ]
)
ATOL = 1e-5

# mctx's Q-transforms, as its policies call them: on one tree, at one node.
QTRANSFORMS = {
  "parent_and_siblings": mctx.qtransform_by_parent_and_siblings,
  "min_max": functools.partial(mctx.qtransform_by_min_max, min_value=-1.0, max_value=1.0),
  "completed_by_mix_value": mctx.qtransform_completed_by_mix_value,
}
OUR_QTRANSFORMS = {
  "parent_and_siblings": mg.qtransform_by_parent_and_siblings,
  "min_max": functools.partial(mg.qtransform_by_min_max, min_value=-1.0, max_value=1.0),
  "completed_by_mix_value": mg.qtransform_completed_by_mix_value,
}


def mctx_root():
  root = ROOT_FN(BATCH)
  return mctx.RootFnOutput(
    prior_logits=root.prior_logits, value=root.value, embedding=root.embedding
  )


@functools.cache
def searched(policy):
  """`(mctx's tree, our graph)` of one search of both libraries, same inputs and key."""
  key = jax.random.PRNGKey(7)
  kwargs = dict(invalid_actions=INVALID)
  if policy == "muzero":
    theirs_fn, ours_fn = mctx.muzero_policy, mg.muzero_policy
  else:
    theirs_fn, ours_fn = mctx.gumbel_muzero_policy, mg.gumbel_muzero_policy
    kwargs["max_num_considered_actions"] = 3

  @jax.jit
  def both():
    theirs = theirs_fn(None, key, mctx_root(), RECURRENT_FN, SIMS, **kwargs)
    ours = ours_fn(None, key, ROOT_FN(BATCH), RECURRENT_FN, SIMS, transpositions=False, **kwargs)
    return theirs, ours

  theirs, ours = both()
  np.testing.assert_array_equal(ours.action, theirs.action)
  return theirs.search_tree, ours.search_tree


def per_node(fn, tree):
  """`fn(tree, node)` at every node of every game: `[B, N, ...]`, as mctx calls it
  (`jax.vmap` over the batch, one scalar node index per game)."""
  nodes = jnp.arange(tree.children_index.shape[1])
  over_nodes = jax.vmap(fn, in_axes=(None, 0))
  return np.asarray(jax.jit(jax.vmap(over_nodes, in_axes=(0, None)))(tree, nodes))


def matched_nodes(theirs, ours):
  """`[(game, their node, our node)]` of every non-terminal node both trees hold,
  matched by the actions from the root; asserts that the visit counts agree."""
  their_children = np.asarray(theirs.children_index)
  our_children = np.asarray(ours.children_index)
  their_visits = np.asarray(theirs.children_visits)
  our_visits = np.asarray(ours.children_visits)
  our_terminal = np.asarray(ours.node_terminal)
  pairs, stack = [], [(game, 0, 0) for game in range(BATCH)]
  while stack:
    game, their_node, our_node = stack.pop()
    np.testing.assert_array_equal(
      our_visits[game, our_node],
      their_visits[game, their_node],
      err_msg=f"game {game}, node {our_node}",
    )
    pairs.append((game, their_node, our_node))
    for action in np.flatnonzero(our_visits[game, our_node]):
      our_child = our_children[game, our_node, action]
      if not our_terminal[game, our_child]:  # below a terminal state mctx goes on
        stack.append((game, their_children[game, their_node, action], our_child))
  return np.array(pairs)


def test_graph_is_mctx_tree_under_its_names():
  assert mg.Tree is mg.Graph
  assert mg.Graph.ROOT_INDEX == mctx.Tree.ROOT_INDEX == mg.ROOT_INDEX
  assert mg.Graph.UNVISITED == mctx.Tree.UNVISITED == mg.UNVISITED
  theirs, ours = searched("muzero")
  assert ours.num_simulations == theirs.num_simulations == SIMS
  assert ours.num_actions == theirs.num_actions == NUM_ACTIONS
  assert ours.infer_batch_size() == BATCH
  for name in (
    "children_visits",
    "children_values",
    "children_rewards",
    "children_discounts",
    "children_prior_logits",
    "children_index",
    "node_visits",
    "raw_values",
    "node_values",
    "root_invalid_actions",
  ):
    assert getattr(ours, name).shape == getattr(theirs, name).shape, name
    assert getattr(ours, name).dtype == getattr(theirs, name).dtype, name
  # By design a graph has no single parent per node (see the module docstring).
  assert not hasattr(ours, "parents") and not hasattr(ours, "action_from_parent")


@pytest.mark.quick_variants("muzero")
@pytest.mark.parametrize("policy", registry.MCTX_POLICY_NAMES)
def test_summary_and_root_reads_agree(policy):
  theirs, ours = searched(policy)
  their_summary, our_summary = theirs.summary(), ours.summary()
  np.testing.assert_array_equal(our_summary.visit_counts, their_summary.visit_counts)
  np.testing.assert_array_equal(our_summary.visit_probs, their_summary.visit_probs)
  np.testing.assert_allclose(our_summary.value, their_summary.value, atol=ATOL)
  np.testing.assert_allclose(our_summary.qvalues, their_summary.qvalues, atol=ATOL)
  assert float(np.asarray(our_summary.visit_counts).sum()) == BATCH * SIMS
  np.testing.assert_array_equal(ours.children_visits[:, 0], theirs.children_visits[:, 0])
  np.testing.assert_array_equal(ours.node_visits[:, 0], theirs.node_visits[:, 0])
  # The root's children are not terminal (horizon 5): their values agree too.
  np.testing.assert_allclose(ours.children_values[:, 0], theirs.children_values[:, 0], atol=ATOL)
  root = jnp.zeros((BATCH,), jnp.int32)
  np.testing.assert_allclose(ours.qvalues(root), theirs.qvalues(root), atol=ATOL)
  # Unbatched, as mctx's selection rules read it.
  one = jax.tree_util.tree_map(lambda x: x[2], ours)
  np.testing.assert_allclose(one.qvalues(0), theirs.qvalues(root)[2], atol=ATOL)


@pytest.mark.parametrize("policy", registry.MCTX_POLICY_NAMES)
@pytest.mark.parametrize("name", sorted(QTRANSFORMS))
def test_mctx_qtransforms_agree_at_every_shared_node(policy, name):
  theirs, ours = searched(policy)
  pairs = matched_nodes(theirs, ours)
  assert len(pairs) > 5 * BATCH  # the trees go deeper than the root
  game, their_node, our_node = pairs.T
  their_q = per_node(QTRANSFORMS[name], theirs)[game, their_node]
  our_q = per_node(QTRANSFORMS[name], ours)[game, our_node]
  np.testing.assert_allclose(our_q, their_q, atol=ATOL)
  # mcgs_jax's own transform on its graph reads the same.
  np.testing.assert_allclose(
    per_node(OUR_QTRANSFORMS[name], ours)[game, our_node], their_q, atol=ATOL
  )
  # The transforms are not constant here, so the comparison can fail.
  assert np.ptp(their_q) > 0.1


@pytest.mark.parametrize("policy", registry.MCTX_POLICY_NAMES)
def test_node_statistics_agree_at_every_shared_node(policy):
  theirs, ours = searched(policy)
  game, their_node, our_node = matched_nodes(theirs, ours).T
  np.testing.assert_array_equal(
    np.asarray(ours.node_visits)[game, our_node], np.asarray(theirs.node_visits)[game, their_node]
  )
  for name in ("raw_values", "node_values"):
    np.testing.assert_allclose(
      np.asarray(getattr(ours, name))[game, our_node],
      np.asarray(getattr(theirs, name))[game, their_node],
      atol=ATOL,
      err_msg=name,
    )
  for name in ("children_prior_logits", "children_rewards", "children_discounts"):
    np.testing.assert_allclose(
      np.asarray(getattr(ours, name))[game, our_node],
      np.asarray(getattr(theirs, name))[game, their_node],
      atol=ATOL,
      err_msg=name,
    )
  # children_values agree on every edge but those into a terminal state (discount
  # 0: mctx keeps the network's value of that state, mcgs_jax 0; Q is the same).
  our_values = np.asarray(ours.children_values)[game, our_node]
  their_values = np.asarray(theirs.children_values)[game, their_node]
  live = np.asarray(ours.children_discounts)[game, our_node] != 0
  assert (~live).any() and live.any()
  np.testing.assert_allclose(our_values[live], their_values[live], atol=ATOL)
  np.testing.assert_allclose(
    per_node(lambda tree, node: tree.qvalues(node), ours)[game, our_node],
    per_node(lambda tree, node: tree.qvalues(node), theirs)[game, their_node],
    atol=ATOL,
  )


def test_mctx_selection_rules_run_on_a_graph():
  """mctx's rules, called with mctx's signature on one game's graph, choose what
  they choose on mctx's tree (and what mcgs_jax's own rules choose)."""
  theirs, ours = searched("muzero")
  keys = jax.random.split(jax.random.PRNGKey(11), BATCH)
  root = jnp.zeros((BATCH,), jnp.int32)
  rule = jax.jit(jax.vmap(mctx.muzero_action_selection))
  for depth in (0, 1):
    depths = jnp.full((BATCH,), depth, jnp.int32)
    chosen = np.asarray(rule(keys, ours, root, depths))
    np.testing.assert_array_equal(chosen, rule(keys, theirs, root, depths))
    np.testing.assert_array_equal(
      chosen, jax.jit(jax.vmap(mg.muzero_action_selection))(keys, ours, root, depths)
    )
    if depth == 0:
      assert not np.asarray(INVALID)[np.arange(BATCH), chosen].any()
  interior = jax.jit(jax.vmap(mctx.gumbel_muzero_interior_action_selection))
  np.testing.assert_array_equal(
    interior(keys, ours, root, root), interior(keys, theirs, root, root)
  )


def search_both(root_rule, interior_rule, extra_data=None, **options):
  """`mctx.search` and `mg.search` driven by the same (mctx's) selection rules."""
  key = jax.random.PRNGKey(3)
  root = ROOT_FN(BATCH)
  logits = jnp.where(INVALID, jnp.finfo(jnp.float32).min, root.prior_logits)
  kwargs = dict(
    root_action_selection_fn=root_rule,
    interior_action_selection_fn=interior_rule,
    num_simulations=SIMS,
    invalid_actions=INVALID,
    extra_data=extra_data,
  )

  @jax.jit
  def both():
    theirs = mctx.search(
      None, key, root=mctx_root().replace(prior_logits=logits), recurrent_fn=RECURRENT_FN, **kwargs
    )
    ours = mg.search(
      None,
      key,
      root=root.replace(prior_logits=logits),
      recurrent_fn=RECURRENT_FN,
      options=mg.GraphOptions(**options),
      **kwargs,
    )
    return theirs, ours

  return both()


MCTX_RULES = {
  "muzero": lambda: (
    functools.partial(mctx.muzero_action_selection, depth=0),
    mctx.muzero_action_selection,
    None,
  ),
  "gumbel": lambda: (
    functools.partial(
      mctx.gumbel_muzero_root_action_selection, num_simulations=SIMS, max_num_considered_actions=3
    ),
    mctx.gumbel_muzero_interior_action_selection,
    mctx.GumbelMuZeroExtraData(
      root_gumbel=jax.random.gumbel(jax.random.PRNGKey(4), (BATCH, NUM_ACTIONS))
    ),
  ),
}


@pytest.mark.quick_variants("muzero")
@pytest.mark.parametrize("rules", sorted(MCTX_RULES))
def test_mctx_rules_drive_mg_search(rules):
  """`mg.search` takes mctx's selection rules as they are; in tree mode it grows
  mctx's tree, in graph mode a sound graph."""
  root_rule, interior_rule, extra = MCTX_RULES[rules]()
  theirs, ours = search_both(root_rule, interior_rule, extra, transpositions=False)
  np.testing.assert_array_equal(ours.summary().visit_counts, theirs.summary().visit_counts)
  np.testing.assert_allclose(ours.summary().value, theirs.summary().value, atol=ATOL)
  check_graph(ours, SIMS, tree_mode=True)
  _, graph = search_both(root_rule, interior_rule, extra, transpositions=True)
  check_graph(graph, SIMS, tree_mode=False)
  assert np.all(np.asarray(graph.transposition_hits) > 0)
  assert not np.asarray(graph.edge_visits[:, 0])[np.asarray(INVALID)].any()
