"""`mcgs-jax arena`: a match between two search agents, with its score and Elo.

Without arguments it plays this library's default agent against DeepMind's mctx on
connect four: both sides `muzero` (greedy, no root noise) with the same trained
network (shipped with the package: `builtin_checkpoint("connect_four")`) and 64
simulations per move; agent A searches a graph, keeps it between moves (MCGS with
`reuse`) and proves exact values (the solver), agent B is `mctx.muzero_policy`, which
searches a tree from scratch at every move. 128 games from 64 random 3-ply openings,
each played once with each colour assignment. Every flag changes one side of that
(`--a-...`, `--b-...`) or the match (`--game`, `--games`, `--openings`, `--seed`,
`--equal-time`). `--a-checkpoint FILE`
gives A another network (a file written by `mcgs_jax.apps.train`: `--checkpoint-dir`
or `--save-params`); for a game without a built-in network the evaluator defaults to
random rollouts. What each part buys on its own (the graph alone, reuse alone):

    mcgs-jax arena --b-engine mcgs --b-mode tree --b-reuse   # graph + reuse vs tree + reuse
    mcgs-jax arena --a-no-reuse --a-no-solver                # graph alone vs mctx
    mcgs-jax arena --b-engine mcgs --b-mode graph --a-no-solver   # what the solver buys

`--equal-time` keeps A's simulations and first measures B's search on the match's
positions, choosing B's simulations so that it takes A's time per move; both figures
are printed. It prints the match and each agent's settings, the result from A's side
(wins, draws, losses, score, Elo difference with a 95% interval) and what each agent's
searches used (nodes and transposition hits per move, and search seconds per ply of
the whole batch). `--json` prints one JSON object instead (`"partial": false`; after
Ctrl-C, the result of the games finished so far with `"partial": true`, then exit
status 130); `--plot FILE.png` draws the score with its interval and the nodes per
move of both agents. Progress goes to
stderr. `--simulations N` sets both agents' simulations (`--a-simulations` /
`--b-simulations` still override it). The report ends with a verdict from the score's
95% interval: "A stronger (95%)", "B stronger (95%)" or "no significant difference at
95%".

Bad input exits with status 2 and a single line `mcgs-jax arena: error: ...` on
stderr, before any search.
"""

import contextlib
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from mcgs_jax.apps import engines, files, partial, registry
from mcgs_jax.apps.cli.arena_parser import (
  BUILTIN_NETWORKS,
  DEFAULTS,
  PROG,
  build_parser,
  builtin_checkpoint,
)
from mcgs_jax.apps.cli.args import parse_or_status
from mcgs_jax.apps.extras import missing_extra

# Where RESULTS.md measures what each part of the default agent buys.
PARTS_TABLE = (
  "benchmarks/RESULTS.md, 'Switching from mctx with the solver on by default' "
  "(and 'The solver in play')"
)


def _checkpoint(args, side: str) -> str | None:
  """The side's checkpoint: `--SIDE-checkpoint`, else the game's built-in network
  when the side's evaluator is unset or `network`, else None."""
  checkpoint = getattr(args, f"{side}_checkpoint")
  if checkpoint:
    return checkpoint
  if getattr(args, f"{side}_evaluator") in (None, "network"):
    return builtin_checkpoint(args.game)
  return None


def _evaluator(args, side: str) -> str:
  """The side's evaluator name: as given, else network with a checkpoint (given or
  built in), else the fallback."""
  name = getattr(args, f"{side}_evaluator")
  given = getattr(args, f"{side}_checkpoint")
  checkpoint = _checkpoint(args, side)
  if name is None:
    name = "network" if checkpoint else DEFAULTS["fallback_evaluator"]
  if name == "network" and not checkpoint:
    raise ValueError(
      f"--{side}-evaluator network needs --{side}-checkpoint FILE (no built-in network for "
      f"{args.game}; built in: {', '.join(BUILTIN_NETWORKS)})"
    )
  if given and name != "network":
    raise ValueError(f"--{side}-checkpoint is for --{side}-evaluator network, not {name}")
  return name


def _check_engine(args, side: str) -> None:
  """ValueError naming the flags that the side's engine cannot honour."""
  get = lambda name: getattr(args, f"{side}_{name}")
  if not engines.get_engine(get("engine")).external:
    return
  if get("policy") not in registry.MCTX_POLICY_NAMES:
    raise ValueError(
      f"--{side}-engine mctx has policies {' and '.join(registry.MCTX_POLICY_NAMES)}, "
      f"not --{side}-policy "
      f"{get('policy')} (mctx has no UCT; use --{side}-engine mcgs)"
    )
  for flag, used in (
    ("mode graph", get("mode") == "graph"),
    ("reuse", get("reuse")),
    ("solver", get("solver")),
    ("make-room", get("make_room")),
    (f"parallel {get('parallel')}", get("parallel") > 1),
  ):
    if used:
      raise ValueError(
        f"--{side}-{flag} is for --{side}-engine mcgs: mctx searches a tree from scratch "
        "at every move"
      )


def _simulations(args, side: str) -> int:
  """The side's simulations: `--SIDE-simulations`, else `--simulations`, else the
  default."""
  for value in (getattr(args, f"{side}_simulations"), args.simulations):
    if value is not None:
      return int(value)
  return int(DEFAULTS["simulations"])


def _check_parallel(args, side: str) -> None:
  """ValueError naming the flags when `--SIDE-parallel` does not divide the
  simulations."""
  parallel, simulations = getattr(args, f"{side}_parallel"), _simulations(args, side)
  if simulations % parallel:
    given = (
      f"--{side}-simulations"
      if getattr(args, f"{side}_simulations") is not None
      else "--simulations"
      if args.simulations is not None
      else "the default simulations"
    )
    raise ValueError(
      f"--{side}-parallel {parallel} must divide the simulations per move ({given}: {simulations})"
    )


def agent_from_args(args, side: str, apply_fn=None):
  """The `Agent` of one side from the parsed flags (`apply_fn`: its network's, with
  a checkpoint)."""
  from mcgs_jax.apps.arena import Agent

  get = lambda name: getattr(args, f"{side}_{name}")
  _check_engine(args, side)
  tree_engine = not engines.get_engine(get("engine")).keeps_graph
  mode = get("mode") or ("graph" if side == "a" else "tree")
  transpositions = mode == "graph" and not get("no_transpositions")
  evaluator = _evaluator(args, side)
  _check_parallel(args, side)
  simulations = _simulations(args, side)
  max_children = registry.default_max_children(args.game, args.max_children)
  name = ""
  if evaluator == "network":
    checkpoint = _checkpoint(args, side) or ""
    label = (
      "built-in" if checkpoint == builtin_checkpoint(args.game) else os.path.basename(checkpoint)
    )
    search = get("engine") if tree_engine else "graph" if transpositions else "tree"
    reuse = get("reuse") if get("reuse") is not None else not tree_engine
    solver = get("solver") if get("solver") is not None else not tree_engine
    # The order of Agent.describe().
    name = f"{get('policy')}/network {label}/{simulations} {search}"
    name += " solver" if solver else ""
    name += " reuse" if reuse and not tree_engine else ""
    name += " room" if get("make_room") else ""
    if get("parallel") > 1:
      name += f" K={get('parallel')}"
    name += f" slots={max_children}" if max_children and not tree_engine else ""
    if not tree_engine:
      name += f" key={args.key_history}" if args.key_history else ""
      name += f" R={args.repetition_bound}" if args.repetition_bound else ""
  return Agent(
    policy=get("policy"),
    evaluator=evaluator,
    num_simulations=simulations,
    engine=get("engine"),
    transpositions=None if tree_engine else transpositions,
    solver=get("solver") if not tree_engine else None,
    reuse=get("reuse") if not tree_engine else None,
    make_room=bool(get("make_room")),
    num_parallel=get("parallel"),
    num_rollouts=get("rollouts"),
    apply_fn=apply_fn,
    max_children=None if tree_engine else max_children,
    key_history=None if tree_engine else args.key_history,
    repetition_bound=None if tree_engine else args.repetition_bound,
    name=name,
  )


def _network(args, side: str):
  """`(apply_fn, params)` from the side's checkpoint (given or built in), or `(None,
  None)` for an evaluator without weights."""
  if _evaluator(args, side) != "network":
    return None, None
  path = _checkpoint(args, side) or ""
  from mcgs_jax.apps import arena, train

  env = arena.two_player_game(args.game).env
  try:
    apply_fn, params, _ = train.load_network(path, env)
  except files.CheckpointError as error:
    raise ValueError(f"--{side}-checkpoint: {error}") from None
  except (KeyError, TypeError, ValueError) as error:
    raise ValueError(
      f"--{side}-checkpoint {path!r} is not a network checkpoint for {args.game}: {error}"
    ) from None
  return apply_fn, params


def verdict(result) -> str:
  """`"A stronger (95%)"`, `"B stronger (95%)"` or `"no significant difference at
  95%"`, from the score's 95% interval."""
  low, high = result.score_ci95
  if low > 0.5:
    return "A stronger (95%)"
  if high < 0.5:
    return "B stronger (95%)"
  return "no significant difference at 95%"


def _memory_per_node(args) -> str:
  """One line: the estimated bytes of one node of each side's graph (mctx: of its
  tree's nodes), and how this library's agents keep their edges."""
  import jax

  from mcgs_jax.apps import memory_estimates

  game = registry.game_from_spec(args.game)
  state = jax.eval_shape(lambda key: game.init(key, 1), jax.random.PRNGKey(0))
  max_children = registry.default_max_children(args.game, args.max_children)
  sizes = []
  for side in ("a", "b"):
    engine = engines.get_engine(getattr(args, f"{side}_engine"))
    size = memory_estimates.node_bytes(game, state, max_children if engine.keeps_graph else None)
    sizes.append(f"{side.upper()} {size / 1e3:.1f} KB")
  note = registry.compact_edges_note(args.game, max_children)
  return f"memory per node (estimate): {', '.join(sizes)}; {note}"


def format_result(game: str, result, openings: int) -> str:
  """The text report of a match."""
  agents = result.agents
  low, high = result.elo_ci95
  score_low, score_high = result.score_ci95
  lines = [
    f"{game}: {result.games} games ({result.games // 2} openings of {openings} random "
    f"plies, each with both colour assignments) on {result.num_devices} device(s), "
    f"{result.seconds:.0f} s",
    f"  A: {agents['a']['name']}",
    f"  B: {agents['b']['name']}",
    f"A: {result.wins} wins, {result.draws} draws, {result.losses} losses  "
    f"score {result.score:.3f} (95% interval {score_low:.3f}-{score_high:.3f})",
    f"Elo of A over B: {result.elo:+.0f} (95% interval {low:+.0f} to {high:+.0f})",
    f"verdict: {verdict(result)}",
    f"mean game length {result.mean_game_length:.1f} plies",
    f"{'':<3}{'simulations':>11}  {'searches':>9}  {'nodes/move':>10}  "
    f"{'transposition hits/move':>23}  {'search s/ply':>12}",
  ]
  for side in ("a", "b"):
    stats = agents[side]
    lines.append(
      f"{side.upper():<3}{stats.get('num_simulations', 0):>11}  {stats['searches']:>9}  "
      f"{stats['mean_nodes']:>10.1f}  {stats['mean_transposition_hits']:>23.1f}  "
      f"{result.timing.get(side, {}).get('search_seconds_per_ply', float('nan')):>12.4f}"
    )
  a_time = result.timing.get("a", {}).get("search_seconds_per_ply", float("nan"))
  b_time = result.timing.get("b", {}).get("search_seconds_per_ply", float("nan"))
  if math.isfinite(a_time) and math.isfinite(b_time) and b_time > 0:
    lines.append(
      f"search time per ply (all {result.games} games at once, after the first, which "
      f"compiles): A {a_time:.4f} s, B {b_time:.4f} s, A/B {a_time / b_time:.2f}"
    )
  calibration = result.calibration
  if calibration:
    lines.append(
      f"equal time: A {calibration['a_simulations']} simulations take "
      f"{calibration['a_seconds']:.4f} s per search; B given {calibration['b_simulations']} "
      f"simulations ({calibration['b_seconds']:.4f} s measured before the match)"
    )
  return "\n".join(lines)


def save_plot(path: str, game: str, result) -> None:
  """Two panels: A's score with its 95% interval, and nodes per move by ply."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [1, 2]})
  low, high = result.score_ci95
  left.errorbar(
    [0],
    [result.score],
    yerr=[[result.score - low], [high - result.score]],
    fmt="o",
    capsize=8,
    color="tab:blue",
  )
  left.axhline(0.5, color="grey", linestyle="--", linewidth=1)
  left.set_xlim(-1, 1)
  left.set_ylim(0, 1)
  left.set_xticks([])
  left.set_ylabel("score of A")
  left.set_title(
    f"W {result.wins} D {result.draws} L {result.losses}\n"
    f"Elo {result.elo:+.0f} [{result.elo_ci95[0]:+.0f}, "
    f"{result.elo_ci95[1]:+.0f}]",
    fontsize=9,
  )
  for side, colour in (("a", "tab:blue"), ("b", "tab:orange")):
    stats = result.agents[side]
    nodes = stats["nodes_per_ply"]
    plies = [ply for ply, value in enumerate(nodes) if not math.isnan(value)]
    right.plot(
      plies,
      [nodes[ply] for ply in plies],
      "o-",
      markersize=3,
      color=colour,
      label=f"{side.upper()}: {stats['name']}",
    )
  right.set_xlabel("ply")
  right.set_ylabel("nodes per search (mean over games)")
  right.set_title(f"{game}, {result.games} games", fontsize=9)
  right.legend(fontsize=8)
  figure.tight_layout()
  files.save_figure(figure, path)
  plt.close(figure)


def main(argv: Sequence[str] | None = None) -> int:
  """Runs `mcgs-jax arena`; returns the exit status (0 ok, 2 bad input)."""
  args = parse_or_status(build_parser(), argv)
  if isinstance(args, int):
    return args
  try:
    from mcgs_jax.apps import arena

    for side in ("a", "b"):  # flag errors before loading anything
      _check_engine(args, side)
      _evaluator(args, side)
      _check_parallel(args, side)
    _check_output(args)
    (apply_a, params_a), (apply_b, params_b) = _network(args, "a"), _network(args, "b")
    agent_a, agent_b = agent_from_args(args, "a", apply_a), agent_from_args(args, "b", apply_b)
    results_so_far: list[Callable] = []
    with _partial_json(args, results_so_far):
      result = arena.play_match(
        args.game,
        agent_a,
        agent_b,
        num_games=args.games,
        seed=args.seed,
        opening_moves=args.openings,
        params_a=params_a,
        params_b=params_b,
        equal_time=args.equal_time,
        progress=True,
        on_start=results_so_far.append,
      )
      if args.plot is not None:  # Ctrl-C while plotting still prints the result
        save_plot(args.plot, args.game, result)
  except (ValueError, TypeError) as error:
    message = " ".join(str(error).split()) or type(error).__name__
    if message.startswith("openings of"):
      message = f"--openings {args.openings}: {message} for {args.game}"
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2
  if args.json:
    report = json_report(args, result)
    if args.plot is not None:
      report["plot"] = args.plot
    print(json.dumps(report))
  else:
    print(format_result(args.game, result, args.openings))
    print(_memory_per_node(args))
    if args.plot is not None:
      print(f"plot saved to {args.plot}")
    if _is_default_match(args):
      print(f"what the graph, reuse and the solver each buy: {PARTS_TABLE}")
  return 0


def json_report(args, result) -> dict[str, Any]:
  """The `--json` object of a match: `result.to_dict()` (`games`: the games it
  counts), the verdict, the match's flags, `games_planned` and `partial` (whether it
  counts fewer games than planned: a match Ctrl-C stopped)."""
  report = result.to_dict()
  report["verdict"] = verdict(result)
  report["game"] = args.game
  report["openings_plies"] = args.openings
  report["seed"] = args.seed
  report["games_planned"] = args.games
  report["partial"] = result.games < args.games
  return report


def _partial_json(args, results_so_far: list[Callable]):
  """With `--json`, a `partial.partial_result` block whose report after Ctrl-C is
  `json_report` of the games finished so far (`results_so_far`: the function
  `play_match` hands to `on_start`; once the match is over, all of them, `"partial":
  false`, while the plot is drawn), or, before any game is over, the match's flags
  with `games` 0; else a block that does nothing."""
  if not args.json:
    return contextlib.nullcontext()

  def report_so_far() -> dict[str, Any]:
    result = results_so_far[0]() if results_so_far else None
    if result is None:
      return dict(
        games=0,
        game=args.game,
        openings_plies=args.openings,
        seed=args.seed,
        games_planned=args.games,
      )
    return json_report(args, result)

  return partial.partial_result(report_so_far)


def _is_default_match(args) -> bool:
  """Whether the sides are the default agents (A: mcgs, B: mctx)."""
  return (args.a_engine, args.b_engine) == (DEFAULTS["engine_a"], DEFAULTS["engine_b"])


def _check_output(args) -> None:
  """ValueError when `--plot`'s directory does not exist or matplotlib is missing
  (before the match)."""
  if args.plot is None:
    return
  missing = missing_extra("matplotlib")
  if missing:
    raise ValueError(f"--plot {missing}")
  try:
    files.check_output_path("--plot", args.plot)
  except ValueError as error:
    raise ValueError(f"cannot write {error}") from None
