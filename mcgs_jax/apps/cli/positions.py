"""The positions `mcgs-jax search` (and `play`) start from: move lists parsed from
`--moves` or a `--positions` file, and played from the start with each illegal move
named."""

import functools
from collections.abc import Sequence


def parse_moves(text: str) -> list[int]:
  """`"3, 2,4"` -> `[3, 2, 4]`; `""` -> `[]`; ValueError for anything malformed."""
  text = text.strip()
  if not text:
    return []
  moves = []
  for part in text.split(","):
    part = part.strip()
    try:
      moves.append(int(part))
    except ValueError:
      raise ValueError(f"malformed move list {text!r}: {part!r} is not an integer") from None
  return moves


def read_positions(path: str) -> list[list[int]]:
  """The move lists of a positions file, one per line (ValueError naming
  `--positions` if unreadable)."""
  try:
    with open(path, encoding="utf-8") as file:
      lines = file.read().splitlines()
  except FileNotFoundError:
    raise ValueError(f"--positions: file not found: {path}") from None
  except (OSError, UnicodeDecodeError) as error:
    reason = getattr(error, "strerror", None) or str(error)
    raise ValueError(f"--positions: cannot read {path}: {reason}") from None
  if not lines:
    raise ValueError(f"--positions: file {path} is empty")
  positions = []
  for number, line in enumerate(lines, start=1):
    try:
      positions.append(parse_moves(line))
    except ValueError as error:
      raise ValueError(f"--positions {path}:{number}: {error}") from None
  return positions


@functools.lru_cache(maxsize=8)
def _jitted_step(env):
  import jax

  return jax.jit(env.step)


@functools.lru_cache(maxsize=8)
def _jitted_start(env):
  """The start state (key 0) in one compiled program: run eagerly, pgx's `init` is
  dozens of small programs, each a read of the compilation cache."""
  import jax

  return jax.jit(lambda: env.init(jax.random.PRNGKey(0)))


def _illegal_reason(game, spec: str, state, action: int) -> str:
  """Why `action` is illegal in `state`, in the game's words where known."""
  name = spec.partition(":")[0]
  if name == "connect_four":
    return f"column {action} is full"
  if name == "tic_tac_toe":
    return f"cell {action} is already taken"
  if name == "nim":
    heap = action // game.env.max_heap
    heaps = [int(h) for h in state.heaps]
    return f"{game.env.describe_action(action)}: heap {heap} has only {heaps[heap]} stone(s)"
  return "it is not a legal move there"


def play_moves(game, spec: str, moves: Sequence[int], source: str = "--moves"):
  """The state after `moves` from the start (key 0), or ValueError naming `source`,
  the move's number (from 1) and the game's reason."""
  import numpy as np

  state = _jitted_start(game.env)()
  step = _jitted_step(game.env)
  for number, action in enumerate(moves, start=1):
    where = f"move {number} of {source}"
    if not 0 <= action < game.num_actions:
      raise ValueError(f"{where}: action {action} is out of range [0, {game.num_actions})")
    if bool(state.terminated) or bool(getattr(state, "truncated", False)):
      raise ValueError(f"{where}: action {action} is played after the game ended")
    if not np.asarray(state.legal_action_mask)[action]:
      raise ValueError(
        f"{where}: action {action} is illegal: {_illegal_reason(game, spec, state, action)}"
      )
    state = step(state, np.int32(action))
  return state
