#include <algorithm>
#include <vector>

#include "families/paged_decode/planner.hpp"

namespace cubinrt::paged_decode {

// The kernel is bandwidth-bound, so a launch lasts as long as its busiest multiprocessor takes to
// stream its pages: (blocks it gets) x (pages a split), slower while it holds fewer blocks than
// saturate it. Picks the fewest splits whose cost is within kSplitGainToBeat of the least. At
// batch 1, 32K tokens, 8 kv heads: 32 splits, 2 blocks on 124 multiprocessors (where "fill whole
// waves" chose 59 in run 13: 4 blocks on 76 of them, 3 on the rest, 16% slower); at batch 64 the
// blocks already cover the GPU: no split.
int64_t choose_splits(int64_t blocks, int64_t pages, int64_t multiprocessors, int64_t blocks_per_sm, int64_t max_splits,
                      int64_t saturating_blocks) {
  const int64_t saturating = std::min(saturating_blocks, blocks_per_sm);
  struct Option {
    int64_t splits;  // what s asked-for splits come to, once pages are divided evenly
    double cost;
  };
  auto option = [&](int64_t s) {
    const int64_t per_split = (pages + s - 1) / s;
    const int64_t splits = (pages + per_split - 1) / per_split;
    const int64_t per_sm = (blocks * splits + multiprocessors - 1) / multiprocessors;
    const double rate = double(std::min(per_sm, saturating)) / double(saturating);
    return Option{splits, double(per_sm * per_split) / rate};
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
