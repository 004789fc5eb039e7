"""Each input check runs once per trace: the policy skeleton checks the root,
`invalid_actions`, `graph` and `recycle` before its setup reads them, and the search
it then calls does not check them again (issue 19)."""

import collections

import jax
import numpy as np
import pytest

import mcgs_jax as mg
from mcgs_jax._src import checks
from mcgs_jax.apps import registry
from mcgs_jax.testing import commuting_game

ROOT, RECURRENT = commuting_game()
B = 2
COUNTED = ("check_root", "check_invalid_actions", "check_callable", "check_int")


@pytest.fixture
def calls(monkeypatch):
  """How often each check in `COUNTED` ran, by name."""
  counts = collections.Counter()
  for name in COUNTED:
    original = getattr(checks, name)

    def counting(*args, _name=name, _original=original, **kwargs):
      counts[_name, args[0] if _name in ("check_callable", "check_int") else None] += 1
      return _original(*args, **kwargs)

    monkeypatch.setattr(checks, name, counting)
  return counts


def trace(policy, **kwargs):
  invalid = np.zeros((B, 3), bool)
  return jax.eval_shape(
    lambda key: policy(None, key, ROOT(B), RECURRENT, 4, invalid_actions=invalid, **kwargs),
    jax.random.PRNGKey(0),
  )


@pytest.mark.parametrize("policy", list(registry.POLICIES.values()), ids=lambda p: p.__name__)
def test_a_policy_checks_each_input_once(policy, calls):
  out = trace(policy)
  assert out.action.shape == (B,)
  assert calls["check_root", None] == 1
  assert calls["check_invalid_actions", None] == 1
  assert calls["check_callable", "recurrent_fn"] == 1
  assert calls["check_int", "num_simulations"] == 1


def test_search_checks_each_input_once(calls):
  rule = mg.muzero_action_selection
  graph = jax.eval_shape(
    lambda key: mg.search(
      None,
      key,
      root=ROOT(B),
      recurrent_fn=RECURRENT,
      root_action_selection_fn=lambda key, graph, node: rule(key, graph, node, 0),
      interior_action_selection_fn=rule,
      num_simulations=4,
      invalid_actions=np.zeros((B, 3), bool),
    ),
    jax.random.PRNGKey(0),
  )
  assert graph.node_visits.shape == (B, 5)
  assert calls["check_root", None] == 1
  assert calls["check_invalid_actions", None] == 1
  assert calls["check_int", "num_simulations"] == 1


def test_a_bad_root_is_still_named_by_search_and_by_a_policy():
  rule = mg.muzero_action_selection
  bad = ROOT(B).replace(value=np.zeros((B + 1,), np.float32))
  with pytest.raises(ValueError, match=r"root.value must have shape \[B\]"):
    mg.search(
      None,
      jax.random.PRNGKey(0),
      root=bad,
      recurrent_fn=RECURRENT,
      root_action_selection_fn=lambda key, graph, node: rule(key, graph, node, 0),
      interior_action_selection_fn=rule,
      num_simulations=4,
    )
  with pytest.raises(ValueError, match=r"root.value must have shape \[B\]"):
    mg.muzero_policy(None, jax.random.PRNGKey(0), bad, RECURRENT, 4)
