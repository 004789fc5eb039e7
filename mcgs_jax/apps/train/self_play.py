"""Self-play of the training loop: `make_self_play(game, config)` plays a batch of
games to the end in one jitted scan, every move chosen by a search guided by the
current network, and returns every position's training targets."""

from typing import Any

import jax
import jax.numpy as jnp

import mcgs_jax as mg
from mcgs_jax.apps import engines, registry
from mcgs_jax.apps.registry import POLICIES, mctx_policy
from mcgs_jax.apps.train import data_parallel
from mcgs_jax.apps.train.config import Config
from mcgs_jax.games import evaluators
from mcgs_jax.games.adapter import Game


def max_game_length(game: Game, game_id: str) -> int:
  """Moves after which every game is over (the length of the self-play scan)."""
  length = registry.max_game_length(game)
  if length is None:
    raise ValueError(f"unknown game length for {game_id!r}; add it to registry.MAX_GAME_LENGTH")
  return length


def search_policy(game: Game, config: Config, *, fast: bool = False):
  """`policy(params, key, root, invalid, graph) -> PolicyOutput` of self-play: the
  full search, or with `fast` the playout cap's fast one (`fast_search_simulations`,
  no root noise)."""
  # muzero explores by sampling its move at `temperature`; gumbel by its own noise.
  extra: dict[str, Any] = {}
  if config.policy == "muzero":
    extra["temperature"] = config.temperature
    if fast:
      extra["dirichlet_fraction"] = 0.0
  simulations = config.fast_search_simulations if fast else config.num_simulations
  if engines.get_engine(config.engine).external:
    mctx_search = mctx_policy(config.policy, game.recurrent_fn, **extra)
    return lambda params, key, root, invalid, graph: mctx_search(
      params, key, root, simulations, invalid
    )
  search_policy = POLICIES[config.policy]
  if config.solver:
    extra["solver"] = True
  if config.self_play_forced_playouts > 0 and not fast:  # a fast search has no noise to force
    extra["forced_playouts"] = config.self_play_forced_playouts

  def search(params, key, root, invalid, graph):
    return search_policy(
      params,
      key,
      root,
      game.recurrent_fn,
      simulations,
      invalid_actions=invalid,
      hash_fn=game.hash_fn,
      value_bounds=game.value_bounds,
      transpositions=config.transpositions,
      capacity=config.search_capacity,
      graph=graph,
      **extra,
    )

  return search


def _capped_search_policy(game: Game, config: Config):
  """Playout cap randomization: `policy(params, key, root, invalid, graph) ->
  (action, action_weights, search_graph or None, full)`, the full search with
  probability `config.full_search_probability` (one coin for the batch), else the
  fast one; `full` is the coin (a scalar bool)."""
  full_search = search_policy(game, config)
  fast_search = search_policy(game, config, fast=True)
  keep_graph = config.engine == "mcgs"

  def outputs(search):
    def run(params, key, root, invalid, graph):
      output = search(params, key, root, invalid, graph)
      return output.action, output.action_weights, output.search_graph if keep_graph else None

    return run

  def search(params, key, root, invalid, graph):
    search_key, coin_key = jax.random.split(key)
    full = jax.random.uniform(coin_key) < config.full_search_probability
    action, weights, searched = jax.lax.cond(
      full, outputs(full_search), outputs(fast_search), params, search_key, root, invalid, graph
    )
    return action, weights, searched, full

  return search


def make_self_play(game: Game, config: Config, mesh: jax.sharding.Mesh | None = None):
  """Returns `self_play(params, rng_key) -> dict of [T, B, ...] arrays` (jitted).

  With a `mesh` (`data_parallel.training_mesh`) the games are split over its
  devices (params and key replicated, the records sharded on `B`); the games are
  the same, bit for bit, as on one device.

  With `config.reuse` each game keeps its graph from move to move: the search of
  move `t` continues the graph of move `t - 1` rerooted by the move played (fresh
  Dirichlet noise on the root's prior every move; a game over gets an empty graph;
  with `config.make_room` only its `capacity - num_simulations` most visited nodes
  are kept).

  The returned dict holds, for move `t` of game `b`:
    * `observation` `[T, B, ...]`: the position before the move, from the mover's
      point of view (pgx observations);
    * `policy` `[T, B, A]`: the policy target: the search's `action_weights`
      (visit distribution for muzero, improved policy for gumbel), or with
      `policy_target="new"` the distribution of this search's own root visits;
      sums to 1 over legal actions;
    * `value` `[T, B]`: the return from move `t` on for the player who moves at
      `t` (its rewards of moves `t, t + 1, ...`): the final outcome (+1 win, 0 draw,
      -1 loss) in a board game, the return-to-go of a one-player task (jumanji);
    * `legal` `[T, B, A]`: the legal actions at `t`;
    * `valid` `[T, B]`: False for padding (the game had already ended);
    * `carried_visits` `[T, B]`: root visits the search started with (kept from
      the previous move with `reuse`; 0 otherwise);
    * `capacity_overflows` `[T, B]`: playouts of this search that found the graph
      full (0 for mctx);
    * `new_root_visits` `[T, B]`: root edge visits this search added (one per
      simulation that took a root edge; 0 for mctx);
    * with playout cap randomization (`config.full_search_probability < 1`),
      `policy_weight` `[T, B]` float: 1 for a full search, 0 for a fast one (not a
      policy target).
  """
  length = max_game_length(game, config.game)
  full_search = search_policy(game, config)
  search = _capped_search_policy(game, config) if config.playout_cap else full_search
  keep_graph = config.reuse and config.engine == "mcgs"
  move = _self_play_move(game, config, search, keep_graph, mesh)

  def self_play(params, rng_key):
    init_key, moves_key = jax.random.split(rng_key)
    state = data_parallel.shard_games(game.init(init_key, config.num_games), mesh)
    graph = None
    if keep_graph:
      shapes = jax.eval_shape(
        lambda: (
          full_search(
            params, init_key, game.root(params, init_key, state), game.invalid_actions(state), None
          ).search_graph
        )
      )
      graph = data_parallel.shard_games(mg.empty_like(shapes), mesh)
    trajectory = _play_until_over(move, (params, state, graph), moves_key, length)
    # The return from each move on (rewards of that move and every later one): the
    # final outcome in a board game, whose only reward is the last move's.
    rewards = trajectory.pop("rewards")  # [T, B, players]
    returns = jnp.flip(jnp.cumsum(jnp.flip(rewards, 0), axis=0), 0)
    player = trajectory.pop("player")  # [T, B]
    value = jnp.take_along_axis(returns, player[..., None], axis=-1)[..., 0]
    trajectory["value"] = jnp.where(trajectory["valid"], value, 0.0)
    trajectory["policy"] = jnp.where(trajectory["valid"][..., None], trajectory["policy"], 0.0)
    return trajectory

  if mesh is None:
    return jax.jit(self_play)
  return jax.jit(
    self_play,
    in_shardings=data_parallel.replicated(mesh),
    out_shardings=data_parallel.batch_sharded(mesh, axis=1),
  )


def _play_until_over(move, carry, key: jax.Array, length: int) -> dict:
  """The records `[length, B, ...]` of `move(carry, key_t)` for `t = 0, 1, ...` while
  a game of the batch is not over (at most `length` moves; move `t` takes key `t` of
  `split(key, length)`). Rows after the last game ended stay zero, their `valid`
  False: the moves a fixed-length scan would play there change nothing and record
  nothing valid, so the valid positions are the scan's, and a batch of short
  episodes (Sudoku's 20 cells of 81) stops early."""
  keys = jax.random.split(key, length)
  shapes = jax.eval_shape(move, carry, keys[0])[1]
  empty = jax.tree_util.tree_map(lambda s: jnp.zeros((length, *s.shape), s.dtype), shapes)

  def playing(loop):
    step, (_, state, _), _ = loop
    return (step < length) & jnp.any(~evaluators.is_finished(state))

  def one_move(loop):
    step, carry, records = loop
    carry, record = move(carry, keys[step])
    records = jax.tree_util.tree_map(
      lambda rows, row: jax.lax.dynamic_update_index_in_dim(rows, row, step, 0), records, record
    )
    return step + 1, carry, records

  return jax.lax.while_loop(playing, one_move, (jnp.int32(0), carry, empty))[2]


def _graph_move_counts(
  config: Config, graph: mg.Graph | None, searched: mg.Graph, target: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
  """`(target, carried, overflows, new_root_visits)` of one move of this library's
  search, which continued `graph` (None: a fresh search) into `searched`: the policy
  target (`[B, A]`: the search's own visits with `policy_target="new"`, pruned of
  forced playouts where self-play prunes them), and `[B]` the root visits carried
  over, the capacity overflows of this search and the root visits it added."""
  new_root_visits = jnp.sum(searched.edge_visits[:, 0], axis=-1)
  carried = jnp.zeros_like(new_root_visits)
  overflows = searched.capacity_overflows
  counted = searched.edge_visits[:, 0]
  if graph is not None:
    new_root_visits -= jnp.sum(graph.edge_visits[:, 0], axis=-1)
    overflows = overflows - graph.capacity_overflows
    carried = graph.node_visits[:, 0]
    if config.policy_target == "new":
      counted = counted - graph.edge_visits[:, 0]
      if config.policy == "muzero":
        total = jnp.sum(counted, axis=-1, keepdims=True)
        # A search always adds visits to a live root; the guard keeps a finished
        # game's row finite (it is masked out of the record).
        target = jnp.where(total > 0, counted / jnp.maximum(total, 1), target)
  if config.self_play_forced_playouts > 0:
    target = mg.prune_forced_playouts(
      searched, counted, forced_playouts=config.self_play_forced_playouts
    )
  return target, carried, overflows, new_root_visits


def _self_play_move(
  game: Game, config: Config, search, keep_graph: bool, mesh: jax.sharding.Mesh | None
):
  """`move((params, state, graph), key) -> ((params, state, graph), record)`: the body
  of `make_self_play`'s scan, one move of every game with `search` (the full search,
  or with playout cap randomization `_capped_search_policy`), the graph rerooted by
  the move with `keep_graph`. `record` holds the move's `[B, ...]` rows of
  `make_self_play`'s dict, with `player` and `rewards` in place of `value`."""

  def move(carry, key):
    params, state, graph = carry
    root_key, search_key = jax.random.split(key)
    invalid = game.invalid_actions(state)
    root = game.root(params, root_key, state)
    if config.playout_cap:
      action, target, searched, full = search(params, search_key, root, invalid, graph)
    else:
      output = search(params, search_key, root, invalid, graph)
      action, target = output.action, output.action_weights
      searched = output.search_graph if config.engine == "mcgs" else None
    valid = ~evaluators.is_finished(state)
    carried = overflows = new_root_visits = jnp.zeros(valid.shape, jnp.int32)
    if config.engine == "mcgs":
      target, carried, overflows, new_root_visits = _graph_move_counts(
        config, graph, searched, target
      )
    # Finished games are still searched (the batch moves together), but stepping
    # them is a no-op and their records are masked out by `valid`.
    next_state = data_parallel.shard_games(game.step(state, action), mesh)
    next_graph = None
    if keep_graph:
      room = config.search_capacity - config.num_simulations
      next_graph = mg.reroot(searched, action, max_nodes=room if config.make_room else None)
    next_graph = data_parallel.shard_games(next_graph, mesh)
    record = dict(
      observation=state.observation,
      policy=target,
      legal=state.legal_action_mask & valid[:, None],
      player=state.current_player,
      valid=valid,
      rewards=jnp.asarray(next_state.rewards, jnp.float32),
      carried_visits=jnp.where(valid, carried, 0),
      capacity_overflows=jnp.where(valid, overflows, 0),
      new_root_visits=jnp.where(valid, new_root_visits, 0),
    )
    if config.playout_cap:
      record["policy_weight"] = (full & valid).astype(jnp.float32)
    return (params, next_state, next_graph), record

  return move
