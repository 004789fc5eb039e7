"""2048 split at its afterstate, for `mcgs_jax.stochastic_muzero_policy`.

pgx's `Play2048.step` draws the new tile inside the step, so a search cannot see
the chance. Here a move is two halves, with pgx's rules and encoding (the board
holds log2 of each tile, 0 empty; actions 0 left, 1 up, 2 right, 3 down):

- the **decision** half (deterministic): slide and merge toward the chosen side;
  its board is the *afterstate*, its reward the sum of the merged tiles, and the
  move is legal when it changes the board;
- the **chance** half: a 2 (probability 0.9) or a 4 (0.1) on an empty cell, the
  cell uniform among the empty ones. Outcome `c` of `C = 2 * cells` puts tile
  `1 + c // cells` (log2) on cell `c % cells`; outcomes on occupied cells have
  probability 0. The game ends when the new board has no legal move.

`make_2048(evaluator)` builds everything a search takes: `root`, `invalid_actions`,
`decision_recurrent_fn`, `chance_recurrent_fn`, `hash_fn` (a state's key: its
board) and `afterstate_hash_fn` (an afterstate's key: its board and whether the
move was illegal). By default the merge reward sits on the state-to-afterstate edge
(`DecisionRecurrentFnOutput.reward`), so a chance node is shared by every move that
reaches its board whatever the merge earned; `reward_on="chance"` moves it to the
outcome edges, mctx's convention (the afterstate then carries the reward and its
key includes it), for `mctx.stochastic_muzero_policy`. The two give the same search
on a tree when the evaluators agree, as they do here.

Boards are `size x size` (4 is pgx's game; 2 is small enough for the exact
expectimax of `mcgs_jax.games.expectimax`). Board rules are written for one board
and lifted with `jax.vmap`.

An illegal move (only possible below the root, where the prior gives it
probability 0) ends the game with reward -1, as pgx ends a game on an illegal
action with reward -1.

Backgammon does not fit this split as it stands: a player moves up to four times
in a row (one decision per die) after a single roll, so decision and chance levels
do not alternate strictly, as mctx's Stochastic MuZero assumes. It fits only with
a dummy chance outcome of probability 1 between the moves of one turn (or with the
whole turn as one decision, a much larger action space).
"""

import dataclasses
from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax._src import hashing
from mcgs_jax._src.batched import take
from mcgs_jax._src.logits import mask_invalid_actions
from mcgs_jax._src.types import ChanceRecurrentFnOutput, DecisionRecurrentFnOutput, RootFnOutput

NUM_ACTIONS = 4
TILE_PROBS = (0.9, 0.1)  # new tile 2 (log2 1) and 4 (log2 2)
ILLEGAL_MOVE_REWARD = -1.0  # as pgx: an illegal action ends the game with -1
MAX_EXPONENT = 18  # one-hot width of the network's input (tiles up to 2^17)
REWARD_EDGES = ("decision", "chance")


# ----------------------------------------------------------------------------------
# Rules, on one board `[size * size]` int32 (log2 of the tiles, 0 empty).


def board_size(board) -> int:
  cells = board.shape[-1]
  size = int(round(cells**0.5))
  if size * size != cells:
    raise ValueError(f"a board must have size * size cells, got {cells}")
  return size


def _compact(line):
  """`[n]`: the non-zero entries moved to the front, in order."""
  occupied = line != 0
  target = jnp.where(occupied, jnp.cumsum(occupied) - 1, line.shape[0])
  return jnp.zeros_like(line).at[target].set(line, mode="drop")


def slide_line(line):
  """`(line, reward)`: one line slid toward index 0, equal neighbours merged once,
  from the front (2 2 2 2 -> 4 4 0 0; 2 2 4 -> 4 4 0, no chain)."""
  tiles = _compact(line)
  size = tiles.shape[0]
  merged, reward, taken = [], jnp.float32(0.0), jnp.bool_(False)
  for k in range(size):
    following = tiles[k + 1] if k + 1 < size else jnp.zeros_like(tiles[k])
    merge = ~taken & (tiles[k] != 0) & (tiles[k] == following)
    merged.append(jnp.where(taken, 0, tiles[k] + merge))
    reward = reward + jnp.where(merge, 2.0 ** (tiles[k] + 1), 0.0)
    taken = merge
  return _compact(jnp.stack(merged)), reward


def all_moves(board):
  """`(afterstates [4, cells], rewards [4], legal [4])` of one board: every move slid
  and merged. Move `a` turns the board `a` quarter turns anticlockwise, slides the
  rows left and turns it back, as pgx does; it is legal when it changes the board."""
  size = board_size(board)
  grid = board.reshape(size, size)
  boards, rewards = [], []
  for action in range(NUM_ACTIONS):
    rows, row_rewards = jax.vmap(slide_line)(jnp.rot90(grid, action))
    boards.append(jnp.rot90(rows, -action).reshape(-1))
    rewards.append(jnp.sum(row_rewards))
  afterstates = jnp.stack(boards)
  return afterstates, jnp.stack(rewards), jnp.any(afterstates != board, axis=-1)


def legal_actions(board):
  """`[4]` bool: the moves that change the board."""
  return all_moves(board)[2]


def chance_probs(board):
  """`[2 * cells]` float32: probability of each outcome at an afterstate board."""
  empty = (board == 0).astype(jnp.float32)
  per_cell = empty / jnp.maximum(jnp.sum(empty), 1.0)
  return jnp.concatenate([TILE_PROBS[0] * per_cell, TILE_PROBS[1] * per_cell])


def chance_logits(board):
  """`log(chance_probs)`, impossible outcomes at the lowest finite logit (not -inf:
  no NaN in a softmax even if a row had no possible outcome)."""
  probs = chance_probs(board)
  return jnp.where(
    probs > 0, jnp.log(jnp.maximum(probs, jnp.finfo(jnp.float32).tiny)), jnp.finfo(jnp.float32).min
  )


def place(board, outcome):
  """The board after chance outcome `outcome` (cell `outcome % cells` gets tile
  `1 + outcome // cells`)."""
  cells = board.shape[-1]
  return board.at[outcome % cells].set((1 + outcome // cells).astype(board.dtype))


def sample_outcome(rng_key, board):
  """One chance outcome at an afterstate board, drawn with `chance_probs`."""
  return jax.random.categorical(rng_key, chance_logits(board)).astype(jnp.int32)


def initial_board(rng_key, size: int = 4):
  """A new game: two random tiles on an empty board, as pgx's `init`."""
  first, second = jax.random.split(rng_key)
  board = jnp.zeros((size * size,), jnp.int32)
  board = place(board, sample_outcome(first, board))
  return place(board, sample_outcome(second, board))


# ----------------------------------------------------------------------------------
# Embeddings and keys.


@chex.dataclass(frozen=True)
class Afterstate:
  """A batch of afterstates (a state's embedding is its board, `[B, cells]` int32).

  board: `[B, cells]` int32, the board after sliding and merging.
  reward: `[B]` float32, what the merges earned (read by `reward_on="chance"`).
  illegal: `[B]` bool, the move did not change the board: the game ends.
  """

  board: chex.Array
  reward: chex.Array
  illegal: chex.Array


def state_key(boards):
  """A state's transposition key: its board (nothing else decides its future)."""
  return hashing.hash_pytree(boards)


def afterstate_key(afterstate: Afterstate):
  """An afterstate's key when the reward is on the decision edge: its board and
  whether the move was illegal (an illegal move's "afterstate" ends the game)."""
  return hashing.hash_pytree((afterstate.board, afterstate.illegal))


def afterstate_key_with_reward(afterstate: Afterstate):
  """An afterstate's key when it carries its reward to the outcome edges
  (`reward_on="chance"`): board, illegal flag and reward."""
  return hashing.hash_pytree((afterstate.board, afterstate.illegal, afterstate.reward))


def observation(boards):
  """`[B, cells, MAX_EXPONENT]` float32 one-hot tiles, the network's input."""
  return jax.nn.one_hot(boards, MAX_EXPONENT, dtype=jnp.float32)


# ----------------------------------------------------------------------------------
# Evaluators: `state(params, key, boards) -> (logits [B, 4], value [B])` and
# `afterstate(params, key, boards) -> value [B]`; values are expected future rewards
# (the reward of the move into an afterstate not included).


@dataclasses.dataclass(frozen=True)
class Evaluator2048:
  """Scores 2048 states and afterstates for the search (logits unmasked: the game
  masks illegal moves)."""

  state: Callable[[Any, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]
  afterstate: Callable[[Any, jax.Array, jax.Array], jax.Array]
  name: str = "custom"


def uniform_evaluator() -> Evaluator2048:
  """Uniform prior, value 0: the search sees only the rewards it walks through."""

  def state(params, rng_key, boards):
    del params, rng_key
    return (
      jnp.zeros((boards.shape[0], NUM_ACTIONS), jnp.float32),
      jnp.zeros((boards.shape[0],), jnp.float32),
    )

  def afterstate(params, rng_key, boards):
    del params, rng_key
    return jnp.zeros((boards.shape[0],), jnp.float32)

  return Evaluator2048(state=state, afterstate=afterstate, name="uniform")


def random_playout(rng_key, board, num_steps: int, *, from_afterstate: bool = False):
  """Sum of the rewards of `num_steps` uniformly random legal moves from one board
  (fewer if the game ends); `from_afterstate` starts with a chance outcome."""
  first, rng_key = jax.random.split(rng_key)
  if from_afterstate:
    board = place(board, sample_outcome(first, board))

  def step(unused_index, carry):
    board, total, key = carry
    key, move_key, tile_key = jax.random.split(key, 3)
    afterstates, rewards, legal = all_moves(board)
    alive = jnp.any(legal)
    action = jax.random.categorical(move_key, jnp.where(legal, 0.0, -jnp.inf))
    action = jnp.where(alive, action, 0)  # argmax of all -inf is garbage: keep 0
    after = afterstates[action]
    following = place(after, sample_outcome(tile_key, after))
    return (jnp.where(alive, following, board), total + jnp.where(alive, rewards[action], 0.0), key)

  _, total, _ = jax.lax.fori_loop(0, num_steps, step, (board, jnp.float32(0.0), rng_key))
  return total


def rollout_evaluator(num_steps: int = 32, num_rollouts: int = 1) -> Evaluator2048:
  """Uniform prior; value: mean reward of `num_rollouts` random playouts of
  `num_steps` moves (a truncated return: the game may go on)."""
  if num_steps < 1 or num_rollouts < 1:
    raise ValueError(f"num_steps and num_rollouts must be >= 1, got {num_steps}, {num_rollouts}")

  def mean_return(rng_key, boards, from_afterstate):
    keys = jax.random.split(rng_key, (boards.shape[0], num_rollouts))
    playout = lambda key, board: random_playout(
      key, board, num_steps, from_afterstate=from_afterstate
    )
    returns = jax.vmap(jax.vmap(playout, in_axes=(0, None)))(keys, boards)
    return jnp.mean(returns, axis=1)

  def state(params, rng_key, boards):
    del params
    return (
      jnp.zeros((boards.shape[0], NUM_ACTIONS), jnp.float32),
      mean_return(rng_key, boards, False),
    )

  def afterstate(params, rng_key, boards):
    del params
    return mean_return(rng_key, boards, True)

  return Evaluator2048(
    state=state, afterstate=afterstate, name=f"rollout({num_steps} steps x {num_rollouts})"
  )


def init_network(rng_key, size: int = 4, hidden=(64, 64)):
  """A small flax MLP (`mcgs_jax.games.networks.MLPPolicyValueNet`) on one-hot
  boards. Returns `(apply_fn, params)` for `network_evaluator`."""
  from mcgs_jax.games.networks import MLPPolicyValueNet

  network = MLPPolicyValueNet(num_actions=NUM_ACTIONS, hidden=tuple(hidden))
  params = network.init(rng_key, observation(jnp.zeros((1, size * size), jnp.int32)))
  return network.apply, params


def network_evaluator(apply_fn) -> Evaluator2048:
  """`apply_fn(params, observation) -> (logits [B, 4], value [B])` on states; the
  afterstate value is the same network's value of the afterstate board."""

  def state(params, rng_key, boards):
    del rng_key
    logits, value = apply_fn(params, observation(boards))
    return logits.astype(jnp.float32), value.astype(jnp.float32)

  def afterstate(params, rng_key, boards):
    del rng_key
    return apply_fn(params, observation(boards))[1].astype(jnp.float32)

  return Evaluator2048(state=state, afterstate=afterstate, name="network")


# ----------------------------------------------------------------------------------
# The game.


@dataclasses.dataclass(frozen=True)
class Stochastic2048:
  """Everything `stochastic_muzero_policy` takes for 2048 (see the module
  docstring), and the two halves of a step for playing games.

  size: board side; cells = size * size.
  num_chance_outcomes: `C = 2 * cells`.
  reward_on: `"decision"` or `"chance"`, the edge that carries the merge reward.
  """

  size: int
  num_chance_outcomes: int
  reward_on: str
  evaluator: Evaluator2048
  decision_recurrent_fn: Callable
  chance_recurrent_fn: Callable
  hash_fn: Callable
  afterstate_hash_fn: Callable
  num_actions: int = NUM_ACTIONS

  def init(self, rng_key, batch_size: int):
    """`[B, cells]` int32 boards of new games."""
    return jax.vmap(initial_board, in_axes=(0, None))(
      jax.random.split(rng_key, batch_size), self.size
    )

  def invalid_actions(self, boards):
    """`[B, 4]` bool, the moves that would not change the board."""
    return ~jax.vmap(legal_actions)(boards)

  def terminated(self, boards):
    """`[B]` bool, no legal move left."""
    return ~jnp.any(jax.vmap(legal_actions)(boards), axis=-1)

  def root(self, params, rng_key, boards) -> RootFnOutput:
    """The evaluation of the root boards (illegal moves at the lowest logit)."""
    logits, value = self.evaluator.state(params, rng_key, boards)
    return RootFnOutput(
      prior_logits=mask_invalid_actions(logits, self.invalid_actions(boards)),
      value=value,
      embedding=boards,
    )

  def afterstates(self, boards, actions):
    """`(afterstates [B, cells], rewards [B])` of the moves played."""
    after, rewards, _ = jax.vmap(all_moves)(boards)
    return take(after, actions), take(rewards, actions)

  def sample_outcomes(self, rng_key, afterstates):
    """`[B]` int32 chance outcomes drawn with the game's probabilities."""
    return jax.vmap(sample_outcome)(jax.random.split(rng_key, afterstates.shape[0]), afterstates)

  def place(self, afterstates, outcomes):
    """`[B, cells]` boards after the chance outcomes."""
    return jax.vmap(place)(afterstates, outcomes)

  def step(self, rng_key, boards, actions):
    """One real move of every game: `(boards, rewards, outcomes)`."""
    after, rewards = self.afterstates(boards, actions)
    outcomes = self.sample_outcomes(rng_key, after)
    return self.place(after, outcomes), rewards, outcomes

  def random_positions(self, rng_key, batch_size: int, max_moves: int):
    """`[B, cells]` boards reached from new games by a uniformly random number (0 to
    `max_moves`) of uniformly random legal moves, never a finished one: a move that
    would end the game is not played."""
    init_key, length_key, rng_key = jax.random.split(rng_key, 3)
    boards = self.init(init_key, batch_size)
    lengths = jax.random.randint(length_key, (batch_size,), 0, max_moves + 1)

    def move(index, carry):
      boards, key = carry
      key, action_key, step_key = jax.random.split(key, 3)
      legal = ~self.invalid_actions(boards)
      actions = jax.random.categorical(action_key, jnp.where(legal, 0.0, -jnp.inf), axis=-1)
      following, _, _ = self.step(step_key, boards, actions)
      keep = (index >= lengths) | self.terminated(following)
      return jnp.where(keep[:, None], boards, following), key

    return jax.lax.fori_loop(0, max_moves, move, (boards, rng_key))[0]


def make_2048(
  evaluator: Evaluator2048 | None = None, *, size: int = 4, reward_on: str = "decision"
) -> Stochastic2048:
  """2048 on a `size x size` board for `mcgs_jax.stochastic_muzero_policy`.

  Args:
    evaluator: an `Evaluator2048` (default `uniform_evaluator()`).
    size: board side, >= 2 (4: pgx's game).
    reward_on: `"decision"` (default): the merge reward is the reward of the move,
      on the state-to-afterstate edge, and the afterstate key is the board.
      `"chance"`: mctx's convention (the decision edge has no reward): the
      afterstate carries the reward to its outcome edges, the afterstate value
      includes it, and the key holds it.

  Usage:
    game = make_2048(rollout_evaluator())
    boards = game.init(key, batch_size)
    out = mg.stochastic_muzero_policy(
        params, key, game.root(params, key, boards), game.decision_recurrent_fn,
        game.chance_recurrent_fn, num_simulations=64,
        invalid_actions=game.invalid_actions(boards), hash_fn=game.hash_fn,
        afterstate_hash_fn=game.afterstate_hash_fn)
  """
  evaluator = evaluator or uniform_evaluator()
  if not isinstance(evaluator, Evaluator2048):
    raise TypeError(
      f"evaluator must be an Evaluator2048 (uniform_evaluator(), "
      f"rollout_evaluator(), network_evaluator(apply_fn)), got {evaluator!r}"
    )
  if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 2:
    raise ValueError(f"size must be an int >= 2, got {size!r}")
  if reward_on not in REWARD_EDGES:
    raise ValueError(f"reward_on must be one of {REWARD_EDGES}, got {reward_on!r}")
  on_decision = reward_on == "decision"

  def decision_recurrent_fn(params, rng_key, action, boards):
    after, rewards, legal = jax.vmap(all_moves)(boards)
    # Game by game (`batched.take`): a batch sharded over devices needs no gather.
    illegal = ~take(legal, action)
    board = jnp.where(illegal[:, None], boards, take(after, action))
    reward = jnp.where(illegal, ILLEGAL_MOVE_REWARD, take(rewards, action))
    value = jnp.where(illegal, 0.0, evaluator.afterstate(params, rng_key, board))
    logits = jax.vmap(chance_logits)(board)
    # An illegal move ends the game: one certain outcome, which leads to the end.
    certain = jnp.full_like(logits, jnp.finfo(logits.dtype).min).at[:, 0].set(0.0)
    output = DecisionRecurrentFnOutput(
      chance_logits=jnp.where(illegal[:, None], certain, logits),
      afterstate_value=value + (0.0 if on_decision else reward),
      reward=reward if on_decision else None,
    )
    return output, Afterstate(board=board, reward=reward, illegal=illegal)

  def chance_recurrent_fn(params, rng_key, outcome, afterstate: Afterstate):
    boards = jax.vmap(place)(afterstate.board, outcome)
    legal = jax.vmap(legal_actions)(boards)
    over = afterstate.illegal | ~jnp.any(legal, axis=-1)
    logits, value = evaluator.state(params, rng_key, boards)
    output = ChanceRecurrentFnOutput(
      action_logits=mask_invalid_actions(logits, ~legal),
      value=jnp.where(over, 0.0, value),
      reward=afterstate.reward if not on_decision else jnp.zeros_like(afterstate.reward),
      discount=jnp.where(over, 0.0, 1.0),
    )
    return output, boards

  return Stochastic2048(
    size=int(size),
    num_chance_outcomes=2 * size * size,
    reward_on=reward_on,
    evaluator=evaluator,
    decision_recurrent_fn=decision_recurrent_fn,
    chance_recurrent_fn=chance_recurrent_fn,
    hash_fn=state_key,
    afterstate_hash_fn=afterstate_key if on_decision else afterstate_key_with_reward,
  )


# Largest board side a spec may name: a chance node has `2 * SIZE**2` outcomes.
MAX_BOARD_SIZE = 16


def board_size_of_spec(spec: str) -> int:
  """The board side named by `"2048"` (4) or `"2048:SIZE"`; ValueError otherwise."""
  name, colon, size = spec.partition(":")
  if name != "2048":
    raise ValueError(f"a 2048 spec is '2048' or '2048:SIZE', got {spec!r}")
  if not colon:
    return 4
  if not size.isdigit() or not 2 <= int(size) <= MAX_BOARD_SIZE:
    raise ValueError(
      f"the board size of 2048:SIZE must be an integer in [2, {MAX_BOARD_SIZE}], got {size!r}"
    )
  return int(size)


def make_from_spec(spec: str, evaluator: Evaluator2048 | None = None, **kwargs) -> Stochastic2048:
  """`make_2048` from a game name, `"2048"` or `"2048:SIZE"` (the hook for
  `mcgs_jax.games.adapter.make_game`)."""
  return make_2048(evaluator, size=board_size_of_spec(spec), **kwargs)
