"""`benchmarks/pgx_example_race.py`: the edits a user makes to pgx's AlphaZero example,
applied to a small stand-in `train.py` with the example's shape (written here, not
pgx's), give a self-play scan that keeps each game's graph between moves; and a
run's final network is its last complete checkpoint."""

import pickle
import textwrap

import jax
import numpy as np
import pytest
from helpers import load_benchmark

pytest.importorskip("pgx")
pytest.importorskip("mctx")

SIMULATIONS = 8
STAND_IN = textwrap.dedent(
  f"""
  from typing import NamedTuple

  import jax
  import jax.numpy as jnp
  import mctx
  import pgx
  from pgx.experimental import auto_reset


  class Config(NamedTuple):
      env_id: str = "tic_tac_toe"
      num_simulations: int = {SIMULATIONS}
      max_num_steps: int = 12


  config = Config()
  env = pgx.make(config.env_id)


  def recurrent_fn(params, rng_key, action, state):
      player = state.current_player
      state = jax.vmap(env.step)(state, action)
      logits = jnp.where(state.legal_action_mask, 0.0, jnp.finfo(jnp.float32).min)
      reward = state.rewards[jnp.arange(state.rewards.shape[0]), player]
      discount = jnp.where(state.terminated, 0.0, -1.0)
      output = mctx.RecurrentFnOutput(
          reward=reward, discount=discount, prior_logits=logits, value=jnp.zeros_like(reward)
      )
      return output, state


  class SelfplayOutput(NamedTuple):
      root_visits: jnp.ndarray
      terminated: jnp.ndarray


  def selfplay(rng_key):
      batch_size = 4

      def step_fn(state, key) -> SelfplayOutput:
          key1, key2 = jax.random.split(key)
          logits = jnp.where(state.legal_action_mask, 0.0, jnp.finfo(jnp.float32).min)
          root = mctx.RootFnOutput(
              prior_logits=logits, value=jnp.zeros(batch_size), embedding=state
          )
          policy_output = mctx.gumbel_muzero_policy(
              params=(),
              rng_key=key1,
              root=root,
              recurrent_fn=recurrent_fn,
              num_simulations=config.num_simulations,
              invalid_actions=~state.legal_action_mask,
              gumbel_scale=1.0,
          )
          keys = jax.random.split(key2, batch_size)
          state = jax.vmap(auto_reset(env.step, env.init))(state, policy_output.action, keys)
          return state, SelfplayOutput(
              root_visits=policy_output.search_tree.node_visits[:, 0],
              terminated=state.terminated,
          )

      rng_key, sub_key = jax.random.split(rng_key)
      state = jax.vmap(env.init)(jax.random.split(sub_key, batch_size))
      key_seq = jax.random.split(rng_key, config.max_num_steps)
      _, data = jax.lax.scan(step_fn, state, key_seq)
      return data
  """
)


@pytest.fixture(scope="module")
def race():
  return load_benchmark("pgx_example_race")


def run_way(race, example, way: str):
  namespace: dict = {"__name__": f"stand_in_{way}"}
  exec(compile(race.edited_source(str(example), way), "train.py", "exec"), namespace)
  return jax.device_get(jax.jit(namespace["selfplay"])(jax.random.PRNGKey(0)))


@pytest.mark.slow
def test_the_graph_edits_carry_each_games_graph_to_its_next_move(race, tmp_path):
  (tmp_path / "train.py").write_text(STAND_IN)
  searched = {way: run_way(race, tmp_path, way) for way in race.WAYS}
  # mctx and the import alone search from scratch: every root has S + 1 visits.
  for way in ("mctx", "import"):
    np.testing.assert_array_equal(searched[way].root_visits, SIMULATIONS + 1)
  graph = searched["graph"]
  # The first move of each game starts empty; a later one starts from the visits
  # the previous search left below the move played, unless the previous move ended
  # the game (auto_reset starts a new one, with an empty graph).
  assert np.all(graph.root_visits[0] == SIMULATIONS + 1)
  after_a_finished_game = graph.terminated[:-1]
  carried = graph.root_visits[1:] > SIMULATIONS + 1
  assert np.all(graph.root_visits[1:][after_a_finished_game] == SIMULATIONS + 1)
  assert carried[~after_a_finished_game].mean() > 0.5
  diff = race.diff(str(tmp_path))
  added = [line for line in diff.splitlines() if line.startswith("+") and line[1:2] != "+"]
  assert 8 <= len(added) <= 12, diff


def test_an_edit_that_does_not_apply_is_named(race, tmp_path):
  (tmp_path / "train.py").write_text(STAND_IN.replace("import mctx\n", "import mctx as m\n"))
  with pytest.raises(ValueError, match="expected one 'import mctx'"):
    race.edited_source(str(tmp_path), "import")


def test_the_final_network_is_the_last_complete_checkpoint(race, tmp_path):
  folder = tmp_path / "checkpoints" / "run"
  folder.mkdir(parents=True)
  for iteration in (1, 2):
    with open(folder / f"{iteration:06d}.ckpt", "wb") as handle:
      pickle.dump({"iteration": iteration, "model": np.ones(iteration)}, handle)
  (folder / "000003.ckpt").write_bytes(pickle.dumps({"iteration": 3})[:5])  # cut by the kill
  final = race.final_checkpoint(str(tmp_path))
  assert final["iteration"] == 2 and final["file"].endswith("000002.ckpt")
