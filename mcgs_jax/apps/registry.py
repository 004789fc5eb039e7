"""Policies and evaluators by the names the command line, the arena and the training
loop use: one table of each, so a new policy or evaluator is added in one place.

  * `POLICIES`: name -> search policy (`mcgs_jax.muzero_policy`, ...).
  * `playing_policy(name, **options)`: that policy set to play for strength (no
    root noise, most visited move), as the arena and `mcgs-jax search` run it.
  * `make_evaluator(name, env, ...)`: name -> leaf evaluator
    (`mcgs_jax.games.evaluators`).
  * `random_legal_actions`: the package's one uniformly random legal move (defined
    in `mcgs_jax.games.evaluators`, which needs nothing from the apps).
  * `game_from_spec(spec)`: `make_game(spec)`, built once per spec, and
    `max_game_length(game)`: the plies after which every game is over.
"""

import functools
from collections.abc import Callable

import mcgs_jax as mg
from mcgs_jax.apps.cli_args import needs_extra
from mcgs_jax.games import adapter, evaluators
from mcgs_jax.games.evaluators import random_legal_actions

POLICIES: dict[str, Callable] = {
  "muzero": mg.muzero_policy,
  "gumbel": mg.gumbel_muzero_policy,
  "uct": mg.uct_policy,
}
POLICY_NAMES = tuple(POLICIES)

# Options that make a policy play rather than explore: muzero's root noise off and
# its most visited action instead of a sample (uct plays its most visited action and
# gumbel its Sequential-Halving winner anyway).
PLAYING_OPTIONS: dict[str, dict] = {
  "muzero": dict(dirichlet_fraction=0.0, temperature=0.0),
}

EVALUATOR_NAMES = ("uniform", "rollout", "network")
# The evaluators that need no weights (what a command offers without a checkpoint).
WEIGHTLESS_EVALUATORS = tuple(name for name in EVALUATOR_NAMES if name != "network")

# Longest game of the pgx board games the apps play (every move fills a cell).
MAX_GAME_LENGTH = {"tic_tac_toe": 9, "connect_four": 42}

# Compact edges the commands choose by default (`GraphOptions.max_children`), by
# game; the others search dense edge tables. Chess: 96 slots, above the 72 legal
# moves the most of any position of 256 random pgx games had
# (`mcgs_jax.games.bounds.MEASURED_LEGAL_ACTIONS`; 218 is the proven bound): a
# node of 8.7 KB instead of 133 KB. Shogi: 96 slots, above the 39 legal moves of
# the benchmark positions 10 plies in (random games that pile pieces in hand reach
# 236; what a node cannot keep is counted in `Graph.dropped_actions`): 3.5 KB
# instead of 79 KB (benchmarks/RESULTS.md, "Compact edges").
DEFAULT_MAX_CHILDREN = {"chess": 96, "shogi": 96}

__all__ = [
  "DEFAULT_MAX_CHILDREN",
  "EVALUATOR_NAMES",
  "MAX_GAME_LENGTH",
  "PLAYING_OPTIONS",
  "POLICIES",
  "POLICY_NAMES",
  "WEIGHTLESS_EVALUATORS",
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
  PolicyOutput`: DeepMind's `mctx.muzero_policy` (`"muzero"`) or
  `mctx.gumbel_muzero_policy` (`"gumbel"`) with `options` bound, searching with this
  package's `recurrent_fn` and `RootFnOutput` (converted to mctx's types). ValueError
  when the mctx package is missing."""
  try:
    import mctx
  except ImportError:
    message = f"engine 'mctx' {needs_extra('mctx')}"
    raise ValueError(message) from None
  policy = {"muzero": mctx.muzero_policy, "gumbel": mctx.gumbel_muzero_policy}[name]

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
