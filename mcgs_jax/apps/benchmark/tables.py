"""The tables of `mcgs-jax bench`, in benchmarks/RESULTS.md's format (`markdown`),
with the S-scaling ratios (`scaling_table`) and the versions and hardware of the
header (`environment`)."""

import os
import platform

import jax

from mcgs_jax.apps.benchmark.timing import IMPLEMENTATIONS


def scaling_table(rows, scaling_simulations):
  """Per-simulation cost at the largest S relative to the smallest, per impl."""
  low, high = min(scaling_simulations), max(scaling_simulations)
  result = {}
  for name in IMPLEMENTATIONS:
    per_sim = {
      r["num_simulations"]: r["run_s"] / r["num_simulations"]
      for r in rows
      if r["kind"] == "scaling" and r["impl"] == name
    }
    if low in per_sim and high in per_sim:
      result[name] = round(per_sim[high] / per_sim[low], 2)
  return result


def environment() -> dict[str, str]:
  """Versions and hardware, for the header of a results section."""
  versions = {"jax": jax.__version__}
  for module in ("mctx", "pgx", "flax"):
    try:
      versions[module] = __import__(module).__version__
    except (ImportError, AttributeError):
      versions[module] = "?"
  device = jax.devices()[0]
  return dict(
    platform=device.platform,
    device=getattr(device, "device_kind", ""),
    cpu=platform.processor() or platform.machine(),
    cpu_count=str(os.cpu_count()),
    **versions,
  )


def markdown(rows, scaling, header: str) -> str:
  """The tables of a run, in RESULTS.md's format."""
  lines = [header]
  lines += _throughput_lines(rows)
  lines += _scaling_lines(rows, scaling)
  lines += _capacity_lines(rows)
  lines += _path_lines(rows)
  lines += _memory_lines(rows)
  lines += _probe_window_lines(rows)
  return "\n".join(lines)


def _throughput_lines(rows) -> list[str]:
  """The throughput table."""
  lines: list[str] = []
  throughput = [r for r in rows if r["kind"] == "throughput"]
  if throughput:
    lines += [
      "",
      "| impl | B | S | compile s | run s | sims/s | speed vs mctx |",
      "|---|---|---|---|---|---|---|",
    ]
    lines += [
      f"| {r['impl']} | {r['batch_size']} | {r['num_simulations']} | "
      f"{r['compile_s']} | {r['run_s']} | {r['sims_per_s']:.0f} | "
      f"{r['speedup_vs_mctx']}x |"
      for r in throughput
    ]
  return lines


def _scaling_lines(rows, scaling) -> list[str]:
  """The S-scaling table (with `scaling`, `scaling_table`'s ratios)."""
  lines: list[str] = []
  scaling_rows = [r for r in rows if r["kind"] == "scaling"]
  if scaling_rows and scaling:
    sims = sorted({r["num_simulations"] for r in scaling_rows})
    low, high = sims[0], sims[-1]
    batch = scaling_rows[0]["batch_size"]
    lines += [
      "",
      f"Per-simulation cost at S={high} relative to S={low} (B={batch}, capacity S + 1):",
      "",
      f"| impl | run s, S={low} | run s, S={high} | cost ratio per simulation | "
      "cost ratio per edge step |",
      "|---|---|---|---|---|",
    ]
    for name, ratio in scaling.items():
      by_s = {r["num_simulations"]: r for r in scaling_rows if r["impl"] == name}
      per_step = (
        "-"
        if "ns_per_edge_step" not in by_s[low]
        else f"{by_s[high]['ns_per_edge_step'] / by_s[low]['ns_per_edge_step']:.2f}x"
      )
      lines.append(
        f"| {name} | {by_s[low]['run_s']} | {by_s[high]['run_s']} | {ratio}x | {per_step} |"
      )
  return lines


def _capacity_lines(rows) -> list[str]:
  """The capacity table."""
  lines: list[str] = []
  capacity_rows = [r for r in rows if r["kind"] == "capacity"]
  if capacity_rows:
    first = capacity_rows[0]
    smallest = min(r["capacity"] for r in capacity_rows)
    lines += [
      "",
      f"Capacity alone (S={first['num_simulations']} fixed, "
      f"B={first['batch_size']}): per-simulation cost relative to capacity "
      f"{smallest}:",
      "",
      f"| impl | tables | capacity | run s | cost vs capacity {smallest} | nodes used (mean) |",
      "|---|---|---|---|---|---|",
    ]
    for impl in ("tree", "graph"):
      for recycle in (False, True):
        same = (r for r in capacity_rows if (r["impl"], r["recycle"]) == (impl, recycle))
        for r in sorted(same, key=lambda r: r["capacity"]):
          nodes = r.get("mean_nodes", "-")
          tables = "recycled" if recycle else "new"
          lines.append(
            f"| {impl} | {tables} | {r['capacity']} | {r['run_s']} | "
            f"{r['cost_vs_smallest']}x | {nodes} |"
          )
  return lines


def _path_lines(rows) -> list[str]:
  """How far the playouts went."""
  lines: list[str] = []
  path_rows = [r for r in rows if "edge_steps" in r]
  if path_rows:
    lines += [
      "",
      "How far the playouts went (ours; `edge steps`: mean edges counted per "
      "playout; `deepest`: mean over games of the deepest node's depth):",
      "",
      "| part | impl | B | S | capacity | edge steps | deepest | ns per edge step |",
      "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
      f"| {r['kind']} | {r['impl']}{' (recycled)' if r.get('recycle') else ''} | "
      f"{r['batch_size']} | {r['num_simulations']} | "
      f"{r['capacity']} | {r['edge_steps']} | {r['deepest']} | "
      f"{r['ns_per_edge_step']} |"
      for r in path_rows
    ]
  return lines


def _memory_lines(rows) -> list[str]:
  """The memory table."""
  lines: list[str] = []
  memory = [r for r in rows if r["kind"] == "memory"]
  if memory:
    budget = memory[0]["budget_gb"]
    lines += [
      "",
      "Memory of a graph-mode search (compiled program's output + temporaries; "
      f"largest B x capacity within {budget:g} GB):",
      "",
      "| game | A | observation stored | bytes per node | of which state | "
      "bytes per game | max B x capacity | capacity at B=1024 |",
      "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
      f"| {r['game']} | {r['num_actions']} | {'yes' if r['store_observation'] else 'no'} | "
      f"{r['bytes_per_node']} | {r['state_bytes']} | {r['bytes_per_game']} | "
      f"{r['max_nodes'] / 1e6:.3g}M | {r['max_nodes'] // 1024} |"
      for r in memory
    ]
  return lines


def _probe_window_lines(rows) -> list[str]:
  """The probe-window table."""
  lines: list[str] = []
  probe_rows = [r for r in rows if r["kind"] == "probe_window"]
  if probe_rows:
    first = probe_rows[0]
    lines += [
      "",
      f"Probe window A/B (graph mode, B={first['batch_size']}, "
      f"S={first['num_simulations']}), time relative to window "
      f"{first['probe_window']}:",
      "",
      f"| probe window | run s | time vs window {first['probe_window']} | "
      "transposition hits (mean) | dropped inserts (mean) |",
      "|---|---|---|---|---|",
    ]
    lines += [
      f"| {r['probe_window']} | {r['run_s']} | {r['time_vs_first']}x | "
      f"{r['mean_transposition_hits']} | {r['mean_dropped_inserts']} |"
      for r in probe_rows
    ]
  return lines
