"""Why a search step on CPU costs more when the graph's tables are larger.

One step of a search reads a few rows of many `[B, N, A]` tables (one row per game).
This script times exactly that, alone: a loop of steps, each gathering the row of every
game from 12 tables `[64, N, 7]` float32, with the rows always among the first 65, so the
data read per step does not depend on `N`. Run it as it is, then pinned to one core:

  python -m benchmarks speed --part cpu_gather              # every core
  python -m benchmarks speed --part cpu_gather --one-core   # os.sched_setaffinity to one core

`--stacked` also times the same 12 tables stacked into one `[B, N, 12, 7]` table, read
once per step (`--batch-size` sets B). What it showed (benchmarks/RESULTS.md, "Scale
on CPU"): with several cores the step costs several times more once the tables pass
about 0.5 MB, and on one core it does not. The compiled program says why (`--hlo`):
XLA's CPU compiler splits every one of these gathers of a large table into parallel
tasks (`outer_dimension_partitions`), because its cost model counts the bytes of the
whole table the gather reads from, not of the rows it reads; handing a few rows to
several threads costs far more than reading them. With one core it splits nothing.

`--forms` also times two other forms of the same reads, which XLA compiles differently:
the reads inside a `lax.cond` whose predicate is traced (always true), and each row
passed through a variadic sum over its size-1 axis (from -0.0, which leaves every value
as it is), whose tuple-shaped result XLA's task assigner never splits.
"""

import argparse
import functools
import os
import time


def run(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
  parser.add_argument(
    "--capacities",
    default="65,257,513,1025,4097",
    help="comma-separated N (default 65,257,513,1025,4097)",
  )
  parser.add_argument(
    "--one-core", action="store_true", help="pin the process to one core before JAX starts (Linux)"
  )
  parser.add_argument("--steps", type=int, default=2000)
  parser.add_argument("--batch-size", type=int, default=64, help="B (default 64)")
  parser.add_argument(
    "--stacked",
    action="store_true",
    help="also time the same tables stacked into one [B, N, 12, 7] table, read once per step",
  )
  parser.add_argument(
    "--forms", action="store_true", help="also time the reads inside lax.cond and as a variadic sum"
  )
  parser.add_argument(
    "--hlo", action="store_true", help="also print how many gathers the compiler split into tasks"
  )
  args = parser.parse_args(argv)
  if args.one_core:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
  import jax
  import jax.numpy as jnp

  batch_size, used_rows, num_tables = args.batch_size, 65, 12
  print(f"cores: {len(os.sched_getaffinity(0))}, B={batch_size}, {num_tables} tables [B, N, 7]")

  def read_rows(tables, rows):
    if isinstance(tables, list):
      return sum(table[jnp.arange(batch_size), rows].sum(-1) for table in tables)
    return tables[jnp.arange(batch_size), rows].sum((-2, -1))  # one read of [B, 12, 7]

  def in_cond(tables, rows):
    # The predicate is traced, so XLA cannot fold the conditional away.
    return jax.lax.cond(rows[0] >= 0, read_rows, lambda *_: jnp.zeros(batch_size), tables, rows)

  def as_variadic_sum(tables, rows):
    gathered = [table[jnp.arange(batch_size), rows[:, None]] for table in tables]
    negative_zeros = tuple(jnp.array(-0.0, table.dtype) for table in tables)
    rows_read = jax.lax.reduce(
      tuple(gathered), negative_zeros, lambda a, b: tuple(x + y for x, y in zip(a, b)), (1,)
    )
    return sum(row.sum(-1) for row in rows_read)

  @functools.partial(jax.jit, static_argnums=0)
  def steps(read, tables, rows):
    def step(unused_index, carry):
      rows, total = carry
      gathered = read(tables, rows)
      # The next rows depend on what was read, so no step can be skipped or hoisted.
      rows = (rows * 7 + 3 + (gathered > 1e9).astype(jnp.int32)) % used_rows
      return rows, total + gathered

    return jax.lax.fori_loop(0, args.steps, step, (rows, jnp.zeros(batch_size)))

  found = []  # [N, layout, microseconds per step, gathers split into tasks]
  for capacity in (int(c) for c in args.capacities.split(",")):
    separate = [jnp.full((batch_size, capacity, 7), float(i)) for i in range(num_tables)]
    forms = {"separate": (read_rows, separate)}  # name: (how a step reads, the tables)
    if args.stacked:
      forms["stacked"] = (read_rows, jnp.stack(separate, axis=2))
    if args.forms:
      forms["in lax.cond"] = (in_cond, separate)
      forms["variadic sum"] = (as_variadic_sum, separate)
    rows = jnp.arange(batch_size) % used_rows
    for layout, (read, tables) in forms.items():
      split = ""
      if args.hlo:
        program = steps.lower(read, tables, rows).compile().as_text()
        split = sum(
          "gather" in line and "outer_dimension_partitions" in line for line in program.splitlines()
        )
        print(f"N={capacity:5d} {layout}: {split} gather operations split into parallel tasks")
      jax.block_until_ready(steps(read, tables, rows))
      start = time.perf_counter()
      for _ in range(5):
        jax.block_until_ready(steps(read, tables, rows))
      micros = (time.perf_counter() - start) / 5 / args.steps * 1e6
      print(f"N={capacity:5d} {layout}: {micros:6.2f} us per step")
      found.append([capacity, layout, round(micros, 2), split])
  return record(found, batch_size, num_tables)


def record(found, batch_size, num_tables) -> dict:
  """The printed figures as one table."""
  title = f"One step's reads of {num_tables} tables [B, N, 7], B={batch_size}"
  columns = ["N", "layout", "us per step", "gathers split into tasks (--hlo)"]
  return dict(tables=[dict(title=title, columns=columns, rows=found)], notes=[])
