#!/usr/bin/env bash
# Ray for a GPU machine without a package index, small enough to travel with the working tree
# (64 MiB in all; Ray's wheel alone is 79 MB). Run here, in the repository root:
#
#   bash benchmarks/pack_ray.sh [PYTHON_VERSION]      # default 3.12, the GPU machines' Python
#
# writes .whl/ray-2.60.0-core.tar.xz (Ray without its Java jars and its libraries: rllib, serve, data,
# train, tune, llm; about 30 MB) and the wheels of the dependencies those machines lack. The ray_smoke
# and ray_scale parts of gpu_suite.sh unpack them (ensure_ray); carry .whl with the call.
set -euo pipefail
cd "$(dirname "$0")/.."
PYV=${1:-3.12}
PIP=${PIP:-.venv/bin/pip}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
get() {
  "$PIP" download -q --no-deps --only-binary=:all: --python-version "$PYV" --implementation cp \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 -d "$1" "${@:2}"
}
get "$tmp" "ray==2.60.0"
mkdir -p "$tmp/x" .whl
(cd "$tmp/x" && unzip -q "$tmp"/ray-*.whl && rm -rf ray/jars ray/rllib ray/serve ray/data ray/train ray/tune ray/llm)
tar cf - -C "$tmp/x" . | xz -6 -T0 > .whl/ray-2.60.0-core.tar.xz
# Ray's requirements missing from the GPU image (it has click, filelock, msgpack, packaging, protobuf, pyyaml, requests).
get .whl jsonschema jsonschema-specifications referencing rpds-py
ls -la .whl
