// Runtime creation: driver, device, selection, then verify -> load -> resolve -> ABI check for
// each kernel, eagerly at init (default) or once on first use.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "common/try.hpp"
#include "cubinrt/abi.hpp"
#include "cubinrt/driver.hpp"
#include "cubinrt/runtime.hpp"
#include "cubinrt/select.hpp"
#include "cubinrt/selfcheck.hpp"
#include "cubinrt/verify.hpp"

namespace cubinrt {

namespace {

using KeyTuple = std::tuple<std::string, uint32_t, Dtype, Dtype, uint32_t>;
KeyTuple tuple_of(const KernelKey& k) { return {k.family, k.head_dim, k.q_dtype, k.kv_dtype, k.page_size}; }

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

// Restores the calling thread's context when a load had to make the device's current.
class ScopedContext {
 public:
  ScopedContext(const DriverApi& d, CUcontext ctx) : d_(d) {
    if (d_.cuCtxGetCurrent(&saved_) != CUDA_SUCCESS) saved_ = nullptr;
    if (saved_ != ctx) d_.cuCtxSetCurrent(ctx), switched_ = true;
  }
  ~ScopedContext() {
    if (switched_) d_.cuCtxSetCurrent(saved_);
  }

 private:
  const DriverApi& d_;
  CUcontext saved_ = nullptr;
  bool switched_ = false;
};

}  // namespace

std::vector<KernelKey> Requirements::keys() const {
  std::vector<KernelKey> out;
  for (uint32_t hd : head_dims)
    for (Dtype q : q_dtypes)
      for (Dtype kv : kv_dtypes)
        for (uint32_t ps : page_sizes) out.push_back({"paged_decode", hd, q, kv, ps});
  return out;
}

std::string DeviceInfo::str() const { return fmt::format("device {} '{}' ({})", ordinal, name, arch.str()); }

struct Runtime::Impl {
  struct Slot {
    KernelKey key;
    const ManifestEntry* chosen = nullptr;
    std::once_flag once;
    std::optional<Result<LoadedKernel>> loaded;
    std::atomic<bool> done{false};  // loaded is set and may be read without the once_flag
  };

  std::shared_ptr<const DriverApi> driver;
  std::shared_ptr<const Bundle> bundle;
  DeviceInfo device;
  CUdevice cu_device = 0;
  CUcontext context = nullptr;
  std::map<KeyTuple, std::unique_ptr<Slot>> slots;

  ~Impl() {
    // Teardown may run at process exit after the driver shut down: errors here are ignored.
    if (!driver) return;
    for (auto& [k, slot] : slots)
      if (slot->loaded && *slot->loaded && (**slot->loaded).library) driver->cuLibraryUnload((**slot->loaded).library);
    if (context) driver->cuDevicePrimaryCtxRelease(cu_device);
  }

  Status open_device(const RuntimeOptions& o);
  // `verified`: the entry's cubin already verified (eager init verifies in parallel), else null.
  Result<LoadedKernel> load(const Slot& slot, Result<VerifiedCubin>* verified) const;
  Result<const LoadedKernel*> get(Slot& slot, Result<VerifiedCubin>* verified = nullptr) const {
    std::call_once(slot.once, [&] {
      slot.loaded = load(slot, verified);
      slot.done.store(true, std::memory_order_release);
    });
    if (!*slot.loaded) return std::unexpected(slot.loaded->error());
    return &**slot.loaded;
  }
  Slot* find(const KernelKey& key) const {
    const auto it = slots.find(tuple_of(key));
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
  if (const CUresult r = d.cuInit(0); r != CUDA_SUCCESS) {
    if (r == CUDA_ERROR_NO_DEVICE) return fail(Errc::no_device, fmt::format("{}: no CUDA device is present ({})", who, d.describe("cuInit", r)), r);
    return d.check(r, "cuInit", who);
  }
  CUBINRT_TRY(d.check(d.cuDriverGetVersion(&device.driver_version), "cuDriverGetVersion", who));
  const int needed = bundle->manifest().min_driver_version;
  if (device.driver_version < needed)
    return fail(Errc::driver_too_old, fmt::format("the CUDA driver supports CUDA {} (cuDriverGetVersion {}), but bundle {} needs CUDA {} ({}): "
                                                  "install an NVIDIA driver for CUDA {} or newer",
                                                  cuda_version_text(device.driver_version), device.driver_version, bundle->name(),
                                                  cuda_version_text(needed), needed, cuda_version_text(needed)));
  int count = 0;
  CUBINRT_TRY(d.check(d.cuDeviceGetCount(&count), "cuDeviceGetCount", who));
  if (count == 0) return fail(Errc::no_device, fmt::format("{}: no CUDA device is present", who));

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

Result<LoadedKernel> Runtime::Impl::load(const Slot& slot, Result<VerifiedCubin>* pre) const {
  const auto t0 = std::chrono::steady_clock::now();
  const DriverApi& d = *driver;
  const ManifestEntry& e = *slot.chosen;
  const std::string what = fmt::format("{}: cubin {} kernel {}", device.str(), e.id, e.symbol);
  // Nothing reaches the driver before it is verified: sha256, ELF rules, manifest agreement, ABI.
  Result<VerifiedCubin> own = pre ? Result<VerifiedCubin>(std::unexpected(Error{})) : verify_entry(*bundle, e);
  Result<VerifiedCubin>& verified = pre ? *pre : own;
  if (!verified) return std::unexpected(std::move(verified).error().context(device.str()));
  const AbiLayout* abi = CUBINRT_TRY(find_abi(e.abi_name, e.abi_version));
  const uint64_t shared = uint64_t{verified->kernel->static_shared} + verified->kernel->dynamic_shared;
  if (shared > static_cast<uint64_t>(device.shared_optin))
    return fail(Errc::unsupported, fmt::format("{}: needs {} bytes of shared memory a block ({} static, {} dynamic), the device allows {}", what,
                                               shared, verified->kernel->static_shared, verified->kernel->dynamic_shared, device.shared_optin));

  LoadedKernel k;
  k.entry = &e;
  k.registers = verified->kernel->registers;
  k.static_shared = verified->kernel->static_shared;
  k.dynamic_shared = verified->kernel->dynamic_shared;
  k.block_threads = block_threads(*verified->kernel);
  ScopedContext scope(d, context);
  CUBINRT_TRY(d.check(d.cuLibraryLoadData(&k.library, verified->bytes.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cuLibraryLoadData", what));
  auto unload_on_error = [&](Error err) {
    d.cuLibraryUnload(k.library);
    return std::unexpected(std::move(err));
  };
  // cuLibraryLoadData accepts a cubin of another arch; only resolution proves it runs here.
  if (auto s = d.check(d.cuLibraryGetKernel(&k.kernel, k.library, e.symbol.c_str()), "cuLibraryGetKernel", what); !s) return unload_on_error(s.error());
  if (auto s = d.check(d.cuKernelGetFunction(&k.function, k.kernel), "cuKernelGetFunction", what); !s) return unload_on_error(s.error());

  if (auto s = check_driver_abi(d, k.function, *abi, what); !s) return unload_on_error(s.error());
  // Set even when 0: the attribute is per device, and launches beyond 48 KiB need it raised.
  const int dynamic_shared = static_cast<int>(k.dynamic_shared);
  if (auto s = d.check(d.cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic_shared, k.kernel, cu_device),
                       "cuKernelSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", what); !s)
    return unload_on_error(s.error());
  if (auto s = d.check(d.cuOccupancyMaxActiveBlocksPerMultiprocessor(&k.blocks_per_sm, k.function, static_cast<int>(k.block_threads), dynamic_shared),
                       "cuOccupancyMaxActiveBlocksPerMultiprocessor", what); !s)
    return unload_on_error(s.error());
  if (k.blocks_per_sm < 1)
    return unload_on_error(Error{Errc::unsupported, fmt::format("{}: no block of {} threads fits on a multiprocessor", what, k.block_threads)});
  k.load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return k;
}

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runtime::~Runtime() = default;

Result<std::unique_ptr<Runtime>> Runtime::create(RuntimeOptions o) {
  auto impl = std::make_unique<Impl>();
  if (o.bundle) impl->bundle = o.bundle;
  else if (o.bundle_path) impl->bundle = std::make_shared<const Bundle>(CUBINRT_TRY(Bundle::open(*o.bundle_path)));
  else impl->bundle = std::make_shared<const Bundle>(CUBINRT_TRY(Bundle::embedded()));
  if (o.driver) impl->driver = o.driver;
  else impl->driver = CUBINRT_TRY(open_driver());
  CUBINRT_TRY(impl->driver->validate());
  CUBINRT_TRY(impl->open_device(o));

  // One slot per catalog key in the bundle, with the entry this device would run.
  std::map<KeyTuple, std::vector<const ManifestEntry*>> by_key;
  for (const ManifestEntry& e : impl->bundle->manifest().entries) by_key[tuple_of(e.key)].push_back(&e);
  for (const auto& [k, entries] : by_key) {
    auto slot = std::make_unique<Impl::Slot>();
    slot->key = entries.front()->key;
    slot->chosen = best_entry(entries, impl->device.arch);
    impl->slots.emplace(k, std::move(slot));
  }
  const std::vector<KernelKey> required = o.required.keys();
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
    // Verification (decompression, sha256, ELF, ABI) is CPU work: spread it over threads; the
    // driver calls that follow stay in this thread, in bundle order.
    std::vector<Result<VerifiedCubin>> verified(to_load.size(), std::unexpected(Error{}));
    const size_t workers = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16);
    {
      std::atomic<size_t> next{0};
      std::vector<std::jthread> pool;
      for (size_t w = 0; w < std::min(workers, to_load.size()); ++w)
        pool.emplace_back([&] {
          for (size_t i; (i = next.fetch_add(1)) < to_load.size();) verified[i] = verify_entry(*impl->bundle, *to_load[i]->chosen);
        });
    }
    for (size_t i = 0; i < to_load.size(); ++i) CUBINRT_TRY(impl->get(*to_load[i], &verified[i]));
  }
  auto rt = std::unique_ptr<Runtime>(new Runtime(std::move(impl)));
  if (o.self_check) {
    std::vector<KernelKey> keys;
    for (const LoadedKernel* k : rt->loaded()) keys.push_back(k->entry->key);
    CUBINRT_TRY(check_known_answers(*rt, keys));
  }
  return rt;
}

const DeviceInfo& Runtime::device() const { return impl_->device; }
const Bundle& Runtime::bundle() const { return *impl_->bundle; }
const DriverApi& Runtime::driver() const { return *impl_->driver; }

Support Runtime::supports(const KernelKey& key) const {
  const Impl::Slot* s = impl_->find(key);
  if (s == nullptr || s->chosen == nullptr) return {false, impl_->unavailable_reason(key)};
  return {true, fmt::format("{} runs {}", impl_->device.str(), s->chosen->id)};
}

Result<const LoadedKernel*> Runtime::kernel(const KernelKey& key) const {
  Impl::Slot* s = impl_->find(key);
  if (s == nullptr || s->chosen == nullptr) return fail(Errc::unsupported, impl_->unavailable_reason(key));
  return impl_->get(*s);
}

std::vector<const LoadedKernel*> Runtime::loaded() const {
  std::vector<const LoadedKernel*> out;
  for (auto& [k, s] : impl_->slots)
    if (s->done.load(std::memory_order_acquire) && *s->loaded) out.push_back(&**s->loaded);
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
