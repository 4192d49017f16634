// run_selfcheck: driver -> bundle -> static checks -> device -> load -> ABI -> known answers.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "bundle/bundle.hpp"
#include "bundle/verify.hpp"
#include "common/try.hpp"
#include "common/version.hpp"
#include "cubinrt/selfcheck.hpp"
#include "driver/driver.hpp"
#include "family/family.hpp"
#include "loader/loaded_kernel.hpp"
#include "selfcheck/known_answers.hpp"

namespace cubinrt {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

}  // namespace

SelfCheckReport run_selfcheck(const SelfCheckOptions& o) {
  SelfCheckReport rep;
  const auto t_all = Clock::now();
  auto step = [&](std::string name, StepStatus st, std::string detail, Clock::time_point t0) {
    rep.steps.push_back({std::move(name), st, std::move(detail), ms_since(t0)});
    return st != StepStatus::fail;
  };
  auto finish = [&](bool passed) {
    rep.passed = passed;
    rep.total_ms = ms_since(t_all);
    return rep;
  };

  // 1. The bundle, whose minimum driver the driver step needs.
  auto t = Clock::now();
  std::shared_ptr<const Bundle> bundle = o.runtime.bundle;
  if (!bundle) {
    auto b = o.runtime.bundle_path ? Bundle::open(*o.runtime.bundle_path) : Bundle::embedded();
    if (!b) return step("bundle", StepStatus::fail, b.error().message, t), finish(false);
    bundle = std::make_shared<const Bundle>(std::move(*b));
  }
  step("bundle", StepStatus::pass, fmt::format("{}: {} entries, manifest sha256 checked", bundle->name(), bundle->manifest().entries.size()), t);

  // 2. The driver and its version.
  t = Clock::now();
  std::shared_ptr<const DriverApi> driver = o.runtime.driver;
  std::string no_gpu_reason;
  int driver_version = 0;
  if (!driver) {
    auto d = open_driver();
    if (d) driver = *d;
    else no_gpu_reason = d.error().message;
  }
  if (driver) {
    if (const CUresult r = driver->cuInit(0); r != CUDA_SUCCESS) no_gpu_reason = driver->describe("cuInit", r);
    else if (const CUresult r2 = driver->cuDriverGetVersion(&driver_version); r2 != CUDA_SUCCESS) {
      return step("driver", StepStatus::fail, driver->describe("cuDriverGetVersion", r2), t), finish(false);
    }
  }
  rep.no_gpu = !no_gpu_reason.empty();
  const int needed = bundle->manifest().min_driver_version;
  if (rep.no_gpu) {
    step("driver", StepStatus::skipped, fmt::format("no GPU: {}", no_gpu_reason), t);
  } else if (driver_version < needed) {
    return step("driver", StepStatus::fail,
                fmt::format("driver supports CUDA {}, the bundle needs CUDA {}: install an NVIDIA driver for CUDA {} or newer",
                            cuda_version_text(driver_version), cuda_version_text(needed), cuda_version_text(needed)), t),
           finish(false);
  } else {
    step("driver", StepStatus::pass, fmt::format("{}: CUDA {} (bundle needs {})", driver->origin, cuda_version_text(driver_version),
                                                 cuda_version_text(needed)), t);
  }

  // 3. The device, and which cubins it selects (without a GPU: every cubin is checked).
  t = Clock::now();
  std::unique_ptr<Runtime> runtime;
  if (!rep.no_gpu) {
    RuntimeOptions ro = o.runtime;
    ro.bundle = bundle;
    ro.driver = driver;
    ro.lazy = true;
    auto created = Runtime::create(std::move(ro));
    if (!created) return step("device", StepStatus::fail, created.error().message, t), finish(false);
    runtime = std::move(*created);
    const auto keys = runtime->available();
    step("device", StepStatus::pass, fmt::format("{}, {} SMs: runs {} of the bundle's kernels", runtime->device().str(),
                                                 runtime->device().multiprocessors, keys.size()), t);
  } else {
    step("device", StepStatus::skipped, "no GPU", t);
  }

  // 4. Static: sha256, decompression, ELF rules, manifest vs cubin, ABI layout.
  t = Clock::now();
  std::vector<std::string> failures;
  std::vector<const ManifestEntry*> to_check;
  if (runtime) {
    for (const KernelKey& key : runtime->available()) to_check.push_back(runtime->selected(key));
  } else {
    for (const ManifestEntry& e : bundle->manifest().entries) to_check.push_back(&e);
  }
  const size_t checked = to_check.size();
  for (const VerifyFailure& f : verify_entries(*bundle, to_check)) failures.push_back(f.message);
  if (!failures.empty())
    return step("static", StepStatus::fail, fmt::format("{} of {} kernels failed; first: {}", failures.size(), checked, failures.front()), t), finish(false);
  step("static", StepStatus::pass, fmt::format("{} {} kernels: sha256, zstd, ELF, manifest vs cubin, ABI layout", checked,
                                               runtime ? "selected" : "(all)"), t);
  if (!runtime) {
    step("load", StepStatus::skipped, "no GPU", Clock::now());
    step("abi", StepStatus::skipped, "no GPU", Clock::now());
    if (o.known_answer) step("known-answer", StepStatus::skipped, "no GPU", Clock::now());
    return finish(false);
  }

  // 5. Load and force per-device resolution of every selected kernel.
  t = Clock::now();
  std::vector<std::pair<KernelKey, const LoadedKernel*>> loaded;
  for (const KernelKey& key : runtime->available()) {
    auto k = runtime->kernel(key);
    if (!k) return step("load", StepStatus::fail, k.error().message, t), finish(false);
    loaded.emplace_back(key, *k);
  }
  step("load", StepStatus::pass, fmt::format("{} kernels loaded with cuLibraryLoadData and resolved on the device", loaded.size()), t);

  // 6. The parameter ABI as the driver sees it, field by field.
  t = Clock::now();
  for (const auto& [key, k] : loaded) {
    auto abi = find_abi(k->entry->key.family, k->entry->abi_name, k->entry->abi_version);
    if (!abi) return step("abi", StepStatus::fail, abi.error().message, t), finish(false);
    if (auto ok = check_driver_abi(runtime->driver(), k->function, **abi, k->entry->symbol); !ok)
      return step("abi", StepStatus::fail, ok.error().message, t), finish(false);
  }
  step("abi", StepStatus::pass, fmt::format("{} kernels: every parameter's offset and size from cuFuncGetParamInfo match the ABI", loaded.size()), t);

  // 7. Known answers.
  if (!o.known_answer) return finish(true);
  t = Clock::now();
  std::vector<KernelKey> keys;
  for (const auto& [key, k] : loaded) keys.push_back(key);
  auto worst = check_known_answers(*runtime, keys);
  if (!worst) return step("known-answer", StepStatus::fail, worst.error().message, t), finish(false);
  step("known-answer", StepStatus::pass, fmt::format("{} kernels matched the float64 reference; worst error {:.2f} of its tolerance", loaded.size(), *worst), t);
  return finish(true);
}

}  // namespace cubinrt
