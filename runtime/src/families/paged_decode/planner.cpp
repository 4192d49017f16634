#include <algorithm>
#include <vector>

#include "families/paged_decode/planner.hpp"

namespace cubinrt::paged_decode {

// The kernel is bandwidth-bound, so a launch lasts as long as its busiest multiprocessor takes to
// stream its pages. It holds at most blocks_per_sm blocks at once, so its blocks run in rounds of
// that many (blocks of one launch are alike and start together), and a round of n blocks streams
// n splits' pages at full rate if n saturates the SM, otherwise as slowly as `saturating` blocks
// would: a round costs max(n, saturating) splits. Picks the fewest splits whose cost is within
// kSplitGainToBeat of the least. At batch 1, 32K tokens, 8 kv heads: 32 splits, 2 blocks on 124
// multiprocessors (where "fill whole waves" chose 59 in run 13: 4 blocks on 76 of them, 3 on the
// rest, 16% slower); at batch 64 the blocks already cover the GPU: no split, unless a kernel that
// holds 3 blocks an SM would leave each SM a fourth to stream alone (512 blocks on 132 SMs): then
// 2 splits, 8 blocks an SM in rounds of 3, 3 and 2 (H200 run 84, B64 L8192 16q/8kv D256 FP8:
// 605.9 us unsplit, 508.4 in 2 splits merged through the workspace).
int64_t choose_splits(int64_t blocks, int64_t pages, int64_t multiprocessors, int64_t blocks_per_sm, int64_t max_splits,
                      int64_t saturating_blocks) {
  const int64_t resident = std::max<int64_t>(1, blocks_per_sm);
  const int64_t saturating = std::min(saturating_blocks, resident);
  struct Option {
    int64_t splits;  // what s asked-for splits come to, once pages are divided evenly
    double cost;
  };
  auto option = [&](int64_t s) {
    const int64_t per_split = (pages + s - 1) / s;
    const int64_t splits = (pages + per_split - 1) / per_split;
    const int64_t per_sm = (blocks * splits + multiprocessors - 1) / multiprocessors;
    const int64_t full_rounds = per_sm / resident, last_round = per_sm % resident;
    // A full round saturates the SM (saturating never exceeds resident).
    const int64_t streamed = full_rounds * resident + (last_round ? std::max(last_round, saturating) : 0);
    return Option{splits, double(streamed * per_split)};
  };
  std::vector<Option> options;
  for (int64_t s = 1; s <= max_splits; ++s) options.push_back(option(s));
  double least = options.front().cost;
  for (const Option& o : options) least = std::min(least, o.cost);
  for (const Option& o : options)
    if (o.cost <= least * (1 + kSplitGainToBeat)) return o.splits;
  return 1;
}

bool supports_cluster_merge(const DeviceInfo& device, const ManifestEntry& kernel) { return device.cluster_launch && kernel.arch.major >= 9; }

}  // namespace cubinrt::paged_decode
