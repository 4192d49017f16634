// Runtime creation: driver, device, selection, then verify -> load -> resolve -> ABI check for
// each kernel, eagerly at init (default) or once on first use.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "bundle/bundle.hpp"
#include "bundle/verify.hpp"
#include "common/try.hpp"
#include "common/version.hpp"
#include "cubinrt/runtime.hpp"
#include "driver/context_guard.hpp"
#include "driver/driver.hpp"
#include "family/family.hpp"
#include "loader/loaded_kernel.hpp"
#include "select/select.hpp"
#include "selfcheck/known_answers.hpp"

namespace cubinrt {

namespace {

std::string uuid_text(const CUuuid& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  return fmt::format("GPU-{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}", b[0], b[1],
                     b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

std::string normalise_uuid(std::string s) {
  std::string out;
  for (char c : s)
    if (std::isxdigit(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// cuInit, then how many devices the driver sees (at least one, or Errc::no_device).
Result<int> visible_devices(const DriverApi& d) {
  const std::string who = fmt::format("CUDA driver ({})", d.origin);
  if (const CUresult r = d.cuInit(0); r != CUDA_SUCCESS) {
    if (r == CUDA_ERROR_NO_DEVICE) return fail(Errc::no_device, fmt::format("{}: no CUDA device is present ({})", who, d.describe("cuInit", r)), r);
    return std::unexpected(d.check(r, "cuInit", who).error());
  }
  int count = 0;
  CUBINRT_TRY(d.check(d.cuDeviceGetCount(&count), "cuDeviceGetCount", who));
  if (count == 0) return fail(Errc::no_device, fmt::format("{}: no CUDA device is present", who));
  return count;
}

}  // namespace

std::string DeviceInfo::str() const { return fmt::format("device {} '{}' ({})", ordinal, name, arch.str()); }

struct Runtime::Impl {
  // One cubin of the bundle on this device: the kernels of a family and arch share one (same
  // offset), so it is verified and loaded once, whichever of its kernels comes first.
  struct Library {
    std::mutex mu;
    std::optional<VerifiedCubin> verified;  // bytes dropped once loaded; the ELF facts kept
    CUlib_st* library = nullptr;
  };
  struct Slot {
    KernelKey key;
    const ManifestEntry* chosen = nullptr;
    Library* library = nullptr;
    std::mutex mu;
    std::unique_ptr<const LoadedKernel> loaded;
    std::atomic<const LoadedKernel*> ready{nullptr};  // published once loaded; read without the lock
  };

  std::shared_ptr<const DriverApi> driver;
  std::shared_ptr<const Bundle> bundle;
  DeviceInfo device;
  CUdevice cu_device = 0;
  CUcontext context = nullptr;
  std::map<KernelKey, std::unique_ptr<Slot>> slots;
  std::map<uint64_t, std::unique_ptr<Library>> libraries;  // by payload offset

  ~Impl() {
    // Teardown may run at process exit after the driver shut down: errors here are ignored.
    if (!driver) return;
    for (auto& [offset, lib] : libraries)
      if (lib->library) driver->cuLibraryUnload(lib->library);
    if (context) driver->cuDevicePrimaryCtxRelease(cu_device);
  }

  Status open_device(const RuntimeOptions& o);
  Result<LoadedKernel> load(const Slot& slot) const;
  // A failed load is not kept: the slot stays empty and the next caller tries again, so a
  // passing fault (out of memory at first use) does not disable a kernel for the process.
  Result<const LoadedKernel*> get(Slot& slot) const {
    if (const LoadedKernel* k = slot.ready.load(std::memory_order_acquire)) return k;
    std::lock_guard lock(slot.mu);
    if (slot.loaded) return slot.loaded.get();
    auto k = load(slot);
    if (!k) return std::unexpected(std::move(k).error());
    slot.loaded = std::make_unique<const LoadedKernel>(std::move(*k));
    slot.ready.store(slot.loaded.get(), std::memory_order_release);
    return slot.loaded.get();
  }
  Slot* find(const KernelKey& key) const {
    const auto it = slots.find(key);
    return it == slots.end() ? nullptr : it->second.get();
  }
  // Made only when asked for: start-up pays nothing for the keys this device cannot run.
  std::string unavailable_reason(const KernelKey& key) const {
    return explain_unavailable(bundle->manifest(), device.name, device.arch, key);
  }
};

Status Runtime::Impl::open_device(const RuntimeOptions& o) {
  const DriverApi& d = *driver;
  const std::string who = fmt::format("CUDA driver ({})", d.origin);
  const int count = CUBINRT_TRY(visible_devices(d));
  CUBINRT_TRY(d.check(d.cuDriverGetVersion(&device.driver_version), "cuDriverGetVersion", who));
  const int needed = bundle->manifest().min_driver_version;
  if (device.driver_version < needed)
    return fail(Errc::driver_too_old, fmt::format("the CUDA driver supports CUDA {} (cuDriverGetVersion {}), but bundle {} needs CUDA {} ({}): "
                                                  "install an NVIDIA driver for CUDA {} or newer",
                                                  cuda_version_text(device.driver_version), device.driver_version, bundle->name(),
                                                  cuda_version_text(needed), needed, cuda_version_text(needed)));
  std::vector<int> ordinals;
  if (!o.device_uuid.empty()) {
    for (int i = 0; i < count; ++i) ordinals.push_back(i);
  } else {
    if (o.device_ordinal < 0 || o.device_ordinal >= count)
      return fail(Errc::no_device, fmt::format("device {} was asked for, but the driver sees {} device(s) (0 to {})", o.device_ordinal, count, count - 1));
    ordinals.push_back(o.device_ordinal);
  }
  for (int i : ordinals) {
    CUdevice dev = 0;
    CUBINRT_TRY(d.check(d.cuDeviceGet(&dev, i), "cuDeviceGet", fmt::format("device {}", i)));
    CUuuid uuid{};
    CUBINRT_TRY(d.check(d.cuDeviceGetUuid(&uuid, dev), "cuDeviceGetUuid", fmt::format("device {}", i)));
    const std::string text = uuid_text(uuid);
    if (!o.device_uuid.empty() && normalise_uuid(text.substr(4)) != normalise_uuid(o.device_uuid.starts_with("GPU-") ? o.device_uuid.substr(4) : o.device_uuid))
      continue;
    cu_device = dev;
    device.ordinal = i;
    device.uuid = text;
    char name[256] = {};
    CUBINRT_TRY(d.check(d.cuDeviceGetName(name, sizeof name - 1, dev), "cuDeviceGetName", fmt::format("device {}", i)));
    device.name = name;
    int major = 0, minor = 0;
    const std::string what = fmt::format("device {} '{}'", i, device.name);
    CUBINRT_TRY(d.check(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)", what));
    CUBINRT_TRY(d.check(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)", what));
    CUBINRT_TRY(d.check(d.cuDeviceGetAttribute(&device.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)", what));
    CUBINRT_TRY(d.check(d.cuDeviceGetAttribute(&device.shared_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev), "cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)", what));
    int clusters = 0;
    CUBINRT_TRY(d.check(d.cuDeviceGetAttribute(&clusters, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, dev), "cuDeviceGetAttribute(CLUSTER_LAUNCH)", what));
    device.cluster_launch = clusters != 0;
    device.arch = Arch{static_cast<uint32_t>(major), static_cast<uint32_t>(minor), Arch::Variant::plain};
    CUBINRT_TRY(d.check(d.cuDevicePrimaryCtxRetain(&context, dev), "cuDevicePrimaryCtxRetain", device.str()));
    return {};
  }
  return fail(Errc::no_device, fmt::format("no device has UUID {} (the driver sees {} device(s))", o.device_uuid, count));
}

Result<LoadedKernel> Runtime::Impl::load(const Slot& slot) const {
  const auto t0 = std::chrono::steady_clock::now();
  const DriverApi& d = *driver;
  const ManifestEntry& e = *slot.chosen;
  const std::string what = fmt::format("{}: cubin {} kernel {}", device.str(), e.id, e.symbol);
  Library& lib = *slot.library;
  std::lock_guard lock(lib.mu);
  // Nothing reaches the driver before it is verified: sha256, ELF rules, manifest agreement, ABI.
  if (!lib.verified) {
    auto v = read_verified_cubin(*bundle, e);
    if (!v) return std::unexpected(std::move(v).error().context(device.str()));
    lib.verified = std::move(*v);
  }
  auto kernel_info = verify_kernel(*bundle, *lib.verified, e);
  if (!kernel_info) return std::unexpected(std::move(kernel_info).error().context(device.str()));
  const KernelInfo& info = **kernel_info;
  const AbiLayout* abi = CUBINRT_TRY(find_abi(e.key.family, e.abi_name, e.abi_version));
  const uint64_t shared = uint64_t{info.static_shared} + info.dynamic_shared;
  if (shared > static_cast<uint64_t>(device.shared_optin))
    return fail(Errc::unsupported, fmt::format("{}: needs {} bytes of shared memory a block ({} static, {} dynamic), the device allows {}", what,
                                               shared, info.static_shared, info.dynamic_shared, device.shared_optin));

  LoadedKernel k;
  k.entry = &e;
  k.registers = info.registers;
  k.static_shared = info.static_shared;
  k.dynamic_shared = info.dynamic_shared;
  k.waits_on_prior_grids = info.waits_on_prior_grids;
  k.block_threads = block_threads(info);
  ContextGuard scope = CUBINRT_TRY(ContextGuard::enter(d, context, what));
  if (lib.library == nullptr) {
    CUBINRT_TRY(d.check(d.cuLibraryLoadData(&lib.library, lib.verified->bytes.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
                        "cuLibraryLoadData", what));
    lib.verified->bytes = {};  // the driver has its copy; the ELF facts stay for the cubin's other kernels
  }
  k.library = lib.library;
  // cuLibraryLoadData accepts a cubin of another arch; only resolution proves it runs here. A
  // kernel that fails below leaves the library loaded for its siblings (unloaded at teardown).
  CUBINRT_TRY(d.check(d.cuLibraryGetKernel(&k.kernel, k.library, e.symbol.c_str()), "cuLibraryGetKernel", what));
  CUBINRT_TRY(d.check(d.cuKernelGetFunction(&k.function, k.kernel), "cuKernelGetFunction", what));
  CUBINRT_TRY(check_driver_abi(d, k.function, *abi, what));
  // Set even when 0: the attribute is per device, and launches beyond 48 KiB need it raised.
  const int dynamic_shared = static_cast<int>(k.dynamic_shared);
  CUBINRT_TRY(d.check(d.cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic_shared, k.kernel, cu_device),
                      "cuKernelSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", what));
  CUBINRT_TRY(d.check(d.cuOccupancyMaxActiveBlocksPerMultiprocessor(&k.blocks_per_sm, k.function, static_cast<int>(k.block_threads), dynamic_shared),
                      "cuOccupancyMaxActiveBlocksPerMultiprocessor", what));
  if (k.blocks_per_sm < 1) return fail(Errc::unsupported, fmt::format("{}: no block of {} threads fits on a multiprocessor", what, k.block_threads));
  CUBINRT_TRY(scope.leave(what));
  k.load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return k;
}

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runtime::~Runtime() = default;

Result<std::unique_ptr<Runtime>> Runtime::create(RuntimeOptions o) {
  auto impl = std::make_unique<Impl>();
  for (const KernelKey& key : o.required) CUBINRT_TRY(check_key(key));
  if (o.bundle) impl->bundle = o.bundle;
  else if (o.bundle_path) impl->bundle = std::make_shared<const Bundle>(CUBINRT_TRY(Bundle::open(*o.bundle_path)));
  else impl->bundle = std::make_shared<const Bundle>(CUBINRT_TRY(Bundle::embedded()));
  if (o.driver) impl->driver = o.driver;
  else impl->driver = CUBINRT_TRY(open_driver());
  CUBINRT_TRY(impl->driver->validate());
  CUBINRT_TRY(impl->open_device(o));

  // One slot per catalog key in the bundle, with the entry this device would run and its cubin.
  std::map<KernelKey, std::vector<const ManifestEntry*>> by_key;
  for (const ManifestEntry& e : impl->bundle->manifest().entries) by_key[e.key].push_back(&e);
  for (const auto& [k, entries] : by_key) {
    auto slot = std::make_unique<Impl::Slot>();
    slot->key = k;
    slot->chosen = best_entry(entries, impl->device.arch);
    if (slot->chosen) {
      auto& lib = impl->libraries[slot->chosen->offset];
      if (!lib) lib = std::make_unique<Impl::Library>();
      slot->library = lib.get();
    }
    impl->slots.emplace(k, std::move(slot));
  }
  const std::vector<KernelKey>& required = o.required;
  for (const KernelKey& key : required) {
    const Impl::Slot* s = impl->find(key);
    if (s == nullptr || s->chosen == nullptr) return fail(Errc::unsupported, impl->unavailable_reason(key));
  }
  if (!o.lazy) {
    // Eager: the required kernels, or every kernel this device can run when none are named.
    std::vector<Impl::Slot*> to_load;
    if (!required.empty()) {
      for (const KernelKey& key : required) to_load.push_back(impl->find(key));
    } else {
      for (auto& [k, s] : impl->slots)
        if (s->chosen) to_load.push_back(s.get());
    }
    // Each cubin is decompressed, checked and loaded once, by its first kernel here.
    for (Impl::Slot* slot : to_load) CUBINRT_TRY(impl->get(*slot));
  }
  auto rt = std::unique_ptr<Runtime>(new Runtime(std::move(impl)));
  if (o.self_check) {
    // Lazy loading has loaded nothing yet: the self-check then loads and checks the required
    // kernels, and needs some (a check of nothing would pass silently).
    std::vector<KernelKey> keys = o.lazy ? required : std::vector<KernelKey>{};
    if (!o.lazy)
      for (const LoadedKernel* k : rt->loaded()) keys.push_back(k->entry->key);
    if (keys.empty())
      return fail(Errc::invalid_argument, "self_check with lazy loading checks the required kernels, and none are required: name them, or load eagerly");
    CUBINRT_TRY(check_known_answers(*rt, keys));
  }
  return rt;
}

Result<std::vector<std::unique_ptr<Runtime>>> Runtime::create_all(RuntimeOptions o) {
  if (o.device_ordinal != 0 || !o.device_uuid.empty())
    return fail(Errc::invalid_argument, "Runtime::create_all makes a runtime for every device: leave device_ordinal and device_uuid unset");
  if (!o.bundle) {
    if (o.bundle_path) o.bundle = std::make_shared<const Bundle>(CUBINRT_TRY(Bundle::open(*o.bundle_path)));
    else o.bundle = std::make_shared<const Bundle>(CUBINRT_TRY(Bundle::embedded()));
  }
  if (!o.driver) o.driver = CUBINRT_TRY(open_driver());
  const DriverApi& d = *o.driver;
  CUBINRT_TRY(d.validate());
  const int count = CUBINRT_TRY(visible_devices(d));
  std::vector<std::unique_ptr<Runtime>> out;
  for (int i = 0; i < count; ++i) {
    o.device_ordinal = i;
    out.push_back(CUBINRT_TRY(create(o)));
  }
  return out;
}

const DeviceInfo& Runtime::device() const { return impl_->device; }
const Bundle& Runtime::bundle() const { return *impl_->bundle; }
const DriverApi& Runtime::driver() const { return *impl_->driver; }
CUcontext Runtime::context() const { return impl_->context; }

Support Runtime::supports(const KernelKey& key) const {
  if (auto ok = check_key(key); !ok) return {false, ok.error().message};
  const Impl::Slot* s = impl_->find(key);
  if (s == nullptr || s->chosen == nullptr) return {false, impl_->unavailable_reason(key)};
  return {true, fmt::format("{} runs {}", impl_->device.str(), s->chosen->id)};
}

Result<const LoadedKernel*> Runtime::kernel(const KernelKey& key) const {
  Impl::Slot* s = impl_->find(key);
  if (s == nullptr) CUBINRT_TRY(check_key(key));  // a key of the bundle is well formed already
  if (s == nullptr || s->chosen == nullptr) return fail(Errc::unsupported, impl_->unavailable_reason(key));
  return impl_->get(*s);
}

std::vector<const LoadedKernel*> Runtime::loaded() const {
  std::vector<const LoadedKernel*> out;
  for (auto& [k, s] : impl_->slots)
    if (const LoadedKernel* l = s->ready.load(std::memory_order_acquire)) out.push_back(l);
  return out;
}

const ManifestEntry* Runtime::selected(const KernelKey& key) const {
  const Impl::Slot* s = impl_->find(key);
  return s ? s->chosen : nullptr;
}

Status Runtime::bind_context() const {
  return impl_->driver->check(impl_->driver->cuCtxSetCurrent(impl_->context), "cuCtxSetCurrent", impl_->device.str());
}

std::vector<KernelKey> Runtime::available() const {
  std::vector<KernelKey> out;
  for (auto& [k, s] : impl_->slots)
    if (s->chosen) out.push_back(s->key);
  return out;
}

}  // namespace cubinrt
