"""Bounds on how many actions a position of a game has legal at once.

A node whose edges keep `K` slots for its valid actions (compact edges,
`max_children=K`) drops none when `K >= max_legal_actions(game)`.

* `MAX_LEGAL_ACTIONS`: per game, an upper bound that no position pgx reaches can
  exceed, with the argument in `BOUND_REASONS` (a known maximum, or a count).
* `MEASURED_LEGAL_ACTIONS`: per game, the most legal actions seen in random games
  of pgx (`measure_legal_actions`, with the arguments in `MEASUREMENT`); below the
  bound where positions with many moves are rare in random play.
"""

import functools

import jax
import jax.numpy as jnp

from mcgs_jax.games.adapter import SUPPORTED_GAMES
from mcgs_jax.games.evaluators import random_legal_actions
from mcgs_jax.games.keys import SUPPORTED_ENV_IDS

MAX_LEGAL_ACTIONS: dict[str, int] = {
  "tic_tac_toe": 9,
  "connect_four": 7,
  "othello": 60,
  "hex": 121,
  "go_9x9": 82,
  "go_19x19": 362,
  "chess": 218,
  "gardner_chess": 160,
  "animal_shogi": 74,
  "shogi": 593,
  "2048": 4,
}

BOUND_REASONS: dict[str, str] = {
  "tic_tac_toe": "the empty board's 9 cells",
  "connect_four": "7 columns",
  "othello": "60 empty squares at most; pgx's pass is legal only when no square is",
  "hex": "121 cells; the swap (action 121) is legal only on the second move, when 120 are empty",
  "go_9x9": "81 points and the pass, all legal on the empty board",
  "go_19x19": "361 points and the pass, all legal on the empty board",
  "chess": "the most legal moves of a reachable chess position (each promotion "
  "choice a move, as pgx's actions count them)",
  "gardner_chess": "at most 10 pieces a side, none with more than 16 actions (a "
  "queen in the centre; a pawn about to promote has at most 3 squares times 4 pieces)",
  "animal_shogi": "the lion's 8 moves, at most 6 for each of the other 6 pieces a "
  "side can own, and drops of at most 3 kinds on at most 10 empty squares",
  "shogi": "the most legal moves of a shogi position (promoting and not promoting "
  "counted apart, as pgx's actions count them)",
  "2048": "4 directions",
}

# The arguments of `measure_legal_actions` behind `MEASURED_LEGAL_ACTIONS` (every
# game ends within 1,024 moves: pgx's step limits are at most 722).
MEASUREMENT = {"num_games": 256, "num_steps": 1024, "seed": 0}

# pgx 2.6.0, 2026-12-06: `measure_legal_actions(game, **MEASUREMENT)` per game.
MEASURED_LEGAL_ACTIONS: dict[str, int] = {
  "tic_tac_toe": 9,
  "connect_four": 7,
  "othello": 21,
  "hex": 121,
  "go_9x9": 82,
  "go_19x19": 362,
  "chess": 72,
  "gardner_chess": 38,
  "animal_shogi": 32,
  "shogi": 236,
}


def max_legal_actions(game) -> int | None:
  """The most actions legal at once in any position of `game`, or None where no
  bound below the action count is tabled (Nim, the DAG game: their action counts
  are small).

  Args:
    game: a `make_game` spec (`"chess"`, `"nim:3,4,5"`, ...), a `Game`, or an env
      with a pgx `id`.

  Raises:
    ValueError: for a spec string that names no game of `make_game`.
  """
  name: str | None
  if isinstance(game, str):
    name = game.partition(":")[0]
    if name not in SUPPORTED_GAMES:
      raise ValueError(f"game {game!r} is not a game of make_game ({', '.join(SUPPORTED_GAMES)})")
  else:
    env = getattr(game, "env", game)
    name = getattr(env, "id", None)
  return None if name is None else MAX_LEGAL_ACTIONS.get(name)


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _most_legal(env, num_games: int, num_steps: int, key: jax.Array) -> jax.Array:
  """Most legal actions of a state that is not over, over `num_games` random games
  of `num_steps` moves at most."""
  init_key, play_key = jax.random.split(key)
  state = jax.vmap(env.init)(jax.random.split(init_key, num_games))

  def count(state):
    legal = jnp.sum(state.legal_action_mask, axis=-1, dtype=jnp.int32)
    return jnp.max(jnp.where(state.terminated | state.truncated, 0, legal))

  def one_move(carry, step_key):
    state, most = carry
    action = random_legal_actions(jax.random.split(step_key, num_games), state.legal_action_mask)
    state = jax.vmap(env.step)(state, action)
    return (state, jnp.maximum(most, count(state))), None

  (_, most), _ = jax.lax.scan(
    one_move, (state, count(state)), jax.random.split(play_key, num_steps)
  )
  return most


def measure_legal_actions(spec: str, *, num_games: int, num_steps: int, seed: int = 0) -> int:
  """The most legal actions of a position not over, in `num_games` games of
  uniformly random legal moves of the pgx game `spec`, `num_steps` moves each (a
  game that ends stays over).

  Raises:
    ValueError: for a spec that is not a pgx game of `make_game`, or a count below 1.
  """
  if spec not in SUPPORTED_ENV_IDS:
    raise ValueError(
      f"spec {spec!r} is not a pgx game of make_game ({', '.join(SUPPORTED_ENV_IDS)})"
    )
  if num_games < 1 or num_steps < 1:
    raise ValueError(f"num_games ({num_games}) and num_steps ({num_steps}) must be at least 1")
  import pgx

  return int(_most_legal(pgx.make(spec), num_games, num_steps, jax.random.PRNGKey(seed)))
