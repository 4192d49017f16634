// The calling thread's CUDA context, switched for a scope and put back.
#pragma once

#include <string_view>
#include <utility>

#include "common/try.hpp"
#include "driver/driver.hpp"

namespace cubinrt {

// Makes a context current for a while (a load) and puts the caller's back, or only keeps the
// caller's to put back (save: work that may switch, such as a family's known answer). Every
// switch is checked; the destructor restores (unchecked) only on a path that already returns an
// error.
class ContextGuard {
 public:
  static Result<ContextGuard> save(const DriverApi& d, std::string_view what) {
    ContextGuard g(d);
    CUBINRT_TRY(d.check(d.cuCtxGetCurrent(&g.saved_), "cuCtxGetCurrent", what));
    g.switched_ = true;
    return g;
  }
  // A guard that switched nothing (a launch on an explicit stream, which carries its context).
  static ContextGuard none(const DriverApi& d) { return ContextGuard(d); }
  static Result<ContextGuard> enter(const DriverApi& d, CUcontext ctx, std::string_view what) {
    ContextGuard g(d);
    CUBINRT_TRY(d.check(d.cuCtxGetCurrent(&g.saved_), "cuCtxGetCurrent", what));
    if (g.saved_ != ctx) {
      CUBINRT_TRY(d.check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent", what));
      g.switched_ = true;
    }
    return g;
  }
  ContextGuard(ContextGuard&& o) noexcept : d_(o.d_), saved_(o.saved_), switched_(std::exchange(o.switched_, false)) {}
  Status leave(std::string_view what) {
    if (!std::exchange(switched_, false)) return {};
    return d_.check(d_.cuCtxSetCurrent(saved_), "cuCtxSetCurrent (restoring the caller's context)", what);
  }
  ~ContextGuard() {
    if (switched_) d_.cuCtxSetCurrent(saved_);
  }

 private:
  explicit ContextGuard(const DriverApi& d) : d_(d) {}
  const DriverApi& d_;
  CUcontext saved_ = nullptr;
  bool switched_ = false;
};

}  // namespace cubinrt
