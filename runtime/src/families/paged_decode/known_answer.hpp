// The paged decode family's known answer, and the device round trip the GPU tests share.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "cubinrt/paged_decode.hpp"
#include "families/paged_decode/reference.hpp"
#include "family/family.hpp"

namespace cubinrt::paged_decode {

// The result of one kernel on a problem, read back from the device.
struct DeviceResult {
  std::vector<uint8_t> out;  // q encoding
  std::vector<float> lse;
  const ManifestEntry* kernel = nullptr;  // the plan's kernel (its arena's strides are the contiguous ones)
};

// The shape run_on_device plans a problem of `kv_dtype` with: FP8 and NVFP4 in uint8 storage,
// declared `declare_kv_as` or their own dtype, the split count and merge given.
DecodeShape launch_shape(const DecodeShape& problem_shape, Dtype kv_dtype, std::optional<Dtype> declare_kv_as = std::nullopt,
                         int num_splits = 0, SplitMerge merge = SplitMerge::choose);

// Uploads the problems (one allocation, one copy each way, one synchronisation), launches each
// through a DecodePlan and reads the results back. `declare_kv_as` overrides the KV dtype declared
// to the dispatcher (the data stays as made).
Result<std::vector<DeviceResult>> run_on_device(const Runtime& runtime, const std::vector<const ref::Problem*>& problems,
                                                std::optional<Dtype> declare_kv_as = std::nullopt, int num_splits = 0,
                                                SplitMerge merge = SplitMerge::choose);
Result<DeviceResult> run_on_device(const Runtime& runtime, const ref::Problem& problem, std::optional<Dtype> declare_kv_as = std::nullopt,
                                   int num_splits = 0, SplitMerge merge = SplitMerge::choose);

// The known-answer test of each key: a small fixed pseudo-random problem (ragged lengths, GQA, a
// split KV range, both merges where clusters exist), compared with the reference decoded as
// `reference_kv_as` (default: the key's own KV dtype; another encoding makes a test that must fail).
Result<std::vector<KnownAnswer>> known_answer_tests(const Runtime& runtime, std::span<const KernelKey> keys,
                                                    std::optional<Dtype> reference_kv_as = std::nullopt);

}  // namespace cubinrt::paged_decode
