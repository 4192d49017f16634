// Known answers of loaded kernels of any family, through each family's own test.
#pragma once

#include <span>
#include <vector>

#include "cubinrt/runtime.hpp"
#include "family/family.hpp"

namespace cubinrt {

// Every key's known-answer test (keys of any families, each loaded on the runtime's device), in
// the order of `keys`.
Result<std::vector<KnownAnswer>> known_answer_tests(const Runtime& runtime, std::span<const KernelKey> keys);
// The same, as a verdict: the error names the first kernel that failed, its error and its
// tolerance. The value is the worst error as a fraction of its tolerance.
Result<double> check_known_answers(const Runtime& runtime, std::span<const KernelKey> keys);

}  // namespace cubinrt
