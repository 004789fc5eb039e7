"""The default key on a learned latent that reaches an exact fixed point (issue 47,
docs/mctx.md "Learned models (MuZero latents)"): every bit pattern of the latent is
one node, a move that leaves the latent unchanged is an edge from the node to
itself, the first playout through it is counted as a transposition hit and every
later one ends there (the cycle guard) without an evaluation; with
`transpositions=False` the same search is mctx's tree."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax.testing import check_graph

SIMULATIONS = 48
BATCH = 2
STEP = 0.5  # each move adds this to one coordinate; the latent is clipped to [0, 1]
DISTINCT_LATENTS = 9  # {0, 0.5, 1} per coordinate


def clipped_latent_fn(params, rng_key, action, latent):
  """A saturating latent `[B, 2]`: move a raises coordinate a by STEP, clipped at 1,
  so at 1 that move is an exact fixed point (the next latent is the same bits)."""
  del params, rng_key
  latent = jnp.clip(latent + STEP * jax.nn.one_hot(action, 2), 0.0, 1.0)
  output = mg.RecurrentFnOutput(
    reward=jnp.full((latent.shape[0],), 0.1),
    discount=jnp.full((latent.shape[0],), 0.9),
    prior_logits=jnp.stack([latent[:, 1], latent[:, 0]], axis=-1),
    value=latent[:, 0] - 0.5 * latent[:, 1],
  )
  return output, latent


def search(policy, transpositions):
  root = mg.RootFnOutput(
    prior_logits=jnp.zeros((BATCH, 2)),
    value=jnp.zeros((BATCH,)),
    embedding=jnp.zeros((BATCH, 2), jnp.float32),
  )
  policy_fn = {"muzero": mg.muzero_policy, "gumbel": mg.gumbel_muzero_policy}[policy]
  run = jax.jit(
    lambda key: policy_fn(
      None, key, root, clipped_latent_fn, SIMULATIONS, transpositions=transpositions
    )
  )
  return run(jax.random.PRNGKey(0)).search_graph


# The gumbel variants repeat each check with another policy's rules: they run in the
# slow set.
@pytest.mark.quick_variants("muzero")
@pytest.mark.parametrize("policy", ["muzero", "gumbel"])
def test_a_latent_fixed_point_is_one_node_with_an_edge_to_itself(policy):
  graph = search(policy, transpositions=True)
  check_graph(graph, SIMULATIONS, tree_mode=False)
  children = np.asarray(graph.children_index)
  visits = np.asarray(graph.edge_visits)
  embeddings = np.asarray(graph.embeddings)
  for game in range(BATCH):
    used = int(graph.num_nodes[game])
    # One node per bit pattern of the latent: no two nodes hold the same one.
    assert len({row.tobytes() for row in embeddings[game, :used]}) == used
    assert used <= DISTINCT_LATENTS
    child = children[game, :used]
    loops = child == np.arange(used)[:, None]
    # A self-loop is exactly a move that the latent does not change.
    saturated = embeddings[game, :used] == 1.0
    assert np.array_equal(loops, saturated & (child >= 0))
    assert loops.sum() >= 1
    hits = int(graph.transposition_hits[game])
    assert hits == int((child >= 0).sum()) - (used - 1)
    # Each playout made a node, linked a known latent (a hit), or ended on a
    # self-loop it had taken before (reached a node already on its path).
    later_loop_visits = int(visits[game, :used][loops].sum()) - int(loops.sum())
    assert later_loop_visits > 0
    assert (used - 1) + hits + later_loop_visits == SIMULATIONS


@pytest.mark.quick_variants("muzero")
@pytest.mark.parametrize("policy", ["muzero", "gumbel"])
def test_transpositions_false_keeps_the_tree(policy):
  graph = search(policy, transpositions=False)
  check_graph(graph, SIMULATIONS, tree_mode=True)
  assert np.all(np.asarray(graph.num_nodes) == SIMULATIONS + 1)
  assert np.all(np.asarray(graph.node_visits)[:, 0] == SIMULATIONS + 1)
  assert np.all(np.asarray(graph.transposition_hits) == 0)
  children = np.asarray(graph.children_index)
  assert not np.any(children == np.arange(SIMULATIONS + 1)[None, :, None])
