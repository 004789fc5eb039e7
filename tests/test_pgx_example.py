"""`benchmarks/pgx_example.py`: it takes pgx's AlphaZero example's own definitions
unchanged (decorators included) and binds the example's `mctx` name to each engine."""

import textwrap

import pytest
from helpers import load_benchmark

import mcgs_jax

FAKE_TRAIN = textwrap.dedent(
  """
  import mctx

  config = None


  def forward_fn(x, is_eval=False):
      return x


  def unrelated():
      raise AssertionError("not taken")


  def recurrent_fn(model, rng_key, action, state):
      return mctx.RecurrentFnOutput, state


  class SelfplayOutput(NamedTuple):
      obs: int


  @jax.pmap
  def selfplay(model, rng_key):
      return mctx.gumbel_muzero_policy
  """
)


@pytest.fixture(scope="module")
def pgx_example():
  return load_benchmark("pgx_example")


def test_example_source_takes_the_four_definitions_with_decorators(pgx_example, tmp_path):
  train = tmp_path / "train.py"
  train.write_text(FAKE_TRAIN)
  source = pgx_example.example_source(str(train))
  starts = [
    source.index(f"{kind} {name}")
    for kind, name in (
      ("def", "forward_fn"),
      ("def", "recurrent_fn"),
      ("class", "SelfplayOutput"),
      ("def", "selfplay"),
    )
  ]
  assert starts == sorted(starts)
  assert "@jax.pmap\ndef selfplay" in source
  assert "unrelated" not in source and "config = None" not in source


def test_example_source_names_what_is_missing(pgx_example, tmp_path):
  train = tmp_path / "train.py"
  train.write_text(
    FAKE_TRAIN.replace("def recurrent_fn", "def other_fn").replace("class Selfplay", "class Other")
  )
  with pytest.raises(ValueError, match="recurrent_fn, SelfplayOutput"):
    pgx_example.example_source(str(train))


def test_engines_bind_mctx_to_the_right_module(pgx_example):
  assert pgx_example.engine_module("import-only") is mcgs_jax
  tree = pgx_example.engine_module("tree")
  assert tree.gumbel_muzero_policy.func is mcgs_jax.gumbel_muzero_policy
  assert tree.gumbel_muzero_policy.keywords == {"transpositions": False}
  # Everything else is mcgs_jax's own.
  assert tree.RecurrentFnOutput is mcgs_jax.RecurrentFnOutput
  assert tree.muzero_policy is mcgs_jax.muzero_policy
  mctx = pytest.importorskip("mctx")
  assert pgx_example.engine_module("mctx") is mctx
