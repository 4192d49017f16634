#include <dlfcn.h>

#include <fmt/format.h>

#include "common/version.hpp"
#include "driver/driver.hpp"

namespace cubinrt {

namespace {

// The API version asked of cuGetProcAddress: 12.4 has every entry point above
// (cuFuncGetParamInfo is the newest), and asking for it gets their current ABI (the _v2 forms).
constexpr int kDriverApiVersion = 12040;

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

struct Handle {
  void* h;
  ~Handle() {
    if (h) dlclose(h);
  }
};

}  // namespace

std::string DriverApi::describe(std::string_view call, CUresult status) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName == nullptr || cuGetErrorName(status, &name) != CUDA_SUCCESS) name = nullptr;
  if (cuGetErrorString == nullptr || cuGetErrorString(status, &text) != CUDA_SUCCESS) text = nullptr;
  return fmt::format("{} failed: {} ({})", call, name ? name : fmt::format("CUresult {}", static_cast<int>(status)),
                     text ? text : "no description");
}

Status DriverApi::validate() const {
  std::string missing;
#define CUBINRT_MISSING_(name) \
  if (name == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(#name);
  CUBINRT_DRIVER_FUNCTIONS(CUBINRT_MISSING_)
#undef CUBINRT_MISSING_
  if (missing.empty()) return {};
  return fail(Errc::no_driver, fmt::format("the driver table ({}) lacks {}", origin, missing));
}

Status DriverApi::check(CUresult status, std::string_view call, std::string_view what) const {
  if (status == CUDA_SUCCESS) return {};
  return fail(Errc::driver, fmt::format("{}: {}", what, describe(call, status)), static_cast<int>(status));
}

Result<std::shared_ptr<const DriverApi>> open_driver(const char* library) {
  void* h = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* why = dlerror();
    return fail(Errc::no_driver, fmt::format("no CUDA driver: cannot open {} ({}); install the NVIDIA driver or run on a machine with a GPU",
                                             library, why ? why : "unknown reason"));
  }
  Handle guard{h};
  auto get = reinterpret_cast<GetProcAddress>(dlsym(h, "cuGetProcAddress_v2"));
  if (get == nullptr)
    return fail(Errc::no_driver, fmt::format("{} has no cuGetProcAddress_v2: the driver is older than CUDA 12.0", library));
  auto api = std::make_shared<DriverApi>();
  api->origin = library;
#define CUBINRT_RESOLVE_(name)                                                                               \
  {                                                                                                          \
    void* fn = nullptr;                                                                                      \
    CUdriverProcAddressQueryResult found{};                                                                  \
    const CUresult r = get(#name, &fn, kDriverApiVersion, CU_GET_PROC_ADDRESS_DEFAULT, &found);              \
    if (r != CUDA_SUCCESS || fn == nullptr || found != CU_GET_PROC_ADDRESS_SUCCESS)                          \
      return fail(Errc::no_driver, fmt::format("{}: entry point {} (CUDA {} API) is missing (status {}, {})", library, #name, \
                                               cuda_version_text(kDriverApiVersion), static_cast<int>(r), \
                                               found == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? "driver too old" : "not found")); \
    api->name = reinterpret_cast<decltype(api->name)>(fn);                                                   \
  }
  CUBINRT_DRIVER_FUNCTIONS(CUBINRT_RESOLVE_)
#undef CUBINRT_RESOLVE_
#define CUBINRT_RESOLVE_OPTIONAL_(name)                                                               \
  {                                                                                                   \
    void* fn = nullptr;                                                                               \
    CUdriverProcAddressQueryResult found{};                                                           \
    if (get(#name, &fn, kDriverApiVersion, CU_GET_PROC_ADDRESS_DEFAULT, &found) == CUDA_SUCCESS &&    \
        found == CU_GET_PROC_ADDRESS_SUCCESS)                                                         \
      api->name = reinterpret_cast<decltype(api->name)>(fn);                                          \
  }
  CUBINRT_DRIVER_OPTIONAL_FUNCTIONS(CUBINRT_RESOLVE_OPTIONAL_)
#undef CUBINRT_RESOLVE_OPTIONAL_
  api->handle = h;
  guard.h = nullptr;  // the table keeps the library open for the life of the process
  return std::shared_ptr<const DriverApi>(std::move(api));
}

}  // namespace cubinrt
