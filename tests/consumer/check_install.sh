#!/bin/sh
# check_install.sh PREFIX CONSUMER_BUILD: the installed headers are the engine surface and nothing
# more, and the consumer's link line (from its build) carries the runtime and only what the
# runtime needs: zstd and libcrypto (and libdl); no liblz4, libfmt, CLI11 or JSON library, no libcuda.
set -eu
prefix=$1 build=$2
headers=$(cd "$prefix/include/cubinrt" && find . -type f | sort | tr '\n' ' ')
want="./dtypes.h ./error.hpp ./paged_decode.hpp ./runtime.hpp ./selfcheck.hpp ./types.hpp "
[ "$headers" = "$want" ] || { echo "installed headers: $headers (expected $want)"; exit 1; }
line=$(grep -A3 "build consumer:" "$build/build.ninja" | grep "LINK_LIBRARIES" || true)
[ -n "$line" ] || { echo "no link line found in $build/build.ninja"; exit 1; }
echo "consumer link line:$line"
for bad in lz4 fmt CLI11 cli11 json libcuda libcudart; do
  case $line in *$bad*) echo "the consumer's link line names $bad"; exit 1;; esac
done
for need in libcubinrt.a zstd crypto; do
  case $line in *$need*) ;; *) echo "the consumer's link line lacks $need"; exit 1;; esac
done
