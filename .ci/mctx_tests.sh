#!/usr/bin/env bash
# mctx's own public-API tests, run against mcgs_jax.
#
#   bash .ci/mctx_tests.sh PYTHON WORKDIR
#
# PYTHON: the interpreter of a venv holding mcgs_jax (the `all` extras: mctx, pytest,
# absl-py). WORKDIR: an empty directory for the download and the run.
#
# Fetches the source distribution of the mctx version installed in that venv
# (pinned: 0.0.71) with pip, takes its three test files that exercise mctx's public
# API (policies_test.py, tree_test.py with its four golden trees in test_data/,
# mctx_test.py) and changes one line of each, `import mctx`, to
# `import mcgs_jax as mctx`. Nothing else is changed: `from mctx._src import ...`
# (policies_test.py's checks of two private helpers) still imports the real mctx.
# No mctx code is committed to this repository. The other two test files of the
# sdist (qtransforms_test.py, seq_halving_test.py) import only private mctx modules
# and test nothing of mcgs_jax, so they are not run.
set -euo pipefail

PYTHON=$1
DIR=$2
MCTX_VERSION="${MCTX_VERSION:-0.0.71}"
TESTS=(policies_test.py tree_test.py mctx_test.py)

installed="$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("mctx"))')"
if [ "$installed" != "$MCTX_VERSION" ]; then
  echo "the venv holds mctx $installed; these tests are pinned to mctx $MCTX_VERSION"
  exit 1
fi

mkdir -p "$DIR/sdist"
"$PYTHON" -m pip download --no-deps --no-binary :all: --dest "$DIR/sdist" "mctx==$MCTX_VERSION"
tar -xzf "$DIR/sdist/mctx-$MCTX_VERSION.tar.gz" -C "$DIR/sdist"
src="$DIR/sdist/mctx-$MCTX_VERSION/mctx/_src/tests"

# tree_test.py opens "../mctx/_src/tests/test_data/*.json" relative to the working
# directory: the run directory is $DIR/run, the golden trees are copied to
# $DIR/mctx/_src/tests/test_data (a directory without __init__.py, never imported).
mkdir -p "$DIR/tests" "$DIR/run" "$DIR/mctx/_src/tests"
cp -r "$src/test_data" "$DIR/mctx/_src/tests/"
for name in "${TESTS[@]}"; do
  count="$(grep -c '^import mctx$' "$src/$name" || true)"
  if [ "$count" != 1 ]; then
    echo "$name: expected one line 'import mctx', found $count"
    exit 1
  fi
  sed 's/^import mctx$/import mcgs_jax as mctx/' "$src/$name" > "$DIR/tests/$name"
  echo "--- $name: the one changed line"
  diff "$src/$name" "$DIR/tests/$name" || true
done
printf '[pytest]\n' > "$DIR/pytest.ini"

cd "$DIR/run"
# The sdist's own mctx package is not on sys.path: `mctx._src` comes from the venv.
# One test is left out, a documented difference (README, "Defined behaviour at the
# edges"): test_gumbel_muzero_policy's last two asserts measure the tree *below*
# discount-0 (terminal) children, where mctx keeps expanding and mcgs_jax stops; its
# action, action weights and root visit counts are asserted before and agree.
"$PYTHON" -m pytest -c "$DIR/pytest.ini" --rootdir "$DIR" -p no:cacheprovider -p no:xdist \
  -q -k "not test_gumbel_muzero_policy or test_gumbel_muzero_policy_without_invalid_actions" \
  "${TESTS[@]/#/$DIR/tests/}"
