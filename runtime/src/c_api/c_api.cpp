// The C ABI's runtime, versions, errors and self-check (cubinrt.h); decode plans are in
// c_decode.cpp.
#include <algorithm>
#include <memory>

#include "bundle/bundle.hpp"
#include "c_api/c_handles.hpp"
#include "c_api/c_status.hpp"
#include "common/try.hpp"
#include "cubinrt/selfcheck.hpp"

namespace cubinrt::c_api {

namespace {
thread_local std::string t_last_error;

cubinrt_status status_of(Errc code) {
  switch (code) {
    case Errc::invalid_argument: return CUBINRT_ERROR_INVALID_ARGUMENT;
    case Errc::io: return CUBINRT_ERROR_IO;
    case Errc::corrupt_cubin: return CUBINRT_ERROR_CORRUPT_CUBIN;
    case Errc::corrupt_fatbin: return CUBINRT_ERROR_CORRUPT_FATBIN;
    case Errc::corrupt_bundle: return CUBINRT_ERROR_CORRUPT_BUNDLE;
    case Errc::corrupt_manifest: return CUBINRT_ERROR_CORRUPT_MANIFEST;
    case Errc::mismatch: return CUBINRT_ERROR_MISMATCH;
    case Errc::not_in_bundle: return CUBINRT_ERROR_NOT_IN_BUNDLE;
    case Errc::unsupported: return CUBINRT_ERROR_UNSUPPORTED;
    case Errc::no_driver: return CUBINRT_ERROR_NO_DRIVER;
    case Errc::driver: return CUBINRT_ERROR_DRIVER;
    case Errc::driver_too_old: return CUBINRT_ERROR_DRIVER_TOO_OLD;
    case Errc::no_device: return CUBINRT_ERROR_NO_DEVICE;
  }
  return CUBINRT_ERROR_INTERNAL;
}

// The first version's sizes: a caller's struct is never smaller.
constexpr size_t kOptionsV1 = sizeof(cubinrt_runtime_options);
constexpr size_t kDeviceInfoV1 = sizeof(cubinrt_device_info);
constexpr size_t kBundleInfoV1 = sizeof(cubinrt_bundle_info);
constexpr size_t kSelfCheckV1 = sizeof(cubinrt_selfcheck_result);

}  // namespace

cubinrt_status set_error(const Error& e) { return set_error(status_of(e.code), e.message); }

cubinrt_status set_error(cubinrt_status status, std::string message) {
  try {
    t_last_error = std::move(message);
  } catch (...) {
    t_last_error.clear();  // no memory for the message: the status still says what kind of failure
  }
  return status;
}

void copy_text(char* dst, size_t capacity, std::string_view text) {
  if (dst == nullptr || capacity == 0) return;
  if (text.size() < capacity) {
    std::memcpy(dst, text.data(), text.size());
    dst[text.size()] = '\0';
    return;
  }
  const size_t keep = capacity - 1;
  std::memcpy(dst, text.data(), keep);
  for (size_t i = keep >= 3 ? keep - 3 : 0; i < keep; ++i) dst[i] = '.';
  dst[keep] = '\0';
}

Result<RuntimeOptions> runtime_options(const cubinrt_runtime_options* in) {
  const cubinrt_runtime_options o = CUBINRT_TRY(read_struct(in, "cubinrt_runtime_options", kOptionsV1));
  RuntimeOptions r;
  r.device_ordinal = o.device_ordinal;
  if (o.device_uuid) r.device_uuid = o.device_uuid;
  if (o.bundle_path) r.bundle_path = o.bundle_path;
  r.lazy = o.lazy != 0;
  r.self_check = o.self_check != 0;
  if (o.num_required_decode > 0 && o.required_decode == nullptr)
    return fail(Errc::invalid_argument, fmt::format("cubinrt_runtime_options: num_required_decode is {} but required_decode is NULL", o.num_required_decode));
  for (size_t i = 0; i < o.num_required_decode; ++i) r.required.push_back(CUBINRT_TRY(decode_key_of(o.required_decode[i])));
  return r;
}

}  // namespace cubinrt::c_api

using namespace cubinrt;
using namespace cubinrt::c_api;

extern "C" {

const char* cubinrt_version(void) { return CUBINRT_VERSION; }

uint32_t cubinrt_c_api_version(void) { return CUBINRT_C_API_VERSION; }

const char* cubinrt_status_name(cubinrt_status status) {
  switch (status) {
#define CUBINRT_STATUS_NAME_(s) case s: return #s;
    CUBINRT_STATUS_NAME_(CUBINRT_SUCCESS)
    CUBINRT_STATUS_NAME_(CUBINRT_ERROR_INVALID_ARGUMENT)
    CUBINRT_STATUS_NAME_(CUBINRT_ERROR_IO)
    CUBINRT_STATUS_NAME_(CUBINRT_ERROR_CORRUPT_CUBIN)
    CUBINRT_STATUS_NAME_(CUBINRT_ERROR_CORRUPT_FATBIN)
    CUBINRT_STATUS_NAME_(CUBINRT_ERROR_CORRUPT_BUNDLE)
    CUBINRT_STATUS_NAME_(CUBINRT_ERROR_CORRUPT_MANIFEST)
    CUBINRT_STATUS_NAME_(CUBINRT_ERROR_MISMATCH)
    CUBINRT_STATUS_NAME_(CUBINRT_ERROR_NOT_IN_BUNDLE)
    CUBINRT_STATUS_NAME_(CUBINRT_ERROR_UNSUPPORTED)
    CUBINRT_STATUS_NAME_(CUBINRT_ERROR_NO_DRIVER)
    CUBINRT_STATUS_NAME_(CUBINRT_ERROR_DRIVER)
    CUBINRT_STATUS_NAME_(CUBINRT_ERROR_DRIVER_TOO_OLD)
    CUBINRT_STATUS_NAME_(CUBINRT_ERROR_NO_DEVICE)
    CUBINRT_STATUS_NAME_(CUBINRT_ERROR_SELF_CHECK_FAILED)
    CUBINRT_STATUS_NAME_(CUBINRT_ERROR_INTERNAL)
#undef CUBINRT_STATUS_NAME_
  }
  return "CUBINRT_ERROR_UNKNOWN_STATUS";
}

const char* cubinrt_last_error(void) { return t_last_error.c_str(); }

cubinrt_status cubinrt_runtime_create(const cubinrt_runtime_options* options, cubinrt_runtime** runtime) {
  return boundary("cubinrt_runtime_create", [&]() -> Status {
    if (runtime == nullptr) return fail(Errc::invalid_argument, "cubinrt_runtime_create: the output handle pointer is NULL");
    *runtime = nullptr;
    auto made = CUBINRT_TRY(Runtime::create(CUBINRT_TRY(runtime_options(options))));
    *runtime = new cubinrt_runtime{std::move(made)};
    return {};
  });
}

void cubinrt_runtime_destroy(cubinrt_runtime* runtime) { delete runtime; }

cubinrt_status cubinrt_runtime_device(const cubinrt_runtime* runtime, cubinrt_device_info* info) {
  return boundary("cubinrt_runtime_device", [&]() -> Status {
    CUBINRT_TRY(not_null(runtime, "the runtime"));
    const DeviceInfo& d = runtime->rt->device();
    cubinrt_device_info v{};
    v.struct_size = sizeof v;
    v.ordinal = d.ordinal;
    v.sm = static_cast<int32_t>(d.arch.sm());
    v.driver_version = d.driver_version;
    v.multiprocessors = d.multiprocessors;
    copy_text(v.name, sizeof v.name, d.name);
    copy_text(v.uuid, sizeof v.uuid, d.uuid);
    return write_struct(info, v, "cubinrt_device_info", kDeviceInfoV1);
  });
}

cubinrt_status cubinrt_runtime_bundle(const cubinrt_runtime* runtime, cubinrt_bundle_info* info) {
  return boundary("cubinrt_runtime_bundle", [&]() -> Status {
    CUBINRT_TRY(not_null(runtime, "the runtime"));
    const Bundle& b = runtime->rt->bundle();
    const Manifest& m = b.manifest();
    cubinrt_bundle_info v{};
    v.struct_size = sizeof v;
    v.manifest_version = m.version;
    v.entries = static_cast<uint32_t>(m.entries.size());
    v.bytes = b.size();
    v.min_driver_version = m.min_driver_version;
    copy_text(v.generator, sizeof v.generator, m.generator);
    copy_text(v.toolkit, sizeof v.toolkit, m.toolkit);
    copy_text(v.name, sizeof v.name, b.name());
    return write_struct(info, v, "cubinrt_bundle_info", kBundleInfoV1);
  });
}

cubinrt_status cubinrt_decode_supports(const cubinrt_runtime* runtime, const cubinrt_decode_key* key, int32_t* supported, char* reason,
                                       size_t reason_size) {
  return boundary("cubinrt_decode_supports", [&]() -> Status {
    CUBINRT_TRY(not_null(runtime, "the runtime"));
    if (key == nullptr || supported == nullptr) return fail(Errc::invalid_argument, "cubinrt_decode_supports: key and supported must be non-NULL");
    const Support s = runtime->rt->supports(CUBINRT_TRY(decode_key_of(*key)));
    *supported = s.ok ? 1 : 0;
    copy_text(reason, reason_size, s.reason);
    return {};
  });
}

cubinrt_status cubinrt_decode_available(const cubinrt_runtime* runtime, cubinrt_decode_key* keys, size_t capacity, size_t* count) {
  return boundary("cubinrt_decode_available", [&]() -> Status {
    CUBINRT_TRY(not_null(runtime, "the runtime"));
    if (count == nullptr || (capacity > 0 && keys == nullptr))
      return fail(Errc::invalid_argument, "cubinrt_decode_available: count must be non-NULL, and keys too when capacity > 0");
    size_t n = 0;
    for (const KernelKey& k : runtime->rt->available()) {
      auto c = c_decode_key(k);
      if (!c) continue;  // another family's key
      if (n < capacity) keys[n] = *c;
      ++n;
    }
    *count = n;
    return {};
  });
}

cubinrt_status cubinrt_selfcheck(const cubinrt_runtime_options* options, int32_t known_answer, cubinrt_selfcheck_result* result) {
  bool failed = false;
  std::string first_failure;
  const cubinrt_status s = boundary("cubinrt_selfcheck", [&]() -> Status {
    SelfCheckOptions o;
    o.runtime = CUBINRT_TRY(runtime_options(options));
    o.known_answer = known_answer != 0;
    const SelfCheckReport report = run_selfcheck(o);
    cubinrt_selfcheck_result v{};
    v.struct_size = sizeof v;
    v.passed = report.passed ? 1 : 0;
    v.no_gpu = report.no_gpu ? 1 : 0;
    v.total_ms = report.total_ms;
    std::string text;
    for (const SelfCheckStep& step : report.steps) {
      const char* status = step.status == StepStatus::pass ? "pass" : step.status == StepStatus::fail ? "FAIL" : "skip";
      text += fmt::format("{:<4}  {:<12}  {:8.1f} ms  {}\n", status, step.name, step.ms, step.detail);
      if (step.status == StepStatus::fail && first_failure.empty()) first_failure = fmt::format("self-check step {}: {}", step.name, step.detail);
    }
    copy_text(v.report, sizeof v.report, text);
    CUBINRT_TRY(write_struct(result, v, "cubinrt_selfcheck_result", kSelfCheckV1));
    failed = !report.passed;
    return {};
  });
  if (s != CUBINRT_SUCCESS) return s;
  if (failed) return set_error(CUBINRT_ERROR_SELF_CHECK_FAILED, first_failure.empty() ? "the self-check did not pass" : first_failure);
  return CUBINRT_SUCCESS;
}

}  // extern "C"
