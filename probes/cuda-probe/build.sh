#!/usr/bin/env bash
# Builds the cuda-probe: build.sh OUT_BINARY
#
# The one build script, used by the Dockerfile, by tests/test_cuda_probe.py and by the in-pod
# compile mode. Environment:
#   NVCC              the compiler (default: nvcc)
#   CUDA_ARCHS        SASS targets, e.g. "80 90" or "80;90" (default: those of 75 80 86 89 90 100 120
#                     that `$NVCC --list-gpu-arch` supports); PTX is added for the highest one
#   GPUCONF_JIT_ARCH  the PTX-only target of jit_kernel.cu (default 75, or the lowest the compiler
#                     supports when it has no compute_75)
# Prints nothing but OUT_BINARY on success (compiler warnings, if any, go to stderr); on failure
# prints the compiler's message on stderr and exits non-zero.
set -euo pipefail

usage() { echo "usage: build.sh OUT_BINARY" >&2; exit 2; }
[ "$#" -eq 1 ] && [ -n "$1" ] || usage
out=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
nvcc=${NVCC:-nvcc}

if ! command -v "$nvcc" >/dev/null 2>&1; then
  echo "build.sh: compiler '$nvcc' not found (set NVCC)" >&2
  exit 127
fi

# Which virtual architectures this compiler knows: "compute_75" ... -> "75 80 ...".
supported=$("$nvcc" --list-gpu-arch 2>/dev/null | sed -n 's/^compute_\([0-9][0-9]*\)$/\1/p' | sort -n | uniq)
if [ -z "$supported" ]; then
  echo "build.sh: '$nvcc --list-gpu-arch' listed no architectures" >&2
  exit 1
fi
has_arch() { printf '%s\n' $supported | grep -qx "$1"; }

if [ -n "${CUDA_ARCHS:-}" ]; then
  archs=$(printf '%s' "$CUDA_ARCHS" | tr ',;' '  ')
  for a in $archs; do
    if ! printf '%s' "$a" | grep -Eq '^[0-9]+[af]?$'; then
      echo "build.sh: bad entry '$a' in CUDA_ARCHS (want numbers like 80 or 90a)" >&2
      exit 2
    fi
  done
else
  archs=""
  for a in 75 80 86 89 90 100 120; do
    if has_arch "$a"; then archs="$archs $a"; fi
  done
  if [ -z "$archs" ]; then
    echo "build.sh: $nvcc supports none of 75 80 86 89 90 100 120; set CUDA_ARCHS" >&2
    exit 1
  fi
fi

gencode=()
names=()
ptx=""
for a in $archs; do
  gencode+=("-gencode" "arch=compute_${a},code=sm_${a}")
  names+=("sm_${a}")
  case $a in
    *[af]) ;;
    *) if [ -z "$ptx" ] || [ "$a" -gt "$ptx" ]; then ptx=$a; fi ;;
  esac
done
if [ -n "$ptx" ]; then
  gencode+=("-gencode" "arch=compute_${ptx},code=compute_${ptx}")
  names+=("compute_${ptx}")
fi

jit=${GPUCONF_JIT_ARCH:-}
if [ -z "$jit" ]; then
  if has_arch 75; then jit=75; else jit=$(printf '%s\n' $supported | head -n1); fi
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cuda-probe-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/gpuconf_build_info.h" <<EOF
#define GPUCONF_ARCHS "${names[*]}"
#define GPUCONF_PTX_TARGET "compute_${jit}"
EOF

# json.h is shared with the other probes: in probes/common in a checkout and in the image build,
# next to probe.cu when the sources are shipped flat (zero-registry ConfigMap).
includes=(-I "$here")
if [ -d "$here/../common" ]; then includes+=(-I "$here/../common"); fi

common=(-std=c++17 -O2 -Xcompiler -Wall,-Wextra "${includes[@]}" -I "$tmp" -DGPUCONF_HAVE_BUILD_INFO)
log=$tmp/log

run() {
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    echo "build.sh: failed: $*" >&2
    exit 1
  fi
  cat "$log" >&2
}

run "$nvcc" "${common[@]}" "${gencode[@]}" -c "$here/probe.cu" -o "$tmp/probe.o"
# PTX only: the driver has to JIT this kernel (222 when the driver is older than the PTX ISA).
run "$nvcc" "${common[@]}" -gencode "arch=compute_${jit},code=compute_${jit}" -c "$here/jit_kernel.cu" -o "$tmp/jit_kernel.o"
mkdir -p "$(dirname "$out")"
run "$nvcc" -cudart static -o "$out" "$tmp/probe.o" "$tmp/jit_kernel.o" -ldl -lpthread
echo "$out"
