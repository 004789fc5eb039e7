"""The MCTS-solver's proofs in a game whose key holds history (animal shogi: pgx
draws a game whose position repeats, so the exact and bounded keys keep the
positions of the game, and the position key drops them until one repeats): under
each history mode, every root value the search proves agrees with an exhaustive
minimax over pgx's own rules wherever that minimax decides the root within `DEPTH`
plies, and every root with a move that wins at once is proven won."""

import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pytest

import mcgs_jax as mg
from mcgs_jax.games import make_game, search_game

GAME = "animal_shogi"
GAMES = 24  # random games; roots are taken at three plies of each
ROOT_PLIES = (8, 16, 24)
DEPTH = 3  # plies of the exhaustive minimax
SIMULATIONS = 256
CHUNK = 4096  # states stepped at once while exploring (one compile)


def _roots(env):
  """Non-terminal states of `GAMES` uniformly random games at `ROOT_PLIES`."""

  def run(rng):
    states = jax.vmap(env.init)(jax.random.split(rng, GAMES))

    def one_step(states, step_rng):
      logits = jnp.where(states.legal_action_mask, 0.0, -jnp.inf)
      actions = jax.random.categorical(step_rng, logits)
      states = jax.vmap(env.step)(states, actions)
      return states, states

    return jax.lax.scan(one_step, states, jax.random.split(rng, max(ROOT_PLIES)))[1]

  trajectory = jax.jit(run)(jax.random.PRNGKey(23))
  at = jax.tree.map(lambda leaf: leaf[np.asarray(ROOT_PLIES) - 1], trajectory)
  flat = jax.tree.map(lambda leaf: leaf.reshape((-1,) + leaf.shape[2:]), at)
  live = np.flatnonzero(~np.asarray(flat.terminated))
  return jax.tree.map(lambda leaf: leaf[live], flat)


def _minimax(env, roots) -> tuple[list, set]:
  """`(values, wins_at_once)`: per root, its value for the player to move (+1, 0 or
  -1) when every line of at most `DEPTH` plies decides it, else None; and the roots
  with a move that wins at once. Explored level by level with pgx's
  `step`, `CHUNK` states at once."""
  step = jax.jit(jax.vmap(env.step))
  movers = np.asarray(roots.current_player)
  count = len(movers)
  # Per level: the states, and for each its root, its parent's index in the level
  # above, whether it is over, and its reward for its root's player to move.
  levels = [
    dict(
      states=roots,
      root=np.arange(count),
      parent=np.full(count, -1),
      over=np.zeros(count, bool),
      reward=np.zeros(count),
    )
  ]
  for _ in range(DEPTH):
    above = levels[-1]
    legal = np.asarray(above["states"].legal_action_mask) & ~above["over"][:, None]
    parents, actions = np.nonzero(legal)
    chunks = []
    for start in range(0, len(parents), CHUNK):
      index = parents[start : start + CHUNK]
      size = len(index)
      states = jax.tree.map(lambda leaf: leaf[np.pad(index, (0, CHUNK - size))], above["states"])
      stepped = step(states, jnp.asarray(np.pad(actions[start : start + CHUNK], (0, CHUNK - size))))
      chunks.append(jax.tree.map(lambda leaf: np.asarray(leaf[:size]), stepped))
    states = jax.tree.map(lambda *leaves: np.concatenate(leaves), *chunks)
    root = above["root"][parents]
    rewards = np.asarray(states.rewards)
    levels.append(
      dict(
        states=states,
        root=root,
        parent=parents,
        over=np.asarray(states.terminated),
        reward=rewards[np.arange(len(root)), movers[root]],
      )
    )
  first = levels[1]
  wins_at_once = set(first["root"][first["over"] & (first["reward"] == 1)].tolist())
  # Back up from the deepest level: None where a line is still open at DEPTH.
  values = [None] * len(levels[-1]["root"])
  for depth in range(DEPTH, 0, -1):
    level, above = levels[depth], levels[depth - 1]
    values = [
      float(level["reward"][i]) if level["over"][i] else values[i]
      for i in range(len(level["root"]))
    ]
    children = [[] for _ in range(len(above["root"]))]
    for i, parent in enumerate(level["parent"]):
      children[parent].append(values[i])
    root_moves = (depth - 1) % 2 == 0  # the root's player moves at even depths
    best, worst = (1.0, -1.0) if root_moves else (-1.0, 1.0)
    above_values = []
    for child_values in children:
      known = [v for v in child_values if v is not None]
      if best in known:
        above_values.append(best)
      elif child_values and len(known) == len(child_values):
        above_values.append(max(known) if root_moves else min(known))
      else:
        above_values.append(None)
    values = above_values
  return values, wins_at_once


@pytest.mark.slow
@pytest.mark.parametrize("history", ["exact", "bounded", "position"])
def test_proven_roots_agree_with_exhaustive_minimax(history):
  env = pgx.make(GAME)
  roots = _roots(env)
  game = make_game(GAME, history=history)

  @jax.jit
  def search(rng_key, state):
    return search_game(
      mg.muzero_policy, game, state, SIMULATIONS, rng_key, solver=True, temperature=0.0
    )

  out = search(jax.random.PRNGKey(5), roots)
  graph = out.search_graph
  proven = np.asarray(graph.node_proven[:, 0])
  proven_values = np.asarray(graph.proven_values[:, 0])
  truth, wins_at_once = _minimax(env, roots)
  decided = [i for i, value in enumerate(truth) if value is not None]
  compared = [i for i in decided if proven[i]]
  assert len(compared) >= 5, (len(truth), len(decided), int(proven.sum()))
  for i in compared:
    assert proven_values[i] == truth[i], (i, proven_values[i], truth[i])
  # A move that wins at once is a terminal child, proven when the search expands it.
  assert wins_at_once
  for i in wins_at_once:
    assert proven[i] and proven_values[i] == 1.0, i
