"""Tiny games written with jnp, for engine tests that need no game library.

`commuting_game`: the state is (total, steps); action a adds a + 1 to the total
(mod `modulus`), so every permutation of the same actions reaches one state: many
transpositions. After `horizon` moves the game ends with a reward that depends on the
total. Priors and values are fixed pseudo-random functions of the state.
"""

import jax.numpy as jnp

import mcgs_jax as mg


def commuting_game(num_actions=3, modulus=11, horizon=6):
  def evaluate(total, steps):
    angle = total.astype(jnp.float32) * 1.7 + steps.astype(jnp.float32) * 0.3
    logits = jnp.sin(angle[:, None] * (1.0 + jnp.arange(num_actions)))
    return logits, 0.5 * jnp.cos(angle)

  def recurrent_fn(params, rng_key, action, embedding):
    del params, rng_key
    total, steps = embedding["total"], embedding["steps"]
    total = (total + action + 1) % modulus
    steps = steps + 1
    done = steps >= horizon
    logits, value = evaluate(total, steps)
    reward = jnp.where(done, jnp.sin(total.astype(jnp.float32)), 0.0)
    discount = jnp.where(done, 0.0, -1.0)
    return mg.RecurrentFnOutput(reward=reward, discount=discount, prior_logits=logits,
                                value=value), {"total": total, "steps": steps}

  def root(batch_size, offset=0):
    total = (jnp.arange(batch_size, dtype=jnp.int32) + offset) % modulus
    steps = jnp.zeros((batch_size,), jnp.int32)
    logits, value = evaluate(total, steps)
    return mg.RootFnOutput(prior_logits=logits, value=value,
                           embedding={"total": total, "steps": steps})

  return root, recurrent_fn
