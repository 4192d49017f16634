// Device memory held for a scope (the families' known answers): allocated through the driver
// table, freed on every path out, the free's status ignored as in any destructor.
#pragma once

#include <cstddef>
#include <string_view>
#include <utility>

#include "driver/driver.hpp"

namespace cubinrt {

class DeviceMemory {
 public:
  static Result<DeviceMemory> allocate(const DriverApi& d, size_t bytes, std::string_view what) {
    CUdeviceptr p = 0;
    if (auto s = d.check(d.cuMemAlloc(&p, bytes), "cuMemAlloc", what); !s) return std::unexpected(std::move(s).error());
    return DeviceMemory(d, p);
  }
  DeviceMemory(DeviceMemory&& o) noexcept : d_(o.d_), p_(std::exchange(o.p_, 0)) {}
  DeviceMemory& operator=(DeviceMemory&&) = delete;
  ~DeviceMemory() {
    if (p_) d_->cuMemFree(p_);
  }
  CUdeviceptr get() const { return p_; }

 private:
  DeviceMemory(const DriverApi& d, CUdeviceptr p) : d_(&d), p_(p) {}
  const DriverApi* d_;
  CUdeviceptr p_ = 0;
};

}  // namespace cubinrt
