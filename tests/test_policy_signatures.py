"""The policies' graph options have a real signature: `options=GraphOptions(...)` or
flat keywords typed by `GraphKeywords`, one of the two (issue 19)."""

import dataclasses
import inspect
import typing

import jax
import numpy as np
import pytest
from typing_extensions import Unpack

import mcgs_jax as mg
from mcgs_jax._src.options import GraphKeywords
from mcgs_jax.apps import registry
from mcgs_jax.testing import commuting_game

ROOT, RECURRENT = commuting_game()
KEY = jax.random.PRNGKey(0)
B = 2
PLAIN_POLICIES = list(registry.POLICIES.values())
POLICIES = [*PLAIN_POLICIES, mg.stochastic_muzero_policy]


def test_graph_keywords_are_the_fields_of_graph_options():
  fields = {field.name for field in dataclasses.fields(mg.GraphOptions)}
  assert set(GraphKeywords.__annotations__) == fields
  assert GraphKeywords.__optional_keys__ == fields  # every keyword may be left out
  assert typing.get_type_hints(GraphKeywords) == typing.get_type_hints(mg.GraphOptions)


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.__name__)
def test_policy_signature_names_options_and_typed_keywords(policy):
  parameters = inspect.signature(policy).parameters
  options = parameters["options"]
  assert options.kind is inspect.Parameter.KEYWORD_ONLY
  assert options.default is None
  keywords = [p for p in parameters.values() if p.kind is inspect.Parameter.VAR_KEYWORD]
  assert [p.annotation for p in keywords] == [Unpack[GraphKeywords]]


@pytest.mark.quick_variants("muzero_policy")
@pytest.mark.parametrize("policy", PLAIN_POLICIES, ids=lambda p: p.__name__)
def test_options_search_as_the_same_flat_keywords(policy):
  keywords = dict(capacity=7, stop_rule="catch_up", transpositions=True)
  flat = jax.jit(lambda key: policy(None, key, ROOT(B), RECURRENT, 6, **keywords))(KEY)
  given = jax.jit(
    lambda key: policy(None, key, ROOT(B), RECURRENT, 6, options=mg.GraphOptions(**keywords))
  )(KEY)
  assert given.search_graph.capacity == 7
  for ours, theirs in zip(jax.tree_util.tree_leaves(given), jax.tree_util.tree_leaves(flat)):
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.__name__)
def test_options_and_a_flat_keyword_is_an_error(policy):
  functions = (
    (lambda *args: None, lambda *args: None)
    if policy is mg.stochastic_muzero_policy
    else (RECURRENT,)
  )
  with pytest.raises(TypeError, match="or the graph keywords, not both; got options and capacity"):
    policy(None, KEY, ROOT(B), *functions, 4, options=mg.GraphOptions(capacity=8), capacity=8)


def test_options_must_be_graph_options():
  with pytest.raises(TypeError, match="options must be a mcgs_jax.GraphOptions or None, got dict"):
    mg.muzero_policy(None, KEY, ROOT(B), RECURRENT, 4, options={"capacity": 8})
