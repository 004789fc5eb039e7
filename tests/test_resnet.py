"""The residual convolutional network (`networks.ResNetPolicyValueNet`,
`--network resnet:BLOCKS,CHANNELS`): shapes on pgx's board planes, a training step
that lowers the loss on a fixed batch, checkpoints that load by their shapes alone,
and clear refusals."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from mcgs_jax.apps import train as train_lib
from mcgs_jax.apps.train import checkpoint_files
from mcgs_jax.games import networks
from mcgs_jax.games.adapter import make_game

pytest.importorskip("pgx")
pytest.importorskip("flax")


def _states(game, count: int, seed: int):
  """`count` states a few random plies into `game` (different boards in one batch)."""
  state = jax.vmap(game.env.init)(jax.random.split(jax.random.PRNGKey(seed), count))
  for ply in range(3):
    logits = jnp.where(state.legal_action_mask, 0.0, -jnp.inf)
    action = jax.random.categorical(jax.random.PRNGKey(100 * seed + ply), logits)
    state = jax.vmap(game.env.step)(state, action)
  return state


@pytest.mark.parametrize("game_id", ["connect_four", "othello", "animal_shogi"])
@pytest.mark.quick_variants("connect_four")
def test_resnet_maps_board_planes_to_logits_and_a_bounded_value(game_id):
  game = make_game(game_id)
  apply_fn, params = networks.init_network(game.env, jax.random.PRNGKey(0), network="resnet:2,16")
  state = _states(game, 5, seed=1)
  logits, value = apply_fn(params, state.observation)
  assert logits.shape == (5, game.num_actions) and logits.dtype == jnp.float32
  assert value.shape == (5,)
  assert bool(jnp.all(jnp.abs(value) < 1.0))
  # Each position is evaluated on its own: one row of the batch alone gives its row.
  alone_logits, alone_value = apply_fn(params, state.observation[2:3])
  np.testing.assert_allclose(alone_logits[0], logits[2], rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(alone_value[0], value[2], rtol=1e-5, atol=1e-5)
  # Blocks and channels are what the spec says.
  layers = params["params"]
  assert sum(name.startswith("ResidualBlock_") for name in layers) == 2
  assert layers["stem"]["kernel"].shape[-1] == 16


@pytest.mark.slow
def test_one_training_step_lowers_the_loss_on_a_fixed_batch():
  game = make_game("othello")
  apply_fn, params = networks.init_network(game.env, jax.random.PRNGKey(0), network="resnet:2,16")
  state = _states(game, 64, seed=2)
  targets = jax.random.dirichlet(jax.random.PRNGKey(3), jnp.ones(game.num_actions), (64,))
  policy = jnp.where(state.legal_action_mask, targets, 0.0)
  policy = policy / jnp.sum(policy, -1, keepdims=True)
  value = jnp.where(jnp.arange(64) % 2 == 0, 1.0, -1.0)
  batch = dict(observation=state.observation, policy=policy, value=value)
  optimizer = optax.adam(1e-3)
  step = train_lib.make_train_step(apply_fn, optimizer, 1e-4)
  opt_state = optimizer.init(params)
  before = float(train_lib.loss_fn(params, apply_fn, batch, 1e-4)[0])
  params, opt_state, metrics = step(params, opt_state, batch)
  assert float(metrics["loss"]) == pytest.approx(before, rel=1e-5)
  after = float(train_lib.loss_fn(params, apply_fn, batch, 1e-4)[0])
  assert after < before
  for _ in range(30):
    params, opt_state, _ = step(params, opt_state, batch)
  assert float(train_lib.loss_fn(params, apply_fn, batch, 1e-4)[0]) < 0.8 * before


@pytest.mark.slow
def test_a_resnet_checkpoint_loads_by_its_shapes_and_refuses_another_game(tmp_path):
  game = make_game("connect_four")
  apply_fn, params = networks.init_network(game.env, jax.random.PRNGKey(4), network="resnet:3,8")
  path = checkpoint_files.save_checkpoint(str(tmp_path / "resnet.msgpack"), params)
  loaded_fn, loaded, _ = checkpoint_files.load_network(path, game.env)
  observation = _states(game, 4, seed=5).observation
  np.testing.assert_array_equal(loaded_fn(loaded, observation)[0], apply_fn(params, observation)[0])
  with pytest.raises(ValueError, match="does not fit this game"):
    checkpoint_files.load_network(path, make_game("othello").env)


def test_resnet_refuses_a_flat_observation_and_bad_specs():
  with pytest.raises(ValueError, match=r"needs a board observation \[H, W, C\]"):
    networks.init_network(
      make_game("jumanji:Knapsack-v1").env, jax.random.PRNGKey(0), network="resnet:1,8"
    )
  assert networks.parse_network("resnet") == ("resnet", networks.DEFAULT_SIZES["resnet"])
  assert networks.parse_network("resnet:0,4") == ("resnet", (0, 4))
  for spec in ("resnet:2", "resnet:2,0", "resnet:-1,8", "resnet:a,b"):
    with pytest.raises(ValueError, match=f"network '{spec}'.*resnet:BLOCKS,CHANNELS"):
      networks.parse_network(spec)
  with pytest.raises(ValueError, match="network must be .*resnet:BLOCKS,CHANNELS"):
    train_lib.Config(network="resnet:2")


@pytest.mark.slow
def test_the_shipped_go_network_loads_for_the_game_and_is_the_search_default():
  """The go 9x9 network shipped in the package (a `ResNetPolicyValueNet`, from the
  training race of docs/training.md) loads for `make_game("go_9x9")` by its shapes
  alone, and `mcgs-jax search` picks it when no evaluator is named."""
  from mcgs_jax.apps.cli import search_command
  from mcgs_jax.apps.cli.arena_parser import builtin_checkpoint

  path = builtin_checkpoint("go_9x9")
  game = make_game("go_9x9")
  apply_fn, params, iteration = checkpoint_files.load_network(path, game.env)
  assert iteration >= 1
  layers = params["params"]
  assert "stem" in layers and any(name.startswith("ResidualBlock_") for name in layers)
  state = _states(game, 3, seed=6)
  logits, value = apply_fn(params, state.observation)
  assert logits.shape == (3, 82) and bool(jnp.all(jnp.abs(value) < 1.0))
  args = search_command.build_parser().parse_args(["--game", "go_9x9"])
  search_command.resolve_evaluator(args)
  assert (args.evaluator, args.checkpoint) == ("network", path)


@pytest.mark.slow
def test_the_commands_search_and_play_go_with_the_shipped_network(capsys):
  import json

  from mcgs_jax.apps import cli
  from mcgs_jax.apps.cli.arena_parser import builtin_checkpoint

  argv = ["search", "--game", "go_9x9", "--moves", "40", "--simulations", "16", "--json"]
  status = cli.main(argv)
  out, err = capsys.readouterr()
  assert status == 0, err
  report = json.loads(out)
  assert (report["evaluator"], report["checkpoint"]) == ("network", builtin_checkpoint("go_9x9"))
  assert sum(row["visits"] for row in report["actions"]) == 16
  assert abs(sum(row["prior"] for row in report["actions"]) - 1.0) < 1e-4
  argv = ["arena", "--game", "go_9x9", "--games", "2", "--simulations", "2", "--json"]
  status = cli.main(argv)
  out, err = capsys.readouterr()
  assert status == 0, err
  match = json.loads(out.splitlines()[-1])
  assert "network built-in" in match["agents"]["a"]["name"]
  assert "network built-in" in match["agents"]["b"]["name"]


@pytest.mark.slow
def test_mcgs_jax_train_trains_and_checkpoints_a_resnet(tmp_path):
  """`train` with `network="resnet:1,8"`: its final checkpoint loads as a residual
  network by its shapes alone, and its losses stay finite."""
  config = train_lib.Config.quick(
    network="resnet:1,8",
    num_games=8,
    num_simulations=4,
    iterations=2,
    train_steps=5,
    eval_games=0,
    progress=False,
    checkpoint_dir=str(tmp_path),
  )
  history = train_lib.train(config)
  assert all(np.isfinite(entry["loss"]) for entry in history)
  path = train_lib.checkpoint_path(str(tmp_path), 2)
  apply_fn, params, iteration = checkpoint_files.load_network(path, make_game(config.game).env)
  assert iteration == 2 and "stem" in params["params"]
  np.testing.assert_array_equal(
    jax.tree.map(np.asarray, params)["params"]["stem"]["kernel"],
    np.asarray(history.params["params"]["stem"]["kernel"]),
  )
