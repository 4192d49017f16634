// The init-time self-check: proves at start-up that this driver, GPU and bundle work together,
// step by step, ending with a known-answer test of every loaded kernel.
#pragma once

#include <string>
#include <vector>

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

}  // namespace cubinrt
