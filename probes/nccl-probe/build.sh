#!/usr/bin/env bash
# Builds nccl-probe:  build.sh OUT_BINARY
#   NVCC        compiler (default: nvcc on PATH)
#   CUDA_ARCHS  SM numbers, space or comma separated (default "75 80 86 89 90 100 120");
#               SASS for each, plus PTX for the highest so newer GPUs can JIT it
#   NCCL_HOME   directory with include/nccl.h and lib/ (or lib64/) libnccl.so*; when unset, the
#               nvidia-nccl-cu13 python wheel ($PYTHON, default python3), then /usr/include
# The binary gets an rpath to the NCCL library directory it was linked against.
set -euo pipefail

out=${1:-}
if [ -z "$out" ] || [ $# -ne 1 ]; then
  echo "usage: build.sh OUT_BINARY" >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NVCC=${NVCC:-nvcc}
PYTHON=${PYTHON:-python3}
CUDA_ARCHS=${CUDA_ARCHS:-"75 80 86 89 90 100 120"}

inc="" libdir=""
if [ -n "${NCCL_HOME:-}" ]; then
  inc=$NCCL_HOME/include
  for d in "$NCCL_HOME/lib" "$NCCL_HOME/lib64"; do
    if compgen -G "$d/libnccl.so*" >/dev/null; then libdir=$d; break; fi
  done
  src="NCCL_HOME=$NCCL_HOME"
else
  # The wheel ships nvidia/nccl as a namespace package (no __file__), so use __path__.
  wheel=$("$PYTHON" -c 'import os, nvidia.nccl as m; f = getattr(m, "__file__", None); print(os.path.dirname(f) if f else list(m.__path__)[0])' 2>/dev/null || true)
  if [ -n "$wheel" ] && [ -f "$wheel/include/nccl.h" ]; then
    inc=$wheel/include
    libdir=$wheel/lib
    src="python wheel at $wheel"
  elif [ -f /usr/include/nccl.h ]; then
    inc=/usr/include
    multiarch=$(gcc -print-multiarch 2>/dev/null || true)
    for d in ${multiarch:+/usr/lib/$multiarch} /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib/sbsa-linux-gnu /usr/lib64 /usr/lib; do
      if compgen -G "$d/libnccl.so*" >/dev/null; then libdir=$d; break; fi
    done
    src="/usr/include"
  fi
fi
if [ -z "$inc" ] || [ ! -f "$inc/nccl.h" ]; then
  echo "build.sh: nccl.h not found (set NCCL_HOME, install nvidia-nccl-cu13 for $PYTHON, or libnccl-dev)" >&2
  exit 1
fi
if [ -z "$libdir" ] || ! compgen -G "$libdir/libnccl.so*" >/dev/null; then
  echo "build.sh: libnccl.so not found next to $inc (looked in '${libdir:-nothing}')" >&2
  exit 1
fi
if [ -e "$libdir/libnccl.so" ]; then
  lnccl=-lnccl
else
  lnccl=-l:libnccl.so.2   # the wheel carries only the soname
fi

gencode=()
archs_text=""
max=0
for a in ${CUDA_ARCHS//,/ }; do
  gencode+=(-gencode "arch=compute_$a,code=sm_$a")
  archs_text+="sm_$a "
  if [ "$a" -gt "$max" ]; then max=$a; fi
done
if [ "$max" -eq 0 ]; then
  echo "build.sh: CUDA_ARCHS is empty" >&2
  exit 1
fi
gencode+=(-gencode "arch=compute_$max,code=compute_$max")
archs_text+="compute_$max"

# json.h is shared with the other probes: in probes/common in a checkout and in the image build,
# next to nccl_probe.cu when the sources are shipped flat (zero-registry ConfigMap).
includes=(-I "$here")
if [ -d "$here/../common" ]; then includes+=(-I "$here/../common"); fi

mkdir -p "$(dirname "$out")"
echo "build.sh: NCCL from $src (include $inc, lib $libdir); archs: $archs_text" >&2
"$NVCC" -std=c++17 -O2 "${gencode[@]}" \
  -DPROBE_ARCHS="\"$archs_text\"" \
  -Xcompiler -Wall,-Wextra,-pthread \
  "${includes[@]}" -I"$inc" -o "$out" "$here/nccl_probe.cu" \
  -L"$libdir" "$lnccl" -Xlinker -rpath -Xlinker "$libdir" -lpthread
