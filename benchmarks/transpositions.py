"""Does the graph pick a minimax-optimal root move more often than the tree?

For each position (a game start whose optimal root moves the exact solver knows) and
each evaluator, R independent searches (one batch of R games, one key each) are run
once per variant of the search: the tree (`transpositions=False`) and graph modes
that differ in how a playout treats a transposition (`stop_rule`, `stop_leak`,
`stop_epsilon`, `fold_evaluations`: see `mcgs_jax.GraphOptions`). Each search runs
max(S) simulations and is measured after every S of `--simulations`: the first S
simulations of a longer search are a search of S (simulation keys are drawn one after
another and the capacity is never reached), so one jitted call gives every S.

Positions:
  * `nim345`: the start of Nim 3-4-5 (one winning move: take 2 from heap 0), where
    random rollouts mislead UCT (the classic UCT-on-Nim experiment).
  * `nim4`: a won four-heap Nim position (`--nim4`, default 2,3,5,7: 3 winning moves
    of 17), checked by the solver.
  * `dag`: the layered DAG game (`mcgs_jax.games.dag`) with `--dag` shape; the seeds
    are the first `--dag-seeds` seeds from 0 whose exact solution has a unique optimal
    root action (chosen by that rule, not by hand). All seeds run in one vmapped call.

Evaluators: `uniform` (zero logits and value: only terminal rewards inform the
search) and `rollout` (one uniformly random playout). Policy (`--policy auto`):
`uct_policy` (c = `--c`) with rollouts, `muzero_policy` (temperature 0, no Dirichlet
noise) with the uniform evaluator.

A search "picks an optimal move" when its most visited root action is optimal; a tie
for most visits counts the optimal share of the tied actions (the expected result of
a random tie-break, as `muzero_policy` at temperature 0 does). Also reported: nodes
in use and transposition hits per search (mean over the R searches).

A variant whose keywords the library rejects (ValueError, TypeError,
NotImplementedError) is skipped with a note. So is one that the library accepts but
ignores: before a variant that uses `stop_leak`, `stop_epsilon`, `stop_rule=
"value_lag"` or `fold_evaluations` runs, a probe search (Nim 3-4-5, rollouts) with it
is compared with the same search without those keywords; identical graphs mean the
keyword had no effect (`--no-probe` turns this off).

Usage:
  python -m benchmarks.transpositions [--simulations 200,800,3200] [--searches 16]
      [--positions nim345,nim4,dag] [--evaluators uniform,rollout]
      [--variants "tree,graph catch_up,graph never"] [--json out.json] [--write]
"""

import argparse
import copy
import dataclasses
import datetime
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import mcgs_jax as mg
from benchmarks import results_section
from mcgs_jax.games import evaluators, search_game, solvers
from mcgs_jax.games.adapter import make_game
from mcgs_jax.games.dag import DagGame
from mcgs_jax.games.nim import Nim

# The searches compared: name -> graph keywords of the policy (`mcgs_jax.GraphOptions`).
VARIANTS: dict[str, dict[str, Any]] = {
  "tree": dict(transpositions=False),
  "graph catch_up": dict(stop_rule="catch_up"),
  "graph catch_up leak 0.1": dict(stop_rule="catch_up", stop_leak=0.1),
  "graph catch_up leak 0.1 fold": dict(stop_rule="catch_up", stop_leak=0.1, fold_evaluations=True),
  "graph value_lag 0.05": dict(stop_rule="value_lag", stop_epsilon=0.05),
  "graph never": dict(stop_rule="never"),
  "graph never fold": dict(stop_rule="never", fold_evaluations=True),
}

POSITIONS = ("nim345", "nim4", "dag")
EVALUATORS = ("uniform", "rollout")
# Errors by which the library says a keyword (or value) is not supported.
REJECTED = (ValueError, TypeError, NotImplementedError)


@dataclasses.dataclass
class Position:
  """One row group of the table: the envs searched from their start, with the
  optimal root actions of each (several envs: DAG seeds, batched together).

  name: short name (`nim345`, `nim4`, `dag`).
  label: for the table.
  envs: games with equal shapes, searched from `env.init`.
  optimal: per env, the set of optimal root actions.
  legal: per env, the number of legal root actions.
  """

  name: str
  label: str
  envs: list[Any]
  optimal: list[set]
  legal: list[int]


def nim_position(name: str, heaps: Sequence[int]) -> Position:
  """A Nim start with its winning moves from the solver; refuses a lost position."""
  env = Nim(tuple(heaps))
  values = solvers.nim_action_values(heaps, env.max_heap)
  best = max(values.values())
  if best < 1:
    raise ValueError(f"Nim {heaps} is lost for the player to move: choose a won one")
  optimal = {a for a, v in values.items() if v == best}
  return Position(name, f"Nim {'-'.join(map(str, heaps))}", [env], [optimal], [len(values)])


def parse_dag_shape(text: str) -> dict[str, int]:
  """`"actions=4,depth=8,width=6"` -> DagGame keywords."""
  names = {
    "actions": "num_actions",
    "num_actions": "num_actions",
    "depth": "depth",
    "width": "width",
  }
  shape = {}
  for item in filter(None, text.split(",")):
    name, _, value = item.partition("=")
    if name.strip() not in names:
      raise ValueError(f"bad --dag item {item!r}: expected actions, depth or width")
    shape[names[name.strip()]] = int(value)
  return shape


def unique_optimum_seeds(shape: dict[str, int], count: int, limit: int = 100_000):
  """The first `count` seeds from 0 whose DAG game (of `shape`) has exactly one
  optimal root action, by the exact solution."""
  seeds = []
  for seed in range(limit):
    values = DagGame(seed=seed, **shape).exact_action_values(0, 0)
    best = max(values.values())
    if sum(v == best for v in values.values()) == 1:
      seeds.append(seed)
      if len(seeds) == count:
        return seeds
  raise ValueError(
    f"only {len(seeds)} of the first {limit} seeds of {shape} have a unique optimal root action"
  )


def dag_position(shape: dict[str, int], count: int) -> Position:
  seeds = unique_optimum_seeds(shape, count)
  envs = [DagGame(seed=seed, **shape) for seed in seeds]
  optimal, legal = [], []
  for env in envs:
    values = env.exact_action_values(0, 0)
    optimal.append({a for a, v in values.items() if v == max(values.values())})
    legal.append(len(values))
  label = (
    f"DAG A={shape['num_actions']} depth={shape['depth']} width={shape['width']}, "
    f"seeds {','.join(map(str, seeds))}"
  )
  return Position("dag", label, envs, optimal, legal)


def make_evaluator(name: str, env):
  if name == "uniform":
    return evaluators.uniform_evaluator()
  if name == "rollout":
    return evaluators.rollout_evaluator(env, num_rollouts=1)
  raise ValueError(f"unknown evaluator {name!r}; expected one of {EVALUATORS}")


def policy_for(evaluator: str, choice: str) -> str:
  """`--policy auto`: UCT with rollouts, MuZero (PUCT) with the uniform evaluator."""
  if choice != "auto":
    return choice
  return "uct" if evaluator == "rollout" else "muzero"


def graph_in(carry):
  """The `mg.Graph` inside a simulation loop's carry."""
  leaves = jax.tree_util.tree_leaves(carry, is_leaf=lambda x: isinstance(x, mg.Graph))
  found = [leaf for leaf in leaves if isinstance(leaf, mg.Graph)]
  if len(found) != 1:
    raise RuntimeError("cannot find the graph in the simulation loop's carry")
  return found[0]


def measure(graph, optimal_mask):
  """What the table reports of a batch of graphs, as `[B]` arrays.

  optimal_mask: bool `[B, A]`, the optimal root actions of each game.
  """
  visits = graph.edge_visits[:, 0]  # [B, A]
  tied = visits == jnp.max(visits, axis=-1, keepdims=True)
  credit = jnp.sum(tied & optimal_mask, axis=-1) / jnp.sum(tied, axis=-1)
  return dict(
    optimal=credit.astype(jnp.float32),
    nodes=graph.num_nodes,
    hits=graph.transposition_hits,
    overflows=graph.capacity_overflows,
    dropped=graph.dropped_inserts,
  )


def checkpoint_loop(steps: Sequence[int], optimal_mask, records: list):
  """A `loop_fn` that runs the simulation loop as one `fori_loop` and keeps
  `measure(graph)` after each number of `steps`; appends the kept values (`[len(steps),
  B]` per field, traced: use them inside the same jitted function) to `records`.

  One loop (not one per segment) so the simulation body is compiled once.
  """
  checkpoints = jnp.asarray(steps, jnp.int32)

  def loop_fn(lower, upper, body, carry):
    first = measure(graph_in(carry), optimal_mask)
    kept = jax.tree.map(lambda x: jnp.zeros((len(steps),) + x.shape, x.dtype), first)

    def step(index, state):
      carry, kept = state
      carry = body(index, carry)
      now = measure(graph_in(carry), optimal_mask)
      due = checkpoints == index + 1  # [len(steps)]
      kept = jax.tree.map(
        lambda old, new: jnp.where(due.reshape((-1,) + (1,) * new.ndim), new[None], old), kept, now
      )
      return carry, kept

    carry, kept = jax.lax.fori_loop(lower, upper, step, (carry, kept))
    records.append(kept)
    return carry

  return loop_fn


def search_fn(
  env,
  evaluator: str,
  policy: str,
  simulations: Sequence[int],
  num_searches: int,
  keywords: dict[str, Any],
  c: float,
):
  """`(key, optimal_mask [R, A]) -> (records, action [R])`: R searches from
  `env.init`, measured after every number of `simulations` (unjitted)."""
  game = make_game(env, make_evaluator(evaluator, env))
  num_parallel = keywords.get("num_parallel", 1)
  steps = [s // num_parallel for s in simulations]
  capacity = max(simulations) + 1

  def run(key, optimal_mask):
    init_key, root_key, search_key = jax.random.split(key, 3)
    state = game.init(init_key, num_searches)
    if policy == "muzero":
      policy_fn, options = mg.muzero_policy, dict(temperature=0.0, dirichlet_fraction=0.0)
    elif policy == "uct":
      policy_fn, options = mg.uct_policy, dict(c=c)
    else:
      raise ValueError(f"unknown policy {policy!r}")
    records = []
    out = search_game(
      policy_fn,
      game,
      state,
      max(simulations),
      search_key,
      root_key=root_key,
      capacity=capacity,
      loop_fn=checkpoint_loop(steps, optimal_mask, records),
      **options,
      **keywords,
    )
    return records[0], out.action

  return run


def with_tables(template: DagGame, next_index, legal, terminal_values) -> DagGame:
  """A copy of `template` whose rule tables are the given (possibly traced) arrays.

  `DagGame.step` reads its tables from these three attributes, so vmapping a search
  over stacked tables runs the DAG games of several seeds in one compiled call, with
  the library's own `step`.
  """
  env = copy.copy(template)
  env._next_index_jnp = next_index
  env._legal_jnp = legal
  env._terminal_values_jnp = terminal_values
  env._exact_values = None
  return env


def compiled_position_search(
  position: Position, evaluator: str, policy: str, simulations, num_searches, keywords, c
):
  """A jitted `(key) -> (records [G, len(S), R], action [G, R])` over the G envs of
  the position (vmapped over the DAG seeds' tables), with its optimal masks bound."""
  num_actions = position.envs[0].num_actions
  masks = np.zeros((len(position.envs), num_searches, num_actions), bool)
  for index, optimal in enumerate(position.optimal):
    masks[index, :, sorted(optimal)] = True
  masks = jnp.asarray(masks)
  if len(position.envs) == 1:
    run = search_fn(position.envs[0], evaluator, policy, simulations, num_searches, keywords, c)
    single = lambda key: run(key, masks[0])
    return jax.jit(lambda key: jax.tree.map(lambda x: x[None], single(key)))

  template = position.envs[0]
  tables = tuple(
    jnp.stack([getattr(env, name) for env in position.envs])
    for name in ("_next_index_jnp", "_legal_jnp", "_terminal_values_jnp")
  )

  def one(key, mask, next_index, legal, terminal_values):
    env = with_tables(template, next_index, legal, terminal_values)
    return search_fn(env, evaluator, policy, simulations, num_searches, keywords, c)(key, mask)

  def grouped(key):
    keys = jax.random.split(key, len(position.envs))
    return jax.vmap(one)(keys, masks, *tables)

  return jax.jit(grouped)


def run_variant(
  position: Position,
  evaluator: str,
  policy: str,
  simulations,
  num_searches: int,
  keywords,
  c: float,
  seed: int,
):
  """Compiles and runs one (position, evaluator, variant); numpy results and times."""
  search = compiled_position_search(
    position, evaluator, policy, simulations, num_searches, keywords, c
  )
  key = jax.random.PRNGKey(seed)
  start = time.perf_counter()
  compiled = search.lower(key).compile()
  compile_seconds = time.perf_counter() - start
  start = time.perf_counter()
  records, action = jax.block_until_ready(compiled(key))
  run_seconds = time.perf_counter() - start
  records = jax.tree.map(np.asarray, records)  # [G, len(S), R]
  action = np.asarray(action)  # [G, R]
  # The policy's own action after max(S) must agree with the most-visited rule
  # wherever that rule has no tie.
  final = records["optimal"][:, -1]
  played = np.array([[a in optimal for a in row] for row, optimal in zip(action, position.optimal)])
  decided = (final == 0) | (final == 1)
  disagreements = int(np.sum(decided & (played != (final == 1))))
  return records, dict(
    compile_seconds=compile_seconds, run_seconds=run_seconds, disagreements=disagreements
  )


# Keywords whose presence makes a variant worth probing, and what the search would do
# if the library ignored them.
NEW_KEYWORDS = ("stop_leak", "stop_epsilon", "fold_evaluations")


def without_new_keywords(keywords: dict[str, Any]) -> dict[str, Any]:
  reference = {k: v for k, v in keywords.items() if k not in NEW_KEYWORDS}
  if reference.get("stop_rule") == "value_lag":
    reference["stop_rule"] = "catch_up"
  return reference


def probe(keywords: dict[str, Any], cache: dict) -> str | None:
  """None when `keywords` runs and changes the search; otherwise why to skip it.

  Runs a small search (Nim 3-4-5, rollouts, UCT, 4 games, 200 simulations) with the
  keywords and with `without_new_keywords(keywords)`; equal graphs mean the library
  accepted keywords it does not implement.
  """
  reference = without_new_keywords(keywords)
  if reference == keywords:
    return None
  env = Nim((3, 4, 5))
  game = make_game(env, evaluators.rollout_evaluator(env))

  def graph_of(graph_keywords):
    cache_key = tuple(sorted(graph_keywords.items()))
    if cache_key not in cache:

      @jax.jit
      def run(key):
        state = game.init(key, 4)
        return search_game(mg.uct_policy, game, state, 200, key, **graph_keywords).search_graph

      cache[cache_key] = jax.tree.map(np.asarray, run(jax.random.PRNGKey(0)))
    return cache[cache_key]

  try:
    graph = graph_of(keywords)
  except REJECTED as error:
    return f"rejected by the library: {type(error).__name__}: {error}"
  same = all(
    np.array_equal(getattr(graph, name), getattr(graph_of(reference), name))
    for name in ("edge_visits", "node_visits", "node_values", "num_nodes")
  )
  if same:
    return (
      f"accepted but without effect (same graph as {reference}): not implemented in this version"
    )
  return None


def hardware() -> str:
  """`2-core CPU (model)` or the accelerator's name."""
  device = jax.devices()[0]
  if device.platform != "cpu":
    return f"{device.platform.upper()} {device.device_kind}"
  model = platform.processor() or "CPU"
  try:
    with open("/proc/cpuinfo") as cpuinfo:
      names = [line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")]
      model = names[0] if names else model
  except OSError:
    pass
  cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
  return f"{cores}-core CPU ({model})"


def fraction(total: float, count: int) -> str:
  """`"11/16"`, or `"11.5/16"` when random tie-breaks gave half credit."""
  text = f"{total:.1f}".rstrip("0").rstrip(".")
  return f"{text}/{count}"


def table(rows: list[dict], simulations: Sequence[int]) -> str:
  """The markdown table: one line per (position, evaluator, variant)."""
  sims = " / ".join(map(str, simulations))
  lines = [
    "| position | evaluator (policy) | variant | "
    + " | ".join(f"optimal, S={s}" for s in simulations)
    + f" | nodes (S={sims}) | hits (S={sims}) |",
    "|---|---|---|" + "---|" * len(simulations) + "---|---|",
  ]
  for row in rows:
    per_s = row["per_s"]
    lines.append(
      f"| {row['position']} | {row['evaluator']} ({row['policy']}) | {row['variant']} | "
      + " | ".join(fraction(p["optimal_total"], p["searches"]) for p in per_s)
      + " | "
      + " / ".join(f"{p['nodes']:.0f}" for p in per_s)
      + " | "
      + " / ".join(f"{p['hits']:.0f}" for p in per_s)
      + " |"
    )
  return "\n".join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument(
    "--simulations",
    default="200,800,3200",
    help="comma-separated S, measured within one search of max(S)",
  )
  parser.add_argument(
    "--searches", type=int, default=16, help="R: independent searches per position (one batch)"
  )
  parser.add_argument("--positions", default=",".join(POSITIONS))
  parser.add_argument("--evaluators", default=",".join(EVALUATORS))
  parser.add_argument(
    "--variants",
    default=",".join(VARIANTS),
    help="comma-separated names of VARIANTS (default: all)",
  )
  parser.add_argument(
    "--policy",
    default="auto",
    choices=("auto", "muzero", "uct"),
    help="auto: uct with rollouts, muzero with the uniform evaluator",
  )
  parser.add_argument("--c", type=float, default=1.41, help="UCT exploration constant")
  parser.add_argument("--nim4", default="2,3,5,7", help="a won four-heap Nim position")
  parser.add_argument("--dag", default="actions=4,depth=8,width=6", help="shape of the DAG games")
  parser.add_argument(
    "--dag-seeds",
    type=int,
    default=4,
    help="K: the first K seeds with a unique optimal root action",
  )
  parser.add_argument("--seed", type=int, default=0, help="key of every search batch")
  parser.add_argument(
    "--no-probe",
    action="store_true",
    help="run variants with new keywords without checking they act",
  )
  parser.add_argument("--json", help="also write the results to this JSON file")
  parser.add_argument(
    "--write", action="store_true", help="append the section to benchmarks/RESULTS.md"
  )
  parser.add_argument(
    "--title", default="Transposition handling", help="heading of the markdown section"
  )
  args = parser.parse_args(argv)

  simulations = sorted(int(s) for s in args.simulations.split(","))
  variant_names = [v.strip() for v in args.variants.split(",") if v.strip()]
  unknown = [v for v in variant_names if v not in VARIANTS]
  if unknown:
    parser.error(f"unknown variants {unknown}; known: {list(VARIANTS)}")
  evaluator_names = [e for e in args.evaluators.split(",") if e]
  positions = []
  for name in [p for p in args.positions.split(",") if p]:
    if name == "nim345":
      positions.append(nim_position("nim345", (3, 4, 5)))
    elif name == "nim4":
      positions.append(nim_position("nim4", [int(h) for h in args.nim4.split(",")]))
    elif name == "dag":
      positions.append(dag_position(parse_dag_shape(args.dag), args.dag_seeds))
    else:
      parser.error(f"unknown position {name!r}; expected {POSITIONS}")

  skipped, probe_cache = {}, {}
  runnable = []
  for name in variant_names:
    reason = None if args.no_probe else probe(VARIANTS[name], probe_cache)
    if reason:
      skipped[name] = reason
      print(f"skip {name!r}: {reason}", file=sys.stderr, flush=True)
    else:
      runnable.append(name)

  rows, started = [], time.perf_counter()
  for position in positions:
    for evaluator in evaluator_names:
      policy = policy_for(evaluator, args.policy)
      for name in runnable:
        try:
          records, timing = run_variant(
            position,
            evaluator,
            policy,
            simulations,
            args.searches,
            VARIANTS[name],
            args.c,
            args.seed,
          )
        except REJECTED as error:
          skipped[name] = f"rejected by the library: {type(error).__name__}: {error}"
          print(f"skip {name!r}: {skipped[name]}", file=sys.stderr, flush=True)
          continue
        per_s = []
        for index, s in enumerate(simulations):
          pick = lambda field: records[field][:, index]  # [G, R]
          per_s.append(
            dict(
              simulations=s,
              searches=int(pick("optimal").size),
              optimal_total=float(pick("optimal").sum()),
              optimal_share=float(pick("optimal").mean()),
              optimal_per_env=[float(x) for x in pick("optimal").sum(axis=1)],
              nodes=float(pick("nodes").mean()),
              hits=float(pick("hits").mean()),
              overflows=int(pick("overflows").sum()),
              dropped=int(pick("dropped").sum()),
            )
          )
        row = dict(
          position=position.label,
          position_name=position.name,
          evaluator=evaluator,
          policy=policy,
          variant=name,
          keywords=VARIANTS[name],
          per_s=per_s,
          **timing,
        )
        rows.append(row)
        print(
          f"{position.label} | {evaluator} ({policy}) | {name}: "
          + ", ".join(
            f"S={p['simulations']} {fraction(p['optimal_total'], p['searches'])} "
            f"nodes {p['nodes']:.0f} hits {p['hits']:.0f}"
            for p in per_s
          )
          + f" | compile {timing['compile_seconds']:.1f} s, run "
          f"{timing['run_seconds']:.1f} s",
          file=sys.stderr,
          flush=True,
        )
  total_seconds = time.perf_counter() - started

  command = (
    "python -m benchmarks.transpositions "
    f"--simulations {','.join(map(str, simulations))} --searches {args.searches} "
    f"--positions {args.positions} --evaluators {args.evaluators} "
    f'--variants "{",".join(variant_names)}" --policy {args.policy} '
    f"--nim4 {args.nim4} --dag {args.dag} --dag-seeds {args.dag_seeds} "
    f"--seed {args.seed}"
    + (f' --title "{args.title}"' if args.title != parser.get_default("title") else "")
  )
  position_notes = []
  for position in positions:
    share = np.mean([len(o) / n for o, n in zip(position.optimal, position.legal)])
    optimal = "; ".join(
      f"{sorted(o)} of {n} legal" for o, n in zip(position.optimal, position.legal)
    )
    position_notes.append(
      f"- {position.label}: optimal root actions {optimal} "
      f"(a random legal move is optimal {100 * share:.0f}% of the "
      f"time)."
    )
  warnings = [
    f"- {row['position']} / {row['evaluator']} / {row['variant']}: "
    f"{p['overflows']} capacity overflows, {p['dropped']} dropped inserts "
    f"at S={p['simulations']}"
    for row in rows
    for p in row["per_s"]
    if p["overflows"] or p["dropped"]
  ]
  warnings += [
    f"- {row['position']} / {row['evaluator']} / {row['variant']}: the "
    f"policy's action disagrees with the most visited action in "
    f"{row['disagreements']} searches"
    for row in rows
    if row["disagreements"]
  ]
  timings = ", ".join(
    f"{row['position_name']}/{row['evaluator']}/{row['variant']} "
    f"{row['compile_seconds']:.0f}+{row['run_seconds']:.1f} s"
    for row in rows
  )
  searches_note = f"R = {args.searches} searches per position ({args.searches} per DAG seed)"
  section = "\n".join(
    [
      f"## {args.title} (date {datetime.date.today().isoformat()}, {hardware()}, "
      f"jax {jax.__version__})",
      "",
      f"Does the graph pick a minimax-optimal root move more often than the tree? "
      f'{searches_note}, one batch, key {args.seed} for every variant; "optimal": '
      f"searches whose most visited root action is optimal by the exact solver (a tie "
      f"counts the optimal share of the tied actions); nodes and transposition hits: "
      f"mean per search. Every S is measured within one search of {max(simulations)} "
      f"simulations (capacity {max(simulations) + 1}). Policies: `muzero_policy` "
      f"(temperature 0, no Dirichlet noise) with the uniform evaluator, `uct_policy` "
      f"(c = {args.c}) with one random rollout, unless `--policy` says otherwise. "
      f"Regenerate: `{command}`.",
      "",
      table(rows, simulations),
      "",
      *position_notes,
      "",
      *(
        ["Skipped variants:", ""]
        + [f"- {name}: {reason}" for name, reason in skipped.items()]
        + [""]
        if skipped
        else []
      ),
      *(["Warnings:", ""] + warnings + [""] if warnings else []),
      f"Time (compile + run per row): {timings}; {total_seconds:.0f} s in all.",
      "",
    ]
  )
  print(section)
  if args.json:
    with open(args.json, "w") as f:
      json.dump(
        dict(
          command=command,
          date=datetime.date.today().isoformat(),
          hardware=hardware(),
          jax=jax.__version__,
          simulations=simulations,
          searches=args.searches,
          rows=rows,
          skipped=skipped,
          positions=[
            dict(name=p.name, label=p.label, optimal=[sorted(o) for o in p.optimal], legal=p.legal)
            for p in positions
          ],
          total_seconds=total_seconds,
        ),
        f,
        indent=1,
      )
  if args.write:
    results_section.append(section)


if __name__ == "__main__":
  main()
