// The paged decode planner: how many splits a KV range takes and how they merge, from the
// device's properties and the shape (never tuned to one shape). Constants are measurements.
#pragma once

#include <cstdint>

#include "bundle/manifest.hpp"
#include "cubinrt/runtime.hpp"
#include "families/paged_decode/paged_decode_abi.h"

namespace cubinrt::paged_decode {

// A split shorter than this costs more in merging than it gains in parallelism (measured on the
// H200: 128 tokens in 2 splits of 64 took 11.6 us a launch against 8.4 us unsplit).
inline constexpr int kMinTokensPerSplit = 256;

// Resident blocks at which a multiprocessor streams KV at its full rate: measured on the H200
// (run 13, B1 L32768 D128): the same 2048 tokens per multiprocessor took 53.0 us as 1 block,
// 43.2 us as 2 and 45.7 us as 4 (FP8: 34.8, 30.3, 33.2).
inline constexpr int64_t kSaturatingBlocks = 2;
// The same for head_dim 512, whose 4 warps walk one token range together (they split the dims):
// a block is one stream, and an SM wants twice as many. Measured on the H200 (runs 52 and 54,
// B16 L8192 32q/4kv D512, us a launch): 2 blocks an SM (4 splits) 279.4 bf16 / 212.1 FP8, 4
// blocks (8 splits) 287.0 / 178.0, 8 blocks (16 splits) 282.0 / 173.4.
inline constexpr int64_t kSaturatingBlocksDimSplit = 4;

// A split must earn its keep: the model below leaves out each split's merge and each block's
// start, which cost more than a few percent of balance. Measured on the H200: at B64 D128 the
// model gains 2.6% with 9 splits, which took 520 us against 497 unsplit (run 14); at B1 L32768
// it gains 1.6% with 33 splits over 32, which took 41.6-42.3 us a launch back to back against
// 40.9-41.7 (runs 14-16).
inline constexpr double kSplitGainToBeat = 0.05;

// Thread-block clusters: at most 8 blocks (the portable limit). Their merge costs no global round
// trip, so where the workspace would split a range, a cluster splits it finer. Measured on the
// H200 (runs 26-29, us a launch back to back, bf16 / FP8): B4 L512, the workspace's 2 splits
// 10.5 / 9.7, a cluster's 4 7.9 / 7.2; B1 L1024 4 splits 10.7 / 9.9 against a cluster's 8 6.9 /
// 6.6; B16 L1024 2 splits 25.0 / 15.8 against a cluster's 2 22.6 / 14.1. Ranges the workspace
// leaves whole stay whole: B1 L128 5.0 / 4.7 unsplit against 5.2-5.9 in clusters, and at 256
// tokens a cluster of 2 was no faster at batch 1-8 and 13% slower at 16. The one loss seen:
// B8 L4096 FP8, 4 splits, 27.5 through the workspace against 30.8 as clusters (bf16 40.7 / 40.1).
inline constexpr int64_t kMaxClusterSplits = CUBINRT_PAGED_DECODE_MAX_CLUSTER_SPLITS;
inline constexpr int64_t kMinTokensPerClusterSplit = 128;
// ... and only while a cluster's splits are short: its blocks must run at once within one GPC,
// and over long ranges they end further apart than the workspace's, which costs more than the
// merge saves. H200 run 107 (device us queued, bf16 / FP8), the same 8 splits as a cluster and
// through the workspace: B4 L32768 (4096 tokens a split) 135.2-135.5 / 74.3-74.7 against 130.3 /
// 71.2, B4 L131072 (16384) 533.8-534.2 / 279.8-280.2 against 490.2-490.8 / 254.5-255.4; traced,
// the cluster's last range ended 8 us after the workspace's (docs/kernels.md). At 1024 tokens
// (B8 L4096 above) the cluster was 1.5% ahead in bf16 and the workspace 11% in FP8; at 128 the
// cluster wins outright. So the planner merges through a cluster only where a split is at most
// this long, or where the cluster is a pair of blocks, whatever its length: two blocks end close
// enough together that their merge, cheaper than the workspace's, still pays. H100 runs 108-110
// (device us queued, bf16 / FP8, 2 splits as a cluster against the workspace): B16 L4096
// 92.5-92.6 / 51.0-51.1 against 93.9-94.3 / 52.4-52.7, B16 L8192 177.2-177.8 / 94.3-95.1 against
// 178.3-179.8 / 95.3-96.3, B64 L8192 128q/8kv FP8 (the 16-head kernel, 4096 tokens a split) 370.4
// against 385.0-387.2; 4-block clusters of 2048-token splits (B8 L8192) were 1-2% behind in bf16,
// 8-block ones of 4096 3-10% (above). A forced SplitMerge::cluster is taken as asked.
inline constexpr int64_t kMaxTokensPerClusterSplit = 512;

// The kernel is bandwidth-bound: the fewest splits whose busiest multiprocessor streams within
// kSplitGainToBeat of the least (planner.cpp says how).
// `saturating_blocks` is kSaturatingBlocks or kSaturatingBlocksDimSplit; a `blocks_per_sm` below 1
// (an occupancy the driver did not report) counts as 1.
int64_t choose_splits(int64_t blocks, int64_t pages, int64_t multiprocessors, int64_t blocks_per_sm, int64_t max_splits,
                      int64_t saturating_blocks = kSaturatingBlocks);

// Whether a cluster merge can run: the device has thread-block clusters and the kernel is code for
// sm_90 or later.
bool supports_cluster_merge(const DeviceInfo& device, const ManifestEntry& kernel);

}  // namespace cubinrt::paged_decode
