// The init-time self-check: proves at start-up that this driver, GPU and bundle work together,
// step by step, ending with a known-answer test of every loaded kernel.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cubinrt/reference.hpp"
#include "cubinrt/runtime.hpp"

namespace cubinrt {

enum class StepStatus { pass, fail, skipped };

struct SelfCheckStep {
  std::string name;    // "driver", "bundle", "static", "device", "load", "abi", "known-answer"
  StepStatus status = StepStatus::pass;
  std::string detail;  // what was checked, or what failed and what to do
  double ms = 0;
};

struct SelfCheckOptions {
  RuntimeOptions runtime;     // bundle, driver and device, as for Runtime::create (lazy is forced)
  bool known_answer = true;   // false: only the static and load steps (the fast start-up mode)
};

struct SelfCheckReport {
  std::vector<SelfCheckStep> steps;
  bool no_gpu = false;   // no driver or device: the static steps ran, the GPU steps were skipped
  bool passed = false;   // every step that ran passed (and, with a GPU, every step ran)
  double total_ms = 0;
};

SelfCheckReport run_selfcheck(const SelfCheckOptions& options);

// The result of one kernel on a problem, read back from the device.
struct DeviceResult {
  std::vector<uint8_t> out;  // q encoding
  std::vector<float> lse;
};

// Uploads the problem, launches the kernel for it through a DecodePlan, and reads the result
// back. `declare_kv_as` overrides the KV dtype declared to the dispatcher (the data stays as made).
Result<DeviceResult> run_on_device(const Runtime& runtime, const ref::Problem& problem,
                                   std::optional<Dtype> declare_kv_as = std::nullopt, int num_splits = 0,
                                   SplitMerge merge = SplitMerge::choose);
// The same for many problems at once: one allocation, one copy each way, one synchronisation.
Result<std::vector<DeviceResult>> run_on_device(const Runtime& runtime, const std::vector<const ref::Problem*>& problems,
                                                std::optional<Dtype> declare_kv_as = std::nullopt, int num_splits = 0,
                                                SplitMerge merge = SplitMerge::choose);

struct KnownAnswer {
  double error = 0;      // relative L2 of the output against the float64 reference
  double lse_error = 0;
  double tolerance = 0;
  bool passed() const { return error <= tolerance && lse_error <= tolerance; }
};

// The known-answer test of one kernel: a small fixed pseudo-random problem (ragged lengths,
// GQA, a split KV range), compared with the reference decoded as `reference_kv_as` (default:
// the key's own KV dtype; another encoding makes a test that must fail).
Result<KnownAnswer> known_answer_test(const Runtime& runtime, const KernelKey& key,
                                      std::optional<Dtype> reference_kv_as = std::nullopt);
// Every key's known-answer test in one batch; the error names the first kernel that failed, its
// error and its tolerance. The value is the worst error as a fraction of its tolerance.
Result<double> check_known_answers(const Runtime& runtime, const std::vector<KernelKey>& keys);
// Every key's known-answer test in one batch (the self-check's path).
Result<std::vector<KnownAnswer>> known_answer_tests(const Runtime& runtime, const std::vector<KernelKey>& keys,
                                                    std::optional<Dtype> reference_kv_as = std::nullopt);

}  // namespace cubinrt
