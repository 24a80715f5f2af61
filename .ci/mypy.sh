#!/usr/bin/env bash
# mypy --strict on operators/ and state/. They install as interlace.operators / interlace.state
# (a package-dir mapping mypy cannot follow), so lint a tree of symlinks laid out as installed.
set -euo pipefail
cd "$(dirname "$0")/.."
mypy_bin=${MYPY:-mypy}
case "$mypy_bin" in */*) mypy_bin=$(realpath "$mypy_bin") ;; esac
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/interlace"
for f in interlace/*.py interlace/py.typed; do ln -s "$PWD/$f" "$tree/interlace/"; done
ln -s "$PWD/interlace/testing" "$tree/interlace/testing"
ln -s "$PWD/interlace/pipeline" "$tree/interlace/pipeline"
ln -s "$PWD/interlace/connectors" "$tree/interlace/connectors"
ln -s "$PWD/operators" "$tree/interlace/operators"
ln -s "$PWD/state" "$tree/interlace/state"
cd "$tree"
"$mypy_bin" --strict --ignore-missing-imports --follow-imports=silent -p interlace.operators -p interlace.state
