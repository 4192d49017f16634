// The runtime for one device: created at engine start-up, it picks, verifies, loads and resolves
// every kernel the engine needs, so the request path never meets a missing or wrong kernel.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cubinrt/error.hpp"
#include "cubinrt/types.hpp"

struct CUctx_st;  // cuda.h's CUcontext, for Runtime::context()

namespace cubinrt {

// Declared for the internal accessors below; engines never need their definitions.
class Bundle;
struct DriverApi;
struct LoadedKernel;
struct ManifestEntry;

struct RuntimeOptions {
  int device_ordinal = 0;
  std::string device_uuid;                         // "GPU-xxxxxxxx-..." or bare hex; wins over the ordinal
  std::optional<std::filesystem::path> bundle_path;  // default: the embedded bundle
  std::shared_ptr<const Bundle> bundle;            // a bundle already opened (wins over bundle_path)
  // Init fails unless each of these can run here. Each family makes its keys (paged_decode.hpp:
  // DecodeRequirements{...}.keys()).
  std::vector<KernelKey> required;
  bool lazy = false;                               // load on first use instead of at init
  std::shared_ptr<const DriverApi> driver;         // default: libcuda.so.1
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

struct Support {
  bool ok = false;
  std::string reason;  // why not, in one sentence; for ok, which entry serves it
  explicit operator bool() const { return ok; }
};

class Runtime {
 public:
  static Result<std::unique_ptr<Runtime>> create(RuntimeOptions options);
  // One runtime for each device the driver sees (CUDA_VISIBLE_DEVICES applies), in ordinal order,
  // sharing one driver table and one bundle (opened and decompressed once); each has its own
  // context, kernels and attributes. options.device_ordinal and device_uuid must be left unset.
  // Fails on the first device that fails, naming it.
  static Result<std::vector<std::unique_ptr<Runtime>>> create_all(RuntimeOptions options);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const DeviceInfo& device() const;
  // Whether `key` can run on this device with this bundle, and why not. Never loads.
  Support supports(const KernelKey& key) const;
  // Keys this device can run (one per catalog key with a compatible cubin).
  std::vector<KernelKey> available() const;
  // Makes the device's primary context current on the calling thread (engines that use the CUDA
  // runtime API already have it current; cubinrt's tools and tests call this).
  Status bind_context() const;

  // For the families' plans and for tools (their types are internal):
  const Bundle& bundle() const;
  const DriverApi& driver() const;
  CUctx_st* context() const;  // the device's primary context, which the kernels are loaded in
  // The loaded kernel for `key`; loads it on first use (lazy mode), safely from many threads. A
  // failed load is not remembered: the next call tries again (and fails with its own cause).
  Result<const LoadedKernel*> kernel(const KernelKey& key) const;
  std::vector<const LoadedKernel*> loaded() const;   // every kernel loaded so far
  const ManifestEntry* selected(const KernelKey& key) const;  // the entry this device runs, or null

 private:
  struct Impl;
  explicit Runtime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cubinrt
