"""The default key with learned latents (issue 47): what `hash_pytree`, every bit of
the embedding, merges when the embedding is a MuZero latent, and what that does to
`muzero_policy` and `gumbel_muzero_policy` against the tree (`transpositions=False`).

* Environment: a 5 x 5 gridworld written in JAX. Four moves (up, down, left, right);
  a move into the border stays in place (the real state is a fixed point of that
  move), and different move orders reach the same cell (real transpositions).
  Entering the goal cell (the centre, (2, 2)) pays 1 and ends the episode; afterwards
  the state is absorbing (reward 0). Discount 0.9.
* Data: trajectories of `--horizon` steps from random cells, each move with
  probability 0.7 one of the moves that approach the goal, else a uniform move.
* Model: MuZero's three functions in flax (representation: one-hot cell -> latent;
  dynamics: latent and one-hot move -> next latent and reward; prediction: latent ->
  move logits and value), MLPs of `--width` units, latents of `--latent-size`,
  trained with optax (Adam) on `--unroll`-step unrolls: cross-entropy to the
  behaviour policy, squared error to the discounted return and to the reward;
  targets past the episode's end are absorbing (uniform policy, value and reward 0).
* Latent designs (the last layer of representation and dynamics): `plain` (a linear
  layer), `minmax` (MuZero's per-latent min-max scaling to [0, 1]), `clip` (clipped
  to [0, 1]: saturates), `binary` (0/1 codes, trained with a straight-through
  sigmoid: a discrete latent).
* Model facts, from every move sequence of 1 to 4 moves from every non-goal cell:
  the share of its latents that are an exact fixed point of some move (`g(z, a) ==
  z` bit for bit), the distinct latents per distinct (cell, done) state reached, and
  the share of latents shared by two different real states (a merge that is wrong);
  and from every non-goal cell, each move repeated 32 times in the model: the share
  of those unrolls that reach an exact fixed point, and after how many moves.
* Search: `--batch` searches from random non-goal cells, each policy with the
  default key (a graph) and as a tree, on the same roots and keys; muzero without
  root noise and greedy (`dirichlet_fraction=0`, `temperature=0`), gumbel as mctx's
  defaults. Reported per search: transposition hits per simulation, self-loop edges
  (a node whose child is itself: a latent fixed point) and the playouts that ended
  on them per simulation (each is a playout that reached a node already on its
  path), edges on longer cycles, nodes per simulation (graph / tree), the mean
  absolute difference of the root's value from the tree's, the total-variation
  distance of `action_weights` from the tree's, the share of searches whose action
  differs, and the share whose action is a shortest-path move in the real gridworld
  (graph / tree). The same once more with the default key on `{latent, depth}`
  (the embedding carries the moves from the root): only latents at the same depth
  merge, so the graph has no cycle.

Usage:
  python -m benchmarks transpositions --part learned_latents [--designs plain,minmax,clip,binary]
      [--simulations 32,128] [--batch 64] [--train-steps 1500] [--seed 0]
"""

import argparse
import functools
import itertools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

import mcgs_jax as mg

SIZE = 5
CELLS = SIZE * SIZE
GOAL = CELLS // 2
NON_GOAL_CELLS = np.array([cell for cell in range(CELLS) if cell != GOAL], np.int32)
NUM_ACTIONS = 4
MOVES = np.array([(-1, 0), (1, 0), (0, -1), (0, 1)], np.int32)  # up, down, left, right
DISCOUNT = 0.9
GREEDY_SHARE = 0.7
DESIGNS = ("plain", "minmax", "clip", "binary")
POLICIES = ("muzero", "gumbel")
MODES = ("graph", "tree", "depth")


# The gridworld.


def env_step(cell: jax.Array, done: jax.Array, action: jax.Array):
  """`(cell, done, action) [B] -> (cell, done, reward)` of one move (absorbing when
  done)."""
  row, col = cell // SIZE, cell % SIZE
  move = jnp.asarray(MOVES)[action]
  row = jnp.clip(row + move[:, 0], 0, SIZE - 1)
  col = jnp.clip(col + move[:, 1], 0, SIZE - 1)
  moved = jnp.where(done, cell, row * SIZE + col)
  arrived = ~done & (moved == GOAL)
  return moved, done | arrived, arrived.astype(jnp.float32)


def distance_to_goal(cell):
  """Moves from `cell` (any int array) to the goal."""
  return abs(cell // SIZE - GOAL // SIZE) + abs(cell % SIZE - GOAL % SIZE)


def shortest_moves(cell: jax.Array) -> jax.Array:
  """`[..., A]` bool: the moves that bring `cell` one step closer to the goal."""
  row, col = cell // SIZE, cell % SIZE
  moves = jnp.asarray(MOVES)
  row = jnp.clip(row[..., None] + moves[:, 0], 0, SIZE - 1)
  col = jnp.clip(col[..., None] + moves[:, 1], 0, SIZE - 1)
  return distance_to_goal(row * SIZE + col) < distance_to_goal(cell)[..., None]


def behaviour_policy(cell: jax.Array, done: jax.Array) -> jax.Array:
  """`[B, A]` probabilities of the data's moves: `GREEDY_SHARE` spread over the
  shortest-path moves, the rest uniform; uniform once done."""
  closer = shortest_moves(cell).astype(jnp.float32)
  greedy = closer / jnp.maximum(closer.sum(-1, keepdims=True), 1.0)
  mixed = GREEDY_SHARE * greedy + (1 - GREEDY_SHARE) / NUM_ACTIONS
  return jnp.where(done[:, None], 1.0 / NUM_ACTIONS, mixed)


def random_cells(key: jax.Array, batch: int) -> jax.Array:
  """`[B]` int32 cells drawn uniformly from the non-goal cells."""
  return jnp.asarray(NON_GOAL_CELLS)[jax.random.randint(key, (batch,), 0, CELLS - 1)]


def trajectories(key: jax.Array, batch: int, horizon: int) -> dict[str, jax.Array]:
  """`batch` episodes of `horizon` moves from random cells: `[B, T]` `cell`, `done`
  (before the move), `action`, `reward`, `policy [B, T, A]` (the behaviour's
  probabilities) and `value` (the discounted return from there)."""
  start_key, move_key = jax.random.split(key)

  def step(carry, move_key):
    cell, done = carry
    policy = behaviour_policy(cell, done)
    action = jax.random.categorical(move_key, jnp.log(policy))
    next_cell, next_done, reward = env_step(cell, done, action)
    record = {"cell": cell, "done": done, "action": action, "reward": reward, "policy": policy}
    return (next_cell, next_done), record

  start = (random_cells(start_key, batch), jnp.zeros((batch,), jnp.bool_))
  _, records = jax.lax.scan(step, start, jax.random.split(move_key, horizon))

  def discounted(later, reward):
    value = reward + DISCOUNT * later
    return value, value

  _, values = jax.lax.scan(discounted, jnp.zeros((batch,)), records["reward"], reverse=True)
  records["value"] = values
  return jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), records)


# The model.


def latent_design(h: jax.Array, design: str) -> jax.Array:
  """The latent from the last layer's output `h [B, L]`, as `design` shapes it."""
  if design == "plain":
    return h
  if design == "minmax":  # MuZero's scaling of the hidden state
    low, high = h.min(-1, keepdims=True), h.max(-1, keepdims=True)
    return (h - low) / jnp.maximum(high - low, 1e-5)
  if design == "clip":
    return jnp.clip(h, 0.0, 1.0)
  if design == "binary":  # 0/1 codes; gradients through the sigmoid (straight-through)
    soft = jax.nn.sigmoid(h)
    return soft + jax.lax.stop_gradient((h > 0).astype(h.dtype) - soft)
  raise ValueError(f"unknown latent design {design!r}; known: {DESIGNS}")


class MuZeroModel(nn.Module):
  """Representation, dynamics (with reward) and prediction of a learned model."""

  design: str
  width: int = 64
  latent_size: int = 16

  def setup(self):
    self.represent_net = nn.Sequential([nn.Dense(self.width), nn.relu, nn.Dense(self.latent_size)])
    self.dynamics_net = nn.Sequential([nn.Dense(self.width), nn.relu, nn.Dense(self.width)])
    self.next_latent = nn.Dense(self.latent_size)
    self.reward_head = nn.Dense(1)
    self.predict_net = nn.Sequential([nn.Dense(self.width), nn.relu])
    self.policy_head = nn.Dense(NUM_ACTIONS)
    self.value_head = nn.Dense(1)

  def represent(self, cell: jax.Array) -> jax.Array:
    """`[B]` cells -> `[B, L]` latents."""
    return latent_design(self.represent_net(jax.nn.one_hot(cell, CELLS)), self.design)

  def dynamics(self, latent: jax.Array, action: jax.Array):
    """`([B, L], [B]) -> ([B, L] next latent, [B] reward)`."""
    moved = jnp.concatenate([latent, jax.nn.one_hot(action, NUM_ACTIONS)], -1)
    hidden = nn.relu(self.dynamics_net(moved))
    return latent_design(self.next_latent(hidden), self.design), self.reward_head(hidden)[:, 0]

  def predict(self, latent: jax.Array):
    """`[B, L] -> ([B, A] logits, [B] value)`."""
    hidden = self.predict_net(latent)
    return self.policy_head(hidden), self.value_head(hidden)[:, 0]

  def __call__(self, cell: jax.Array, action: jax.Array):
    latent, reward = self.dynamics(self.represent(cell), action)
    return self.predict(latent), reward


def unroll_loss(model: MuZeroModel, params, batch: dict[str, jax.Array], unroll: int):
  """MuZero's loss over `unroll` steps from the first step of `batch` (`[B, T]`)."""
  latent = model.apply(params, batch["cell"][:, 0], method=MuZeroModel.represent)
  loss = 0.0
  for k in range(unroll + 1):
    logits, value = model.apply(params, latent, method=MuZeroModel.predict)
    loss += optax.softmax_cross_entropy(logits, batch["policy"][:, k]).mean()
    loss += jnp.mean((value - batch["value"][:, k]) ** 2)
    if k < unroll:
      latent, reward = model.apply(
        params, latent, batch["action"][:, k], method=MuZeroModel.dynamics
      )
      loss += jnp.mean((reward - batch["reward"][:, k]) ** 2)
  return loss / (unroll + 1)


def train(model: MuZeroModel, key: jax.Array, *, steps: int, batch: int, unroll: int):
  """`(params, final loss)` after `steps` Adam steps on fresh trajectories."""
  init_key, data_key = jax.random.split(key)
  params = model.init(init_key, jnp.zeros((1,), jnp.int32), jnp.zeros((1,), jnp.int32))
  optimizer = optax.adam(3e-3)

  @jax.jit
  def update(params, opt_state, key):
    episodes = trajectories(key, batch, 2 * unroll)
    start = jax.random.randint(key, (batch,), 0, unroll + 1)
    window = jax.vmap(lambda x, s: jax.lax.dynamic_slice_in_dim(x, s, unroll + 1))
    sliced = jax.tree.map(lambda x: window(x, start), episodes)
    loss, grads = jax.value_and_grad(lambda p: unroll_loss(model, p, sliced, unroll))(params)
    updates, opt_state = optimizer.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state, loss

  opt_state = optimizer.init(params)
  loss = jnp.inf
  for key in jax.random.split(data_key, steps):
    params, opt_state, loss = update(params, opt_state, key)
  return params, float(loss)


# Model facts.


def latent_bits(latent: np.ndarray) -> list[bytes]:
  """Each row of `[n, L]` float latents as its bytes, +0.0 for -0.0 (as the key)."""
  return [row.tobytes() for row in np.asarray(latent, np.float32) + np.float32(0.0)]


def model_facts(model: MuZeroModel, params, depth: int = 4) -> dict[str, float]:
  """Fixed points and merges among the latents of every move sequence of 1 to
  `depth` moves from every non-goal cell (see the module docstring)."""
  choices = range(NUM_ACTIONS)
  sequences = [s for n in range(1, depth + 1) for s in itertools.product(choices, repeat=n)]
  starts = np.repeat(NON_GOAL_CELLS, len(sequences))
  latent = model.apply(params, jnp.asarray(starts), method=MuZeroModel.represent)
  cell, done = jnp.asarray(starts), jnp.zeros(starts.shape, jnp.bool_)
  dynamics = jax.jit(functools.partial(model.apply, method=MuZeroModel.dynamics))
  latents, states = [], []
  for n in range(depth):
    moves = np.array([s[n] if len(s) > n else -1 for s in sequences] * len(NON_GOAL_CELLS))
    live = moves >= 0
    action = jnp.asarray(np.maximum(moves, 0))
    latent, _ = dynamics(params, latent, action)
    cell, done, _ = env_step(cell, done, action)
    ending = np.array([len(s) == n + 1 for s in sequences] * len(NON_GOAL_CELLS))
    latents.append(np.asarray(latent)[ending & live])
    states.append(np.stack([np.asarray(cell), np.asarray(done)], -1)[ending & live])
  latents_np, states_np = np.concatenate(latents), np.concatenate(states)
  fixed = np.zeros(len(latents_np), bool)
  for action in range(NUM_ACTIONS):
    moved, _ = dynamics(params, jnp.asarray(latents_np), jnp.full(len(latents_np), action))
    fixed |= np.all(np.asarray(moved) == latents_np, axis=-1)
  owners: dict[bytes, set[tuple[int, int]]] = {}
  for bits, state in zip(latent_bits(latents_np), map(tuple, states_np), strict=True):
    owners.setdefault(bits, set()).add(state)
  shared = sum(len(owners[bits]) > 1 for bits in latent_bits(latents_np))
  return {
    "fixed_share": float(fixed.mean()),
    "latents_per_state": len(owners) / len({tuple(s) for s in states_np}),
    "wrong_merge_share": shared / len(latents_np),
  }


def repeated_move_facts(model: MuZeroModel, params, repeats: int = 32) -> dict[str, float]:
  """Every non-goal cell and move, the move applied `repeats` times in the model: the
  share of those unrolls whose latent reaches an exact fixed point (`g(z, a) == z`
  bit for bit), and the mean number of moves it took there."""
  cells = np.repeat(NON_GOAL_CELLS, NUM_ACTIONS)
  action = jnp.asarray(np.tile(np.arange(NUM_ACTIONS), len(NON_GOAL_CELLS)))
  latent = model.apply(params, jnp.asarray(cells), method=MuZeroModel.represent)
  dynamics = jax.jit(functools.partial(model.apply, method=MuZeroModel.dynamics))
  reached = np.full(len(cells), -1)
  for step in range(1, repeats + 1):
    moved, _ = dynamics(params, latent, action)
    still = np.all(np.asarray(moved) == np.asarray(latent), axis=-1)
    reached = np.where((reached < 0) & still, step, reached)
    latent = moved
  found = reached > 0
  return {
    "repeat_fixed_share": float(found.mean()),
    "repeat_fixed_moves": float(reached[found].mean()) if found.any() else float("nan"),
  }


# Search.


def make_search(model: MuZeroModel, policy: str, simulations: int, mode: str):
  """A jitted `(params, key, cell [B]) -> PolicyOutput` of `policy` on the model.

  `mode`: `"graph"` (the default key on the latent), `"tree"`
  (`transpositions=False`) or `"depth"` (the default key on the embedding `{latent,
  depth}`, the moves from the root: only latents at the same depth merge)."""

  def recurrent_fn(params, rng_key, action, embedding):
    del rng_key
    latent = embedding["latent"]
    next_latent, reward = model.apply(params, latent, action, method=MuZeroModel.dynamics)
    logits, value = model.apply(params, next_latent, method=MuZeroModel.predict)
    output = mg.RecurrentFnOutput(
      reward=reward, discount=jnp.full_like(reward, DISCOUNT), prior_logits=logits, value=value
    )
    return output, {"latent": next_latent, "depth": embedding["depth"] + (mode == "depth")}

  @jax.jit
  def search(params, key, cell):
    latent = model.apply(params, cell, method=MuZeroModel.represent)
    logits, value = model.apply(params, latent, method=MuZeroModel.predict)
    embedding = {"latent": latent, "depth": jnp.zeros(cell.shape, jnp.int32)}
    root = mg.RootFnOutput(prior_logits=logits, value=value, embedding=embedding)
    transpositions = mode != "tree"
    if policy == "muzero":
      return mg.muzero_policy(
        params,
        key,
        root,
        recurrent_fn,
        simulations,
        dirichlet_fraction=0.0,
        temperature=0.0,
        transpositions=transpositions,
      )
    return mg.gumbel_muzero_policy(
      params, key, root, recurrent_fn, simulations, transpositions=transpositions
    )

  return search


def cycle_counts(graph: mg.Graph) -> dict[str, np.ndarray]:
  """Per game `[B]`: self-loop edges (`children_index[n, a] == n`), the visits on
  them, and edges `n -> c` on a longer cycle (`c` reaches `n`, `c != n`)."""
  children = np.asarray(graph.children_index)
  visits = np.asarray(graph.edge_visits)
  used = np.asarray(graph.num_nodes)
  counts: dict[str, list[int]] = {"self_loops": [], "self_loop_visits": [], "cycle_edges": []}
  for game, n in enumerate(used):
    child = children[game, :n]
    nodes = np.arange(n)[:, None]
    loop = child == nodes
    counts["self_loops"].append(int(loop.sum()))
    counts["self_loop_visits"].append(int(visits[game, :n][loop].sum()))
    reach = np.zeros((n, n), bool)
    rows, cols = np.nonzero(child >= 0)
    reach[rows, child[rows, cols]] = True
    for _ in range(max(1, int(np.ceil(np.log2(n))) + 1)):
      reach |= (reach.astype(np.int32) @ reach.astype(np.int32)) > 0
    back = (child >= 0) & ~loop & reach[np.maximum(child, 0), np.broadcast_to(nodes, child.shape)]
    counts["cycle_edges"].append(int(back.sum()))
  return {name: np.array(values) for name, values in counts.items()}


def compare(graph_out, tree_out, cells: np.ndarray, simulations: int) -> dict[str, float]:
  """The table's figures for one design, policy and S (means over the batch)."""
  graph = graph_out.search_graph
  cycles = cycle_counts(graph)
  weights = np.asarray(graph_out.action_weights), np.asarray(tree_out.action_weights)
  actions = np.asarray(graph_out.action), np.asarray(tree_out.action)
  best = np.asarray(shortest_moves(jnp.asarray(cells)))
  return {
    "hits_per_sim": float(np.mean(np.asarray(graph.transposition_hits)) / simulations),
    "self_loops": float(cycles["self_loops"].mean()),
    "self_loop_visits_per_sim": float(cycles["self_loop_visits"].mean() / simulations),
    "cycle_edges": float(cycles["cycle_edges"].mean()),
    "graph_nodes_per_sim": float(np.mean(np.asarray(graph.num_nodes)) / simulations),
    "tree_nodes_per_sim": float(np.mean(np.asarray(tree_out.search_graph.num_nodes)) / simulations),
    "root_value_gap": float(
      np.mean(np.abs(np.asarray(graph.node_values[:, 0] - tree_out.search_graph.node_values[:, 0])))
    ),
    "tv": float(np.mean(0.5 * np.abs(weights[0] - weights[1]).sum(-1))),
    "action_differs": float(np.mean(actions[0] != actions[1])),
    "graph_best": float(np.mean(np.take_along_axis(best, actions[0][:, None], 1))),
    "tree_best": float(np.mean(np.take_along_axis(best, actions[1][:, None], 1))),
  }


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--designs", default=",".join(DESIGNS))
  parser.add_argument("--simulations", default="32,128")
  parser.add_argument("--batch", type=int, default=64)
  parser.add_argument("--train-steps", type=int, default=1500)
  parser.add_argument("--train-batch", type=int, default=256)
  parser.add_argument("--unroll", type=int, default=5)
  parser.add_argument("--width", type=int, default=64)
  parser.add_argument("--latent-size", type=int, default=16)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  args.designs = args.designs.split(",")
  args.simulations = [int(s) for s in args.simulations.split(",")]
  for design in args.designs:
    if design not in DESIGNS:
      parser.error(f"unknown design {design!r}; known: {','.join(DESIGNS)}")
  return args


def run(argv=None) -> None:
  args = parse_args(argv)
  print(f"learned_latents: {vars(args)}; jax {jax.__version__}, {jax.devices()[0].platform}")
  facts_table = [
    "| design | final loss | fixed points (1-4 moves) | one move repeated: reaches a fixed "
    "point (moves) | latents / state | wrongly shared |"
  ]
  facts_table.append("|---|---|---|---|---|---|")
  table = [
    "| design | policy | S | hits/sim | self-loops | self-loop visits/sim | longer-cycle "
    "edges | nodes/sim graph / tree | root value gap | TV | action differs | shortest move "
    "graph / tree |"
  ]
  table.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
  depth_table = [
    "| design | policy | S | hits/sim | cycle edges | nodes/sim | root value gap | TV | "
    "action differs |",
    "|---|---|---|---|---|---|---|---|---|",
  ]
  search_key, cell_key = jax.random.split(jax.random.PRNGKey(args.seed + 1))
  cells = random_cells(cell_key, args.batch)
  for design in args.designs:
    model = MuZeroModel(design, width=args.width, latent_size=args.latent_size)
    params, loss = train(
      model,
      jax.random.PRNGKey(args.seed),
      steps=args.train_steps,
      batch=args.train_batch,
      unroll=args.unroll,
    )
    facts = model_facts(model, params) | repeated_move_facts(model, params)
    moves = facts["repeat_fixed_moves"]
    facts_table.append(
      f"| {design} | {loss:.3f} | {facts['fixed_share']:.1%} | "
      f"{facts['repeat_fixed_share']:.1%} ({'-' if np.isnan(moves) else f'{moves:.1f}'}) | "
      f"{facts['latents_per_state']:.2f} | {facts['wrong_merge_share']:.1%} |"
    )
    print(facts_table[-1], flush=True)
    for policy, simulations in itertools.product(POLICIES, args.simulations):
      outs = {
        mode: make_search(model, policy, simulations, mode)(params, search_key, cells)
        for mode in MODES
      }
      r = compare(outs["graph"], outs["tree"], np.asarray(cells), simulations)
      table.append(
        f"| {design} | {policy} | {simulations} | {r['hits_per_sim']:.3f} | "
        f"{r['self_loops']:.2f} | {r['self_loop_visits_per_sim']:.3f} | {r['cycle_edges']:.2f} | "
        f"{r['graph_nodes_per_sim']:.2f} / {r['tree_nodes_per_sim']:.2f} | "
        f"{r['root_value_gap']:.3f} | {r['tv']:.3f} | "
        f"{r['action_differs']:.1%} | {r['graph_best']:.1%} / {r['tree_best']:.1%} |"
      )
      print(table[-1], flush=True)
      d = compare(outs["depth"], outs["tree"], np.asarray(cells), simulations)
      depth_table.append(
        f"| {design} | {policy} | {simulations} | {d['hits_per_sim']:.3f} | "
        f"{d['self_loops'] + d['cycle_edges']:.2f} | {d['graph_nodes_per_sim']:.2f} | "
        f"{d['root_value_gap']:.3f} | {d['tv']:.3f} | {d['action_differs']:.1%} |"
      )
      print(depth_table[-1], flush=True)
  print("\nModel facts (move sequences of 1 to 4 moves from every non-goal cell):\n")
  print("\n".join(facts_table))
  print(f"\nSearch: {args.batch} searches per row, graph (default key) against tree:\n")
  print("\n".join(table))
  print("\nThe default key on {latent, depth} (the moves from the root), against the tree:\n")
  print("\n".join(depth_table))
