// The runtime for one device: created at engine start-up, it picks, verifies, loads and resolves
// every kernel the engine needs, so the request path never meets a missing or wrong kernel.
#pragma once

#include <array>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cubinrt/bundle.hpp"
#include "cubinrt/error.hpp"
#include "cubinrt/types.hpp"

struct CUfunc_st;
struct CUlib_st;
struct CUkern_st;

namespace cubinrt {

struct DriverApi;

// The kernels an engine needs: the cross product of the listed values.
struct Requirements {
  std::vector<uint32_t> head_dims;
  std::vector<Dtype> q_dtypes;
  std::vector<Dtype> kv_dtypes;
  std::vector<uint32_t> page_sizes;
  std::vector<KernelKey> keys() const;
};

struct RuntimeOptions {
  int device_ordinal = 0;
  std::string device_uuid;                         // "GPU-xxxxxxxx-..." or bare hex; wins over the ordinal
  std::optional<std::filesystem::path> bundle_path;  // default: the embedded bundle
  std::shared_ptr<const Bundle> bundle;            // a bundle already opened (wins over bundle_path)
  Requirements required;                           // init fails unless each of these can run here
  bool lazy = false;                               // load on first use instead of at init
  std::shared_ptr<const DriverApi> driver;         // default: libcuda.so.1 through open_driver()
  bool self_check = false;  // after eager loading, a known-answer test of every loaded kernel (selfcheck.hpp)
};

struct DeviceInfo {
  int ordinal = 0;
  std::string name;       // "NVIDIA H200"
  std::string uuid;       // "GPU-..."
  Arch arch;              // compute capability as an arch (variant plain)
  int driver_version = 0; // cuDriverGetVersion: 13000 = CUDA 13.0
  int multiprocessors = 0;
  int shared_optin = 0;   // bytes of shared memory a block may opt in to
  bool cluster_launch = false;  // thread-block clusters (compute capability 9.0 and later)
  std::string str() const;  // "device 0 'NVIDIA H200' (sm_90)"
};

struct LoadedKernel {
  const ManifestEntry* entry = nullptr;
  CUlib_st* library = nullptr;
  CUkern_st* kernel = nullptr;
  CUfunc_st* function = nullptr;  // resolved for this device's context
  uint32_t registers = 0;
  uint32_t static_shared = 0;
  uint32_t dynamic_shared = 0;    // passed by every launch (the kernel's own statement, verified)
  uint32_t block_threads = 0;     // every launch's block size: the kernel's launch bound (verified)
  int blocks_per_sm = 0;          // occupancy at the kernel's block size
  double load_ms = 0;             // verify + load + resolve + ABI check
};

struct Support {
  bool ok = false;
  std::string reason;  // why not, in one sentence; for ok, which entry serves it
  explicit operator bool() const { return ok; }
};

class Runtime {
 public:
  static Result<std::unique_ptr<Runtime>> create(RuntimeOptions options);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const DeviceInfo& device() const;
  const Bundle& bundle() const;
  const DriverApi& driver() const;

  // Whether `key` can run on this device with this bundle, and why not. Never loads.
  Support supports(const KernelKey& key) const;
  // The loaded kernel for `key`; loads it on first use (lazy mode), safely from many threads.
  Result<const LoadedKernel*> kernel(const KernelKey& key) const;
  // Every kernel loaded so far.
  std::vector<const LoadedKernel*> loaded() const;
  // The entry this device runs for `key` (null when none can).
  const ManifestEntry* selected(const KernelKey& key) const;
  // Makes the device's primary context current on the calling thread (engines that use the CUDA
  // runtime API already have it current; cubinrt's tools and tests call this).
  Status bind_context() const;
  // Keys this device can run (one per catalog key with a compatible cubin).
  std::vector<KernelKey> available() const;

  struct Impl;

 private:
  explicit Runtime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cubinrt
