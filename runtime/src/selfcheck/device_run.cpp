// Moves a reference problem through the device: upload, plan, launch, read back.
#include <fmt/format.h>

#include "common/try.hpp"
#include "cubinrt/driver.hpp"
#include "cubinrt/selfcheck.hpp"

namespace cubinrt {

namespace {

class DeviceBuffer {
 public:
  DeviceBuffer(const DriverApi& d) : d_(d) {}
  ~DeviceBuffer() {
    if (ptr_) d_.cuMemFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  Status alloc(size_t bytes, std::string_view what) {
    return d_.check(d_.cuMemAlloc(&ptr_, std::max<size_t>(bytes, 16)), "cuMemAlloc", what);
  }
  Status upload(const void* src, size_t bytes, std::string_view what) {
    CUBINRT_TRY(alloc(bytes, what));
    return d_.check(d_.cuMemcpyHtoD(ptr_, src, bytes), "cuMemcpyHtoD", what);
  }
  void* get() const { return reinterpret_cast<void*>(ptr_); }
  CUdeviceptr ptr() const { return ptr_; }

 private:
  const DriverApi& d_;
  CUdeviceptr ptr_ = 0;
};

}  // namespace

Result<DeviceResult> run_on_device(const Runtime& runtime, const ref::Problem& p, std::optional<Dtype> declare_kv_as, int num_splits) {
  const DriverApi& d = runtime.driver();
  const DecodeShape& s0 = p.shape;
  const bool fp8 = dtype_bits(p.kv_dtype) == 8;
  DecodeShape shape = s0;
  shape.kv_storage = fp8 ? Dtype::uint8 : p.kv_dtype;
  shape.kv_declared = fp8 ? std::optional<Dtype>(declare_kv_as.value_or(p.kv_dtype)) : declare_kv_as;
  shape.num_splits = num_splits;
  const DecodePlan plan = CUBINRT_TRY(DecodePlan::create(runtime, shape));
  CUBINRT_TRY(runtime.bind_context());

  DeviceBuffer q(d), k(d), v(d), table(d), lens(d), out(d), lse(d), ws(d);
  const size_t out_elems = size_t{s0.batch} * s0.num_q_heads * s0.head_dim;
  const size_t lse_elems = size_t{s0.batch} * s0.num_q_heads;
  CUBINRT_TRY(q.upload(p.q.data(), p.q.size(), "q"));
  CUBINRT_TRY(k.upload(p.k.data(), p.k.size(), "k cache"));
  CUBINRT_TRY(v.upload(p.v.data(), p.v.size(), "v cache"));
  CUBINRT_TRY(table.upload(p.block_table.data(), p.block_table.size() * 4, "block table"));
  CUBINRT_TRY(lens.upload(p.seq_lens.data(), p.seq_lens.size() * 4, "sequence lengths"));
  // Poison the outputs (0xff.. is NaN in fp16, bf16 and fp32) so an unwritten element fails.
  CUBINRT_TRY(out.alloc(out_elems * 2, "out"));
  CUBINRT_TRY(d.check(d.cuMemsetD8(out.ptr(), 0xff, out_elems * 2), "cuMemsetD8", "out"));
  CUBINRT_TRY(lse.alloc(lse_elems * 4, "lse"));
  CUBINRT_TRY(d.check(d.cuMemsetD8(lse.ptr(), 0xff, lse_elems * 4), "cuMemsetD8", "lse"));
  if (plan.workspace_bytes()) {
    CUBINRT_TRY(ws.alloc(plan.workspace_bytes(), "workspace"));
    CUBINRT_TRY(d.check(d.cuMemsetD8(ws.ptr(), 0, plan.workspace_bytes()), "cuMemsetD8", "workspace"));
  }
  DecodeArgs a;
  a.q = q.get();
  a.kv = {k.get(), v.get(), shape.kv_storage, shape.kv_declared, p.k_scale, p.v_scale, nullptr, s0.layout, s0.page_size, s0.num_kv_heads, p.num_pages};
  a.block_table = static_cast<const int32_t*>(table.get());
  a.seq_lens = static_cast<const int32_t*>(lens.get());
  a.out = out.get();
  a.lse = static_cast<float*>(lse.get());
  a.softmax_scale = p.softmax_scale;
  a.workspace = ws.get();
  a.workspace_bytes = plan.workspace_bytes();
  CUBINRT_TRY(plan.launch(a, nullptr));
  CUBINRT_TRY(d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", fmt::format("after kernel {}", plan.kernel().entry->symbol)));
  DeviceResult r;
  r.out.resize(out_elems * 2);
  r.lse.resize(lse_elems);
  CUBINRT_TRY(d.check(d.cuMemcpyDtoH(r.out.data(), out.ptr(), r.out.size()), "cuMemcpyDtoH", "out"));
  CUBINRT_TRY(d.check(d.cuMemcpyDtoH(r.lse.data(), lse.ptr(), r.lse.size() * 4), "cuMemcpyDtoH", "lse"));
  return r;
}

}  // namespace cubinrt
