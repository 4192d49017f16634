#!/bin/sh
# check_install.sh PREFIX CONSUMER_BUILD CONSUMER_SOURCE FAKE_LIBCUDA_DIR
# What an engine gets from `cmake --install`, checked from the outside:
# - the installed headers are the engine surface and nothing more;
# - the C++ consumer's link line carries the static runtime and only what it needs (zstd and
#   libcrypto; no liblz4, libfmt, CLI11, JSON library or libcuda);
# - libcubinrt.so has its SONAME and exports cubinrt_* only (nm -D);
# - consumer_c.c builds with nothing but pkg-config's flags;
# - the C++ consumer runs (no driver here: it must say so and exit 0), and the C and C++17
#   consumers run supports/plan/launch against a stand-in libcuda.so.1 (an emulated H200).
set -eu
prefix=$1 build=$2 src=$3 fake=$4
headers=$(cd "$prefix/include/cubinrt" && find . -type f | sort | tr '\n' ' ')
want="./cubinrt.h ./dtypes.h ./error.hpp ./kv_append.hpp ./paged_decode.hpp ./runtime.hpp ./selfcheck.hpp ./types.hpp "
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

so=$(find "$prefix" -name 'libcubinrt.so.*.*' | head -n 1)
[ -n "$so" ] || { echo "no libcubinrt.so installed"; exit 1; }
libdir=$(dirname "$so")
soname=$(objdump -p "$so" | awk '/SONAME/ {print $2}')
[ "$soname" = "libcubinrt.so.1" ] || { echo "SONAME is '$soname', expected libcubinrt.so.1"; exit 1; }
exported=$(nm -D --defined-only "$so" | awk '$2 != "A" {print $3}' | sed 's/@.*//' | sort)
others=$(echo "$exported" | grep -v '^cubinrt_' || true)
[ -z "$others" ] || { echo "libcubinrt.so exports more than cubinrt_*:"; echo "$others" | head -20; exit 1; }
echo "libcubinrt.so ($soname) exports $(echo "$exported" | wc -l) symbols, all cubinrt_*"

pc="$(dirname "$(find "$prefix" -name cubinrt.pc | head -n 1)")"
flags=$(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs cubinrt)
echo "pkg-config cubinrt: $flags"
cc -std=c11 -Wall -Wextra -Werror "$src/consumer_c.c" $flags -ldl -lm -o "$build/consumer_c_pkgconfig"

"$build/consumer"
for program in consumer_c consumer_cpp17 consumer_c_pkgconfig; do
  echo "== $program"
  LD_LIBRARY_PATH="$fake:$libdir" "$build/$program"
done
