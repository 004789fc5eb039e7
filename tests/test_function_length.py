"""Every function of the package (the engine in `mcgs_jax/_src`, the games, the
applications and the test helpers) fits a screen: at most 60 lines besides its
docstring (the public policies document mctx's arguments at length). A longer one
needs a comment `# Long: why` on the line before its first statement (issues 19 and
49)."""

import ast
import pathlib

import mcgs_jax

PACKAGE = pathlib.Path(mcgs_jax.__file__).resolve().parent
MOST_LINES = 60


def code_lines(function: ast.FunctionDef) -> int:
  """Lines of `function`, its decorators and signature included, its docstring not."""
  lines = function.end_lineno - function.lineno + 1
  first = function.body[0]
  value = getattr(first, "value", None)
  if (
    isinstance(first, ast.Expr) and isinstance(value, ast.Constant) and isinstance(value.value, str)
  ):
    lines -= first.end_lineno - first.lineno + 1
  return lines


def long_functions(source: str, name: str):
  """`(name:line, lines)` of every function in `source` over `MOST_LINES`, unless the
  line before its first statement holds a comment starting `# Long:`."""
  text = source.splitlines()
  found = []
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
      lines = code_lines(node)
      reason = text[node.body[0].lineno - 2].strip().startswith("# Long:")
      if lines > MOST_LINES and not reason:
        found.append((f"{name}:{node.lineno} {node.name}", lines))
  return found


def test_no_function_of_the_package_is_over_60_lines():
  paths = sorted(PACKAGE.rglob("*.py"))
  assert {"_src", "apps", "games"} <= {path.relative_to(PACKAGE).parts[0] for path in paths}
  found = [
    item
    for path in paths
    for item in long_functions(path.read_text(), str(path.relative_to(PACKAGE)))
  ]
  assert found == []


def test_a_long_function_is_found():
  body = "\n".join(f"  x{i} = {i}" for i in range(MOST_LINES))
  source = f'def f():\n  """Doc."""\n{body}\n'
  assert long_functions(source, "m.py") == [("m.py:1 f", MOST_LINES + 1)]
  assert long_functions(f"def f():\n  # Long: a table.\n{body}\n", "m.py") == []
