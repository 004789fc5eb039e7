"""Policies and evaluators by the names the command line, the arena and the training
loop use: one table of each, so a new policy or evaluator is added in one place.

  * `POLICY_TABLE`: name -> `PolicyEntry` (the search policy, its playing
    options, its mctx counterpart, whether it trains); `POLICIES`, `POLICY_NAMES`,
    `PLAYING_OPTIONS`, `MCTX_POLICY_NAMES` and `TRAINING_POLICY_NAMES` are read
    from it.
  * `playing_policy(name, **options)`: that policy set to play for strength (no
    root noise, most visited move), as the arena and `mcgs-jax search` run it.
  * `make_evaluator(name, env, ...)`: name -> leaf evaluator
    (`mcgs_jax.games.evaluators`).
  * `random_legal_actions`: the package's one uniformly random legal move (defined
    in `mcgs_jax.games.evaluators`, which needs nothing from the apps).
  * `game_from_spec(spec)`: `make_game(spec)`, built once per spec, and
    `max_game_length(game)`: the plies after which every game is over.
"""

import dataclasses
import functools
from collections.abc import Callable

import mcgs_jax as mg
from mcgs_jax.apps.extras import needs_extra
from mcgs_jax.games import adapter, evaluators, keys
from mcgs_jax.games.evaluators import random_legal_actions


@dataclasses.dataclass(frozen=True)
class PolicyEntry:
  """One search policy of the apps, by name.

  Attributes:
    policy: this library's policy (`mcgs_jax.muzero_policy`, ...).
    playing_options: keywords that make it play rather than explore (muzero: root
      noise off and the most visited action instead of a sample; uct plays its most
      visited action and gumbel its Sequential-Halving winner anyway).
    mctx_policy: the name of DeepMind's mctx function of the same policy, or None
      where mctx has none (UCT): the policies the `mctx` engine can run.
    trains: whether the AlphaZero loop can train with it (its `action_weights` are a
      policy target).
  """

  policy: Callable
  playing_options: dict = dataclasses.field(default_factory=dict)
  mctx_policy: str | None = None
  trains: bool = False


# The one table of policies: the command line, the arena and the training loop read
# their choices from it, so a new policy is added here only.
POLICY_TABLE: dict[str, PolicyEntry] = {
  "muzero": PolicyEntry(
    mg.muzero_policy,
    playing_options=dict(dirichlet_fraction=0.0, temperature=0.0),
    mctx_policy="muzero_policy",
    trains=True,
  ),
  "gumbel": PolicyEntry(mg.gumbel_muzero_policy, mctx_policy="gumbel_muzero_policy", trains=True),
  "uct": PolicyEntry(mg.uct_policy),
}
POLICIES: dict[str, Callable] = {name: entry.policy for name, entry in POLICY_TABLE.items()}
POLICY_NAMES = tuple(POLICY_TABLE)
PLAYING_OPTIONS: dict[str, dict] = {
  name: entry.playing_options for name, entry in POLICY_TABLE.items() if entry.playing_options
}
# The policies that mctx has too (the arena's and self-play's `mctx` engine).
MCTX_POLICY_NAMES = tuple(name for name, entry in POLICY_TABLE.items() if entry.mctx_policy)
# The policies the training loop can train with.
TRAINING_POLICY_NAMES = tuple(name for name, entry in POLICY_TABLE.items() if entry.trains)

EVALUATOR_NAMES = ("uniform", "rollout", "network")

# Longest game of the pgx board games the apps play (every move fills a cell).
# Plies after which every game is over: a board's cells (hex: 121 and the swap);
# othello: 60 discs, and a pass only before a disc (two passes end the game), so
# at most 121; pgx's step limits (`mcgs_jax.games.keys.STEP_LIMITS`) elsewhere.
MAX_GAME_LENGTH = {
  "tic_tac_toe": 9,
  "connect_four": 42,
  "othello": 121,
  "hex": 122,
  **{game: keys.STEP_LIMITS[game] for game in ("go_9x9", "gardner_chess", "animal_shogi")},
}

# Compact edges the commands choose by default (`GraphOptions.max_children`), by
# game; the others search dense edge tables. Chess and shogi: 96 slots, above the
# legal moves of the positions the commands search
# (`mcgs_jax.games.bounds.MEASURED_LEGAL_ACTIONS`; what a node cannot keep is
# counted in `Graph.dropped_actions`), at a fraction of a dense node's bytes.
DEFAULT_MAX_CHILDREN = {"chess": 96, "shogi": 96}

__all__ = [
  "DEFAULT_MAX_CHILDREN",
  "EVALUATOR_NAMES",
  "MAX_GAME_LENGTH",
  "MCTX_POLICY_NAMES",
  "PLAYING_OPTIONS",
  "POLICIES",
  "POLICY_NAMES",
  "POLICY_TABLE",
  "TRAINING_POLICY_NAMES",
  "PolicyEntry",
  "default_max_children",
  "game_from_spec",
  "make_evaluator",
  "max_game_length",
  "mctx_policy",
  "playing_policy",
  "random_legal_actions",
]


def check_policy(name: str) -> str:
  """`name`, or ValueError naming the known policies."""
  if name not in POLICIES:
    raise ValueError(f"unknown policy {name!r}; expected one of {POLICY_NAMES}")
  return name


def check_evaluator(name: str) -> str:
  """`name`, or ValueError naming the known evaluators."""
  if name not in EVALUATOR_NAMES:
    raise ValueError(f"unknown evaluator {name!r}; expected one of {EVALUATOR_NAMES}")
  return name


def playing_policy(name: str, **options) -> Callable:
  """`POLICIES[name]` with `PLAYING_OPTIONS[name]` and `options` bound (keywords).

  `options` win over the playing defaults, e.g. `playing_policy("muzero",
  temperature=1.0)`.
  """
  return functools.partial(
    POLICIES[check_policy(name)], **{**PLAYING_OPTIONS.get(name, {}), **options}
  )


def mctx_policy(name: str, recurrent_fn: Callable, **options) -> Callable:
  """`policy(params, key, root, num_simulations, invalid_actions) -> mctx's
  PolicyOutput`: DeepMind's function of the policy `name` (`PolicyEntry.mctx_policy`:
  `mctx.muzero_policy`, `mctx.gumbel_muzero_policy`) with `options` bound, searching with this
  package's `recurrent_fn` and `RootFnOutput` (converted to mctx's types). ValueError
  when the mctx package is missing."""
  try:
    import mctx
  except ImportError:
    message = f"engine 'mctx' {needs_extra('mctx')}"
    raise ValueError(message) from None
  mctx_name = POLICY_TABLE[check_policy(name)].mctx_policy
  if mctx_name is None:
    raise ValueError(f"engine 'mctx' has policies {MCTX_POLICY_NAMES}, not {name!r}")
  policy = getattr(mctx, mctx_name)

  def mctx_recurrent_fn(params, key, action, embedding):
    output, embedding = recurrent_fn(params, key, action, embedding)
    fields = ("reward", "discount", "prior_logits", "value")
    return mctx.RecurrentFnOutput(**{field: getattr(output, field) for field in fields}), embedding

  def search(params, key, root, num_simulations, invalid_actions):
    mctx_root = mctx.RootFnOutput(
      prior_logits=root.prior_logits, value=root.value, embedding=root.embedding
    )
    return policy(
      params,
      key,
      mctx_root,
      mctx_recurrent_fn,
      num_simulations,
      invalid_actions=invalid_actions,
      **options,
    )

  return search


def make_evaluator(name: str, env, *, num_rollouts: int = 1, apply_fn=None):
  """The evaluator called `name` for `env` (see `mcgs_jax.games.evaluators`):
  `"uniform"`, `"rollout"` (`num_rollouts` random playouts) or `"network"`
  (`apply_fn(params, observation) -> (logits, value)`)."""
  check_evaluator(name)
  if name == "uniform":
    return evaluators.uniform_evaluator()
  if name == "rollout":
    return evaluators.rollout_evaluator(env, num_rollouts=num_rollouts)
  if apply_fn is None:
    raise ValueError("the network evaluator needs apply_fn")
  return evaluators.network_evaluator(apply_fn)


@functools.lru_cache(maxsize=32)
def game_from_spec(spec: str):
  """`make_game(spec)`, built once per spec: the arena's matches and the training
  loop that plays them share one `Game`, so their compiled steps too."""
  return adapter.make_game(spec)


def default_max_children(spec: str, requested: int | None) -> int | None:
  """The `max_children` of a command's search of the game `spec`: `requested` when
  given (0: dense edge tables, None), else `DEFAULT_MAX_CHILDREN`'s choice for the
  game (None: dense)."""
  if requested is not None:
    return requested or None
  return DEFAULT_MAX_CHILDREN.get(spec.partition(":")[0])


def compact_edges_note(spec: str, max_children: int | None) -> str:
  """One line for a command's output saying how the nodes keep their edges."""
  if max_children is None:
    return f"edges: dense ({spec}: one column per action; --max-children K keeps K slots)"
  return (
    f"edges: compact, {max_children} slots per node ({spec}; the most likely valid "
    "actions, the others counted in dropped_actions; --max-children 0 for dense)"
  )


def max_game_length(game) -> int | None:
  """Plies after which every game of `game` is over, where known (else None): from
  `MAX_GAME_LENGTH` or the env's `max_game_length`."""
  env = game.env
  env_id = getattr(env, "id", None) or getattr(env, "env_id", None)
  if env_id in MAX_GAME_LENGTH:
    return MAX_GAME_LENGTH[env_id]
  length = getattr(env, "max_game_length", None)
  return None if length is None else int(length)
