#!/usr/bin/env bash
# Builds a kvlab for GPU boxes that cannot build it themselves, into
# build-gpu-prebuilt/: kvlab and test_cuda for sm_80, sm_89 and sm_90 plus
# compute_90 PTX, the CUDA runtime linked statically, cJSON, xxHash and
# uthash from third_party/ (compiled in), no ncurses app, lib/ with the
# shared libraries the binaries still need that a bare box may lack
# (cmocka), and BUILT-WITH: the CUDA version, which check.sh checks the
# driver against.
# tests/gpu/check.sh uses it when it finds no toolkit. See tests/gpu/README.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/build-gpu-prebuilt"
bdir="$root/build-gpu-prebuild"
nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
[ -x "$nvcc" ] || { echo "prebuild.sh: no nvcc at $nvcc (set CUDACXX)"; exit 1; }
cmake -S "$root" -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DKVLAB_TUI=OFF -DKVLAB_CUDA=ON -DKVLAB_BUNDLED_DEPS=ON \
  -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="80-real;89-real;90-real;90-virtual" >/dev/null
cmake --build "$bdir" -j"${JOBS:-2}" --target kvlab test_cuda
rm -rf "$out"
mkdir -p "$out/lib"
cp "$bdir/kvlab" "$bdir/tests/test_cuda" "$out/"
# Every shared library outside glibc, libstdc++ and libgcc: what a bare box may lack.
for b in "$out/kvlab" "$out/test_cuda"; do
  ldd "$b" | awk '$3 ~ /^\// { print $3 }' | while read -r l; do
    case "$(basename "$l")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
      *) cp -L "$l" "$out/lib/" ;;
    esac
  done
done
"$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/built with CUDA \1 (needs a driver for CUDA \1 or newer)/p' >"$out/BUILT-WITH"
echo "prebuilt kvlab in $out ($(du -sh "$out" | cut -f1)):"
ls -l "$out" "$out/lib"
cat "$out/BUILT-WITH"
