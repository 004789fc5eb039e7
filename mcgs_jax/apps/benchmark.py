"""Side-by-side speed of `mctx.muzero_policy` and `mcgs_jax.muzero_policy`.

Same pgx game, same small flax network, same batch of positions, same B and S, in
one process: mctx, ours in tree mode, ours in graph mode. Reports simulations per
second, each as a ratio to mctx measured in the same run (machines are noisy), the
compile time, and how the cost of one simulation grows from S=64 to S=1024.

Needs the `bench` extra (mctx, pgx, flax).
"""

import argparse
import datetime
import json
import platform
import statistics
import time

import jax
import jax.numpy as jnp

IMPLEMENTATIONS = ("mctx", "tree", "graph")


def random_positions(game, rng_key, batch_size: int, max_opening_moves: int):
  """`batch_size` positions after 0..`max_opening_moves` random legal moves."""
  init_key, moves_key, length_key = jax.random.split(rng_key, 3)
  state = game.init(init_key, batch_size)
  lengths = jax.random.randint(length_key, (batch_size,), 0, max_opening_moves + 1)

  def play(step, carry):
    state, key = carry
    key, move_key = jax.random.split(key)
    logits = jnp.where(state.legal_action_mask, 0.0, -jnp.inf)
    action = jax.random.categorical(move_key, logits)
    moved = game.step(state, action)
    keep = (step < lengths) & ~moved.terminated
    state = jax.tree_util.tree_map(
        lambda new, old: jnp.where(keep.reshape((-1,) + (1,) * (new.ndim - 1)), new, old),
        moved, state)
    return state, key

  state, _ = jax.lax.fori_loop(0, max_opening_moves, play, (state, moves_key))
  return state


def make_policies(game, num_simulations: int):
  """The three policies, each `(params, key, state) -> PolicyOutput`, jitted."""
  import mctx
  import mcgs_jax as mg

  def ours(transpositions):
    def policy(params, key, state):
      root = game.root(params, key, state)
      return mg.muzero_policy(params, key, root, game.recurrent_fn, num_simulations,
                              invalid_actions=game.invalid_actions(state),
                              hash_fn=game.hash_fn, transpositions=transpositions)
    return policy

  def theirs(params, key, state):
    root = game.root(params, key, state)
    return mctx.muzero_policy(params, key, mctx.RootFnOutput(
        prior_logits=root.prior_logits, value=root.value, embedding=root.embedding),
        game.recurrent_fn, num_simulations, invalid_actions=game.invalid_actions(state))

  return {"mctx": jax.jit(theirs), "tree": jax.jit(ours(False)), "graph": jax.jit(ours(True))}


def time_policy(policy, params, key, state, repeats: int):
  """`(compile seconds, median run seconds)`."""
  start = time.perf_counter()
  compiled = policy.lower(params, key, state).compile()
  compile_seconds = time.perf_counter() - start
  jax.block_until_ready(compiled(params, key, state))
  runs = []
  for repeat in range(repeats):
    run_key = jax.random.fold_in(key, repeat)
    start = time.perf_counter()
    jax.block_until_ready(compiled(params, run_key, state).action)
    runs.append(time.perf_counter() - start)
  return compile_seconds, statistics.median(runs)


def run(*, game_id: str = "connect_four", batch_sizes=(1024,), simulations=(64,),
        scaling_batch_size: int = 64, scaling_simulations=(64, 1024), repeats: int = 3,
        seed: int = 0, progress=print):
  """Measures every (implementation, B, S); returns a list of result rows."""
  from mcgs_jax.games import evaluators
  from mcgs_jax.games.adapter import make_game

  key = jax.random.PRNGKey(seed)
  network_key, positions_key, search_key = jax.random.split(key, 3)
  probe = make_game(game_id)
  apply_fn, params = evaluators.init_network(probe.env, network_key, hidden=(64, 64))
  game = make_game(game_id, evaluators.network_evaluator(apply_fn))

  rows = []

  def measure(batch_size, num_simulations, kind):
    state = random_positions(game, positions_key, batch_size, max_opening_moves=8)
    policies = make_policies(game, num_simulations)
    timings = {}
    for name in IMPLEMENTATIONS:
      compile_seconds, seconds = time_policy(policies[name], params, search_key, state,
                                             repeats)
      timings[name] = seconds
      row = dict(kind=kind, impl=name, batch_size=batch_size,
                 num_simulations=num_simulations, compile_s=round(compile_seconds, 2),
                 run_s=round(seconds, 4),
                 sims_per_s=round(batch_size * num_simulations / seconds, 1),
                 speedup_vs_mctx=round(timings["mctx"] / seconds, 2))
      rows.append(row)
      progress(row)

  for batch_size in batch_sizes:
    for num_simulations in simulations:
      measure(batch_size, num_simulations, "throughput")
  for num_simulations in scaling_simulations:
    measure(scaling_batch_size, num_simulations, "scaling")
  return rows


def scaling_table(rows, scaling_simulations):
  """Per-simulation cost at the largest S relative to the smallest, per impl."""
  low, high = min(scaling_simulations), max(scaling_simulations)
  result = {}
  for name in IMPLEMENTATIONS:
    per_sim = {r["num_simulations"]: r["run_s"] / r["num_simulations"] for r in rows
               if r["kind"] == "scaling" and r["impl"] == name}
    if low in per_sim and high in per_sim:
      result[name] = round(per_sim[high] / per_sim[low], 2)
  return result


def markdown(rows, scaling, header: str) -> str:
  lines = [header, "",
           "| impl | B | S | compile s | run s | sims/s | speed vs mctx |",
           "|---|---|---|---|---|---|---|"]
  for r in rows:
    if r["kind"] == "throughput":
      lines.append(f"| {r['impl']} | {r['batch_size']} | {r['num_simulations']} | "
                   f"{r['compile_s']} | {r['run_s']} | {r['sims_per_s']:.0f} | "
                   f"{r['speedup_vs_mctx']}x |")
  lines += ["", "Per-simulation cost at S=max relative to S=min (B = scaling batch):", "",
            "| impl | cost ratio |", "|---|---|"]
  lines += [f"| {name} | {ratio}x |" for name, ratio in scaling.items()]
  return "\n".join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(prog="mcgs-jax bench", description=__doc__.split("\n")[0])
  parser.add_argument("--game", default="connect_four")
  parser.add_argument("--batch-sizes", default="1024",
                      help="comma-separated batch sizes (default 1024)")
  parser.add_argument("--simulations", default="64", help="comma-separated S (default 64)")
  parser.add_argument("--scaling-batch-size", type=int, default=64)
  parser.add_argument("--scaling-simulations", default="64,1024")
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--quick", action="store_true",
                      help="B=64, S=16, scaling S=16,128: a one-minute smoke run")
  parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
  args = parser.parse_args(argv)

  def ints(text):
    try:
      values = tuple(int(v) for v in text.split(","))
    except ValueError:
      parser.error(f"expected comma-separated integers, got {text!r}")
    if any(v < 1 for v in values):
      parser.error(f"expected positive integers, got {text!r}")
    return values

  batch_sizes, simulations = ints(args.batch_sizes), ints(args.simulations)
  scaling_simulations = ints(args.scaling_simulations)
  scaling_batch_size = args.scaling_batch_size
  if args.quick:
    batch_sizes, simulations, scaling_simulations, scaling_batch_size = (64,), (16,), (16, 128), 16
  try:
    import mctx  # noqa: F401
    import pgx  # noqa: F401
    import flax  # noqa: F401
  except ImportError as error:
    parser.exit(2, f"mcgs-jax bench: needs the bench extra (pip install 'mcgs-jax[bench]'): {error}\n")
  rows = run(game_id=args.game, batch_sizes=batch_sizes, simulations=simulations,
             scaling_batch_size=scaling_batch_size, scaling_simulations=scaling_simulations,
             repeats=args.repeats, seed=args.seed,
             progress=lambda row: print(json.dumps(row), flush=True))
  scaling = scaling_table(rows, scaling_simulations)
  device = jax.devices()[0]
  header = (f"### {args.game}, {datetime.date.today()}, {device.platform} "
            f"({getattr(device, 'device_kind', '')}), {platform.processor() or platform.machine()}, "
            f"jax {jax.__version__}")
  print(markdown(rows, scaling, header))
  if args.json:
    with open(args.json, "w") as f:
      json.dump({"rows": rows, "scaling": scaling}, f, indent=1)


if __name__ == "__main__":
  main()
