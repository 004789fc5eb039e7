"""Policies and evaluators by the names the command line, the arena and the training
loop use: one table of each, so a new policy or evaluator is added in one place."""

from typing import Callable, Dict

import jax
import jax.numpy as jnp

import mcgs_jax as mg

POLICIES: Dict[str, Callable] = {
    "muzero": mg.muzero_policy,
    "gumbel": mg.gumbel_muzero_policy,
    "uct": mg.uct_policy,
}
POLICY_NAMES = tuple(POLICIES)

# "network" needs weights (an `apply_fn` and `params`); the commands offer the others.
EVALUATOR_NAMES = ("uniform", "rollout", "network")


def make_evaluator(name: str, env, *, num_rollouts: int = 1, apply_fn=None):
  """The evaluator called `name` for `env` (see `mcgs_jax.games.evaluators`)."""
  from mcgs_jax.games import evaluators  # pylint: disable=import-outside-toplevel
  if name == "uniform":
    return evaluators.uniform_evaluator()
  if name == "rollout":
    return evaluators.rollout_evaluator(env, num_rollouts=num_rollouts)
  if name == "network":
    if apply_fn is None:
      raise ValueError("the network evaluator needs apply_fn")
    return evaluators.network_evaluator(apply_fn)
  raise ValueError(f"unknown evaluator {name!r}; expected one of {EVALUATOR_NAMES}")


def random_legal_actions(keys, legal_action_mask):
  """`[B]` int32: a uniformly random legal action per game (`keys [B]`, mask
  `[B, A]`); action 0 where nothing is legal."""
  logits = jnp.where(legal_action_mask, 0.0, -jnp.inf)
  actions = jax.vmap(jax.random.categorical)(keys, logits)
  return jnp.where(jnp.any(legal_action_mask, axis=-1), actions, 0).astype(jnp.int32)
