#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "bundle/manifest.hpp"
#include "common/try.hpp"
#include "driver/context_guard.hpp"
#include "selfcheck/known_answers.hpp"

namespace cubinrt {

Result<std::vector<KnownAnswer>> known_answer_tests(const Runtime& runtime, std::span<const KernelKey> keys) {
  // Each family's keys in one batch (a family may run them all in one device round).
  std::map<std::string, std::vector<size_t>> by_family;
  for (size_t i = 0; i < keys.size(); ++i) by_family[keys[i].family].push_back(i);
  std::vector<KnownAnswer> answers(keys.size());
  // Families make the device's context current to run their kernels; the caller's comes back.
  const DriverApi& d = runtime.driver();
  const std::string what = fmt::format("{}: known answers", runtime.device().str());
  ContextGuard context = CUBINRT_TRY(ContextGuard::save(d, what));
  for (const auto& [name, indices] : by_family) {
    const Family* family = find_family(name);
    if (family == nullptr) return fail(Errc::unsupported, fmt::format("kernel family '{}' is unknown to this build of cubinrt", name));
    std::vector<KernelKey> batch;
    for (size_t i : indices) batch.push_back(keys[i]);
    const auto results = CUBINRT_TRY(family->known_answers(runtime, batch));
    if (results.size() != batch.size())
      return fail(Errc::mismatch, fmt::format("family {} answered {} known answers for {} kernels", name, results.size(), batch.size()));
    for (size_t j = 0; j < indices.size(); ++j) answers[indices[j]] = results[j];
  }
  CUBINRT_TRY(context.leave(what));
  return answers;
}

Result<double> check_known_answers(const Runtime& runtime, std::span<const KernelKey> keys) {
  const auto answers = CUBINRT_TRY(known_answer_tests(runtime, keys));
  double worst = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    const KnownAnswer& r = answers[i];
    const ManifestEntry* e = runtime.selected(keys[i]);
    if (!r.passed())
      return fail(Errc::mismatch, fmt::format("known-answer test of kernel {} ({}) on {}: relative error {:.3g} ({}) exceeds the "
                                              "tolerance {:.3g}; this kernel computes wrong results here: do not serve it, and "
                                              "report this line",
                                              e ? e->symbol : "?", e ? e->id : keys[i].str(), runtime.device().str(), r.error, r.detail,
                                              r.tolerance));
    // An exact family (tolerance 0, bit-for-bit) that passed has used none of it.
    worst = std::max(worst, r.tolerance > 0 ? r.error / r.tolerance : 0.0);
  }
  return worst;
}

}  // namespace cubinrt
