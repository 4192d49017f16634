// The kv_append known answer: a problem appended on the device, every cache byte compared with the
// host reference's (exactly: the kernel's float32 steps are the reference's).
#pragma once

#include <span>
#include <vector>

#include "cubinrt/runtime.hpp"
#include "families/kv_append/reference.hpp"
#include "family/family.hpp"

namespace cubinrt::kv_append {

// The cache bytes the device leaves after appending `p` to a cache filled with 0xa5.
Result<HostCache> run_on_device(const Runtime& runtime, const Problem& p);

// Cache bytes (data and block scales; NVFP4 in both V-scale orders) that the device's kernel for
// p's dtypes writes differently from the host reference, of how many compared.
struct ByteCheck {
  size_t wrong = 0, total = 0;
};
Result<ByteCheck> check_against_reference(const Runtime& runtime, Problem p);

Result<std::vector<KnownAnswer>> known_answer_tests(const Runtime& runtime, std::span<const KernelKey> keys);

}  // namespace cubinrt::kv_append
