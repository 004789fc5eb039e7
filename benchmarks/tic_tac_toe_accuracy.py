"""How good a tic-tac-toe network is by itself, against exact minimax (RESULTS.md).

For every position reachable from the start that is not over (4,520), the exact
value of every legal move comes from `mcgs_jax.games.solvers` (full minimax). For
each checkpoint it reports:

  * optimal share: over the positions where the moves are not all equal (some move
    loses, or draws where another wins: 3,191 positions), how often the network's
    top-prior legal move is optimal (no search);
  * value MSE: the mean squared error of the network's value against the exact value
    (+1 win, 0 draw, -1 loss for the player to move) over all 4,520 positions.

Checkpoints are given per run as `LABEL=DIR` (`--run`, repeatable) with the
iterations to read (`--iterations 0,1,5,10,20`: `DIR/iteration_XXXX.msgpack`, 0
being the untrained network, written by `mcgs_jax.apps.train --checkpoint-dir DIR
--checkpoint-at 0,1,5,10,20`), or as single files (`--checkpoint LABEL=FILE`).

Example (the first row of RESULTS' tic-tac-toe table):

    python -m mcgs_jax.apps.train --quick --iterations 20 --games 128 --simulations 32 \\
        --train-steps 100 --buffer-size 5000 --learning-rate 3e-3 --eval-games 0 \\
        --checkpoint-dir ttt --checkpoint-at 0,1,5,10,20
    python -m benchmarks training --part tic_tac_toe_accuracy --run "muzero, lr 3e-3"=ttt
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax.apps import train
from mcgs_jax.games import solvers
from mcgs_jax.games.adapter import make_game


def reachable_positions(env):
  """Every position reachable from the start that is not over, as one batched pgx
  state, and the boards (9 cells, pgx encoding) in the same order.

  Breadth first, one ply per step, every (state, legal move) pair stepped in one
  vmapped call; positions are deduplicated by board (the board decides a
  tic-tac-toe position: whose turn it is follows from the number of marks).
  """
  step = jax.jit(jax.vmap(env.step))
  frontier = jax.tree_util.tree_map(lambda x: x[None], env.init(jax.random.PRNGKey(0)))
  kept_states, kept_boards = [], []
  seen = {tuple(np.asarray(frontier._x.board).reshape(9))}
  while True:
    boards = np.asarray(frontier._x.board).reshape(-1, 9)
    over = np.asarray(frontier.terminated)
    live = np.flatnonzero(~over)
    if live.size == 0:
      break
    kept_states.append(jax.tree_util.tree_map(lambda x: x[live], frontier))
    kept_boards.append(boards[live])
    legal = np.asarray(frontier.legal_action_mask)[live]
    parents, actions = np.nonzero(legal)
    parents = live[parents]
    children = step(
      jax.tree_util.tree_map(lambda x: x[parents], frontier),
      jnp.asarray(actions, jnp.int32),
    )
    child_boards = np.asarray(children._x.board).reshape(-1, 9)
    fresh = []
    for index, board in enumerate(map(tuple, child_boards)):
      if board not in seen:
        seen.add(board)
        fresh.append(index)
    if not fresh:
      break
    fresh = np.asarray(fresh, np.int64)
    frontier = jax.tree_util.tree_map(lambda x: x[fresh], children)
  states = jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs), *kept_states)
  return states, np.concatenate(kept_boards)


def exact_targets(boards) -> tuple[np.ndarray, np.ndarray]:
  """`(values [N], action_values [N, 9])`: exact value of each position for the
  player to move, and of each move for its mover (`nan` where illegal)."""
  values = np.zeros(len(boards))
  action_values = np.full((len(boards), 9), np.nan)
  for index, board in enumerate(boards):
    value, moves = solvers.tic_tac_toe_values(board)
    values[index] = value
    for action, action_value in moves.items():
      action_values[index, action] = action_value
  return values, action_values


def measure(apply_fn, params, states, values, action_values) -> dict:
  """Optimal share (top prior) over the positions with unequal moves, value MSE."""
  logits, predicted = jax.jit(apply_fn)(params, states.observation)
  logits = np.where(np.asarray(states.legal_action_mask), np.asarray(logits), -np.inf)
  top = logits.argmax(axis=1)
  best = np.nanmax(action_values, axis=1)
  unequal = np.nanmin(action_values, axis=1) < best
  optimal = action_values[np.arange(len(top)), top] == best
  return dict(
    optimal=int(optimal[unequal].sum()),
    decisive=int(unequal.sum()),
    optimal_share=float(optimal[unequal].mean()),
    value_mse=float(np.mean((np.asarray(predicted) - values) ** 2)),
    positions=len(values),
  )


def _label_value(text: str) -> tuple[str, str]:
  label, sep, value = text.rpartition("=")
  if not sep or not label or not value:
    raise argparse.ArgumentTypeError(f"expected LABEL=PATH, got {text!r}")
  return label, value


def run(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument(
    "--run",
    action="append",
    type=_label_value,
    default=[],
    metavar="LABEL=DIR",
    help="a run's checkpoint directory",
  )
  parser.add_argument(
    "--iterations", default="0,1,5,10,20", help="iterations read from each --run (0: untrained)"
  )
  parser.add_argument(
    "--checkpoint",
    action="append",
    type=_label_value,
    default=[],
    metavar="LABEL=FILE",
    help="a single checkpoint",
  )
  args = parser.parse_args(argv)
  if not args.run and not args.checkpoint:
    parser.error("give at least one --run or --checkpoint")
  iterations = [int(value) for value in args.iterations.split(",")]

  env = make_game("tic_tac_toe").env
  states, boards = reachable_positions(env)
  values, action_values = exact_targets(boards)
  best = np.nanmax(action_values, axis=1)
  unequal = np.nanmin(action_values, axis=1) < best
  legal = ~np.isnan(action_values)
  random_share = ((action_values == best[:, None]).sum(1) / legal.sum(1))[unequal].mean()
  print(
    f"{len(boards)} positions not over; {int(unequal.sum())} with a losing or "
    f"drawing-instead-of-winning move, where a uniformly random legal move is "
    f"optimal {random_share:.0%} of the time\n"
  )

  def evaluate(path):
    apply_fn, params, _ = train.load_network(path, env)
    return measure(apply_fn, params, states, values, action_values)

  rows: list[tuple[str, list[dict]]] = []
  for label, directory in args.run:
    rows.append((label, [evaluate(train.checkpoint_path(directory, it)) for it in iterations]))
  names = [("untrained" if it == 0 else f"iteration {it}") for it in iterations]
  for title, key, fmt in (
    ("top-prior move optimal", "optimal_share", "{:.0%}"),
    ("value MSE", "value_mse", "{:.2f}"),
  ):
    if rows:
      print(f"{title}:\n")
      print("| run | " + " | ".join(names) + " |")
      print("|---|" + "---|" * len(names))
      for label, results in rows:
        print(f"| {label} | " + " | ".join(fmt.format(r[key]) for r in results) + " |")
      print()
  if args.checkpoint:
    print("| checkpoint | top-prior move optimal | value MSE |")
    print("|---|---|---|")
    for label, path in args.checkpoint:
      result = evaluate(path)
      print(
        f"| {label} | {result['optimal_share']:.0%} ({result['optimal']}/"
        f"{result['decisive']}) | {result['value_mse']:.2f} |"
      )
  return 0
