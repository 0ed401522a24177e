#!/usr/bin/env bash
# Checks that minidl works from a user's own CMake project: installs the build BUILD_DIR into a temporary
# prefix, configures and builds tests/consumer against it with find_package(minidl), and runs the program.
#   bash scripts/check-consumer.sh BUILD_DIR        # install BUILD_DIR, then check
#   bash scripts/check-consumer.sh --prefix DIR     # check an existing install (e.g. /usr from the .deb)
set -euo pipefail
usage() { echo "usage: $0 BUILD_DIR | --prefix DIR" >&2; exit 2; }
[ $# -ge 1 ] || usage
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/minidl-consumer.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [ "$1" = "--prefix" ]; then
  [ $# -eq 2 ] || usage
  prefix=$(cd "$2" && pwd)
else
  [ $# -eq 1 ] && [ -f "$1/CMakeCache.txt" ] || { echo "$0: '$1' is not a configured build directory" >&2; usage; }
  prefix=$work/prefix
  cmake --install "$1" --prefix "$prefix" > "$work/install.log" || { cat "$work/install.log" >&2; exit 1; }
  # The installed tool (built with the examples) must run from the prefix, without the build tree.
  if [ -e "$prefix/bin/minidl" ]; then "$prefix/bin/minidl" --version; fi
fi
echo "=== consumer against $prefix"
cmake -S "$root/tests/consumer" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  > "$work/configure.log" || { cat "$work/configure.log" >&2; exit 1; }
found=$(sed -n 's/^minidl_DIR:PATH=//p' "$work/build/CMakeCache.txt")
case "$found" in
  "$prefix"/*) ;;
  *) echo "$0: find_package(minidl) found '$found', not the package under $prefix" >&2; exit 1 ;;
esac
cmake --build "$work/build" -j "$(nproc)" > "$work/build.log" || { cat "$work/build.log" >&2; exit 1; }
"$work/build/consumer"
