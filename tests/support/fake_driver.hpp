// A test double of the CUDA driver: emulates devices of any arch and injects faults, through the
// same function table the library calls. Loaded cubins are read with the real cubin reader, and a
// kernel resolves only on a device its arch can run on, as the real driver does (error 209).
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cubin/cubin.hpp"
#include "driver/driver.hpp"

namespace cubinrt::test {

struct FakeDevice {
  std::string name;
  int major = 9, minor = 0;
  int multiprocessors = 132;
  int shared_optin = 232448;
  unsigned char uuid_tail = 0;  // last UUID byte, to tell devices apart
};

struct FakeFaults {
  CUresult init = CUDA_SUCCESS;
  int driver_version = 13000;
  CUresult load = CUDA_SUCCESS;           // returned by cuLibraryLoadData
  std::string load_only_for;              // when set, only cubins whose kernel name contains this fail
  CUresult get_kernel = CUDA_SUCCESS;     // forced result of cuLibraryGetKernel (else the arch rule)
  int param_offset_skew = 0;              // added to every parameter offset cuFuncGetParamInfo reports
  CUresult launch = CUDA_SUCCESS;
  bool record_launches = true;            // false: a launch allocates nothing here (allocation tests)
};

struct LaunchRecord {
  CUlaunchConfig config{};  // its attrs pointer is the caller's: read attrs below instead
  std::vector<CUlaunchAttribute> attrs;
  const CUlaunchAttribute* attr(CUlaunchAttributeID id) const {
    for (const CUlaunchAttribute& a : attrs)
      if (a.id == id) return &a;
    return nullptr;
  }
  std::vector<std::byte> params;  // the CU_LAUNCH_PARAM_BUFFER_POINTER bytes
  std::string kernel;
  int device = -1;  // whose context ran it: the stream's (fake_state().stream_device), else the current one
};

struct FakeState {
  std::vector<FakeDevice> devices;
  FakeFaults faults;
  std::atomic<int> loads{0};
  std::atomic<int> unloads{0};
  std::mutex mu;
  std::vector<LaunchRecord> launches;
  // Kernels the fake runs on the host: a launch of a kernel whose name starts with a key here
  // calls its function (device memory is host memory in the fake) after it is recorded.
  std::map<std::string, std::function<void(const LaunchRecord&)>> emulate;
  // Streams are handles the test makes up: one listed here belongs to that device's context;
  // any other belongs to the current context (device 0's when none is current).
  std::map<CUstream, int> stream_device;
};

// Resets the emulation and returns a driver table bound to it (one fake per process at a time).
std::shared_ptr<DriverApi> make_fake_driver(std::vector<FakeDevice> devices, FakeFaults faults = {});
FakeState& fake_state();

inline FakeDevice h200() { return {"NVIDIA H200", 9, 0, 132, 232448, 1}; }
inline FakeDevice a100() { return {"NVIDIA A100-SXM4-80GB", 8, 0, 108, 166912, 2}; }
inline FakeDevice l40s() { return {"NVIDIA L40S", 8, 9, 142, 101376, 3}; }
inline FakeDevice b200() { return {"NVIDIA B200", 10, 0, 148, 232448, 4}; }
inline FakeDevice b300() { return {"NVIDIA B300", 10, 3, 148, 232448, 5}; }
inline FakeDevice rtx5090() { return {"NVIDIA GeForce RTX 5090", 12, 0, 170, 101376, 6}; }

}  // namespace cubinrt::test
