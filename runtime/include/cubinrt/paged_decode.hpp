// The paged decode attention dispatcher. The KV cache's logical dtype is always declared: uint8
// storage is FP8 or NVFP4 only when the engine says which, never by inference. A plan resolves the
// kernel and the launch shape once; launching it is a parameter fill plus cuLaunchKernelEx (no
// allocation, no host synchronisation, capturable in a CUDA graph).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "cubinrt/error.hpp"
#include "cubinrt/runtime.hpp"
#include "cubinrt/types.hpp"

struct CUstream_st;

namespace cubinrt {

enum class KvLayout : uint8_t {
  nhd,  // [num_pages, page_size, num_kv_heads, head_dim]  (vLLM, FlashInfer "NHD")
  hnd,  // [num_pages, num_kv_heads, page_size, head_dim]  (FlashInfer "HND", TensorRT-LLM)
};

// The order of NVFP4's V block scales within each page and kv head (docs/formats.md). K's are
// always linear.
//   linear        token t's row holds its head_dim / 16 scales in dim order: FlashInfer's, vLLM's
//                 below SM100, and what kv_append writes unless told otherwise.
//   interleaved4  TensorRT-LLM's order for its SM100 kernels, which vLLM also writes on SM10x:
//                 a page's rows of one kv head, read as one array of page_size * head_dim / 16
//                 bytes (row after row, each row through the strides), hold the scale of block s
//                 of token t at (t / 4) * 4 * (head_dim / 16) + 4 * s + t % 4, so each block's
//                 scales of 4 consecutive tokens sit side by side. Needs a page size that is a
//                 multiple of 4 and a head_dim that is a multiple of 64 (as vLLM and FlashInfer do).
enum class ScaleOrder : uint8_t { linear, interleaved4 };

// Strides are in elements, as in DLPack and torch (the innermost, head_dim, stride is always 1).
// A tensor whose strides are all zero takes its contiguous layout. A dimension of extent 1 may
// have any stride (it is never stepped over).
struct RowStrides {  // q, out: [batch, heads, head_dim]; lse: [batch, heads]
  int64_t batch = 0;
  int64_t head = 0;
};
struct KvStrides {  // one of K and V: (page, token within the page, kv head)
  int64_t page = 0;
  int64_t token = 0;
  int64_t head = 0;
};

// The KV cache: K and V are two views with the same strides (the kernels address both from one
// offset). vLLM's one-tensor cache [num_blocks, 2, block_size, num_kv_heads, head_size] is
// k = cache[:, 0], v = cache[:, 1]: NHD with a page stride of 2 * block_size * heads * head_size.
struct KvCacheDesc {
  const void* k = nullptr;
  const void* v = nullptr;
  Dtype storage = Dtype::bf16;            // what the buffer's elements are: fp16, bf16 or uint8
  std::optional<Dtype> declared;          // the logical KV dtype; required for uint8 storage
  float k_scale = 1.f;                    // per-layer scales: FP8's dequantisation scale, NVFP4's global one
  float v_scale = 1.f;
  const void* k_sf = nullptr;             // NVFP4: K's e4m3 block scales, one a 16 elements (docs/formats.md)
  KvLayout layout = KvLayout::nhd;       // the dims' order when the strides are left zero
  uint32_t page_size = 0;
  uint32_t num_kv_heads = 0;
  int64_t num_pages = 0;                  // pages in each view: block table entries are below this
  KvStrides k_strides;                    // zero: contiguous in `layout`
  KvStrides v_strides;                    // zero: contiguous in `layout`; else equal to k_strides
  // NVFP4: V's block scales, and both scale tensors' strides in bytes ([pages, page_size,
  // num_kv_heads, head_dim / 16] or its HND order when zero; rows aligned to their size, up to 16).
  // kv_append writes them, the decode reads them: value = e2m1 x e4m3 block scale x k_scale (or
  // v_scale). For NVFP4 the K and V strides above count bytes (a row is head_dim / 2 of them).
  const void* v_sf = nullptr;
  KvStrides sf_strides;
  ScaleOrder v_sf_order = ScaleOrder::linear;  // NVFP4: how V's scales are ordered (K's are linear)
};

// How the blocks of a split KV range combine their parts. workspace: the last split to finish
// merges them through the plan's workspace (any GPU, any number of splits). cluster: the splits
// of a (sequence, head chunk) run as one thread-block cluster and merge through distributed
// shared memory, with no workspace and no global round trip (compute capability 9.0 and
// later, 2 to 8 splits, kernels built for sm_90 or later). choose takes a cluster only for splits
// of at most 512 tokens, or a pair of any length: over longer ranges a larger cluster's blocks end
// further apart than the workspace's.
enum class SplitMerge : uint8_t { choose, workspace, cluster };

// What stays fixed across calls of one shape: the plan is made from this.
struct DecodeShape {
  uint32_t batch = 0;
  uint32_t num_q_heads = 0;
  uint32_t num_kv_heads = 0;
  uint32_t head_dim = 0;
  Dtype q_dtype = Dtype::bf16;
  Dtype kv_storage = Dtype::bf16;
  std::optional<Dtype> kv_declared;
  uint32_t page_size = 0;
  KvLayout layout = KvLayout::nhd;
  uint32_t block_table_stride = 0;  // pages per block-table row (the longest sequence's capacity)
  uint32_t max_seq_len = 0;         // 0: block_table_stride * page_size
  int num_splits = 0;               // 0: chosen from the device; else forced (tests, benchmarks)
  SplitMerge merge = SplitMerge::choose;  // choose: the plan's pick (workspace when num_splits is forced)
  LaunchOverlap overlap = LaunchOverlap::allow;  // with the kernel before it on the stream (types.hpp)
  // NVFP4: the order of V's block scales, which picks the kernels (interleaved4's are built for the
  // SM100 family, where TensorRT-LLM's and vLLM's writers interleave them); the launch's
  // KvCacheDesc::v_sf_order must be the same.
  ScaleOrder v_sf_order = ScaleOrder::linear;
};

// Alignment the kernels' vector accesses need (checked at launch, naming the tensor and stride):
// q, K and V start 16-byte aligned and their strides are whole 16 bytes; out starts 8-byte aligned
// with strides of whole 8 bytes; lse is 4-byte aligned. No view may overlap itself.
struct DecodeArgs {
  const void* q = nullptr;              // [batch, num_q_heads, head_dim], q dtype
  RowStrides q_strides;                 // e.g. a view of a fused QKV projection: {(Hq + 2 Hkv) D, D}
  KvCacheDesc kv;
  const int32_t* block_table = nullptr; // [batch, block_table_stride]
  const int32_t* seq_lens = nullptr;    // [batch], each <= block_table_stride * page_size
  void* out = nullptr;                  // [batch, num_q_heads, head_dim], q dtype
  RowStrides out_strides;
  float* lse = nullptr;                 // [batch, num_q_heads], optional
  RowStrides lse_strides;
  float softmax_scale = 0.f;            // 0: 1/sqrt(head_dim)
  void* workspace = nullptr;            // plan.workspace_bytes(), zeroed once when allocated
  size_t workspace_bytes = 0;
};

// The key of a paged decode kernel (family "paged_decode", axes head_dim, q_dtype, kv_dtype,
// page_size), for Runtime::supports and RuntimeOptions::required.
KernelKey decode_key(uint32_t head_dim, Dtype q_dtype, Dtype kv_dtype, uint32_t page_size);
// The same axes in family "paged_decode_g16": kernels that take 16 q heads a block (head_dim 128),
// which a plan whose query-head group is over 8 uses where the bundle has them (so a group of 16
// reads each KV page once); without them it takes the group in chunks of 8. They load on the
// first such plan, or at init when named in RuntimeOptions::required (or nothing is named).
KernelKey decode_g16_key(uint32_t head_dim, Dtype q_dtype, Dtype kv_dtype, uint32_t page_size);
// The same two for NVFP4 caches whose V scales are interleaved by 4 tokens (ScaleOrder):
// families "paged_decode_vsf_interleaved" and "paged_decode_g16_vsf_interleaved", kv_dtype nvfp4.
KernelKey decode_vsf_interleaved_key(uint32_t head_dim, Dtype q_dtype, uint32_t page_size, bool sixteen_heads = false);
// Family "paged_decode_kv_pair", kv_dtype nvfp4, head_dim 128: kernels that take two neighbouring
// kv heads a block as one 128-byte row. A plan takes them where the bundle has them for the
// device, the layout is NHD, the group is at most 4, the kv heads are even in number, V's scales
// are in linear order, and the split count is forced or the unpaired grid fills the GPU unsplit
// (at small batches the unpaired kernel is faster); a launch whose strides do not keep a pair's
// code and scale rows side by side (kv head stride 64 bytes, scale head stride 8, scale rows
// 16-byte aligned) runs the plan's paged_decode kernel instead, with the same splits and workspace.
KernelKey decode_kv_pair_key(Dtype q_dtype, uint32_t page_size);

// The decode kernels an engine needs: the cross product of the listed values.
struct DecodeRequirements {
  std::vector<uint32_t> head_dims;
  std::vector<Dtype> q_dtypes;
  std::vector<Dtype> kv_dtypes;  // the logical KV dtypes (fp8_e4m3, not uint8)
  std::vector<uint32_t> page_sizes;
  std::vector<KernelKey> keys() const;
};

// The kernel's logical KV dtype from storage and declaration, or why it cannot be decided.
Result<Dtype> resolve_kv_dtype(Dtype q_dtype, Dtype storage, std::optional<Dtype> declared);

// Made only by create: a plan always holds a loaded kernel (there is no empty plan to launch).
class DecodePlan {
 public:
  static Result<DecodePlan> create(const Runtime& runtime, const DecodeShape& shape);

  // Bytes of split-KV workspace the launch needs (0 without splits). Zero it once at allocation;
  // the kernel leaves it zeroed after every complete launch.
  size_t workspace_bytes() const { return workspace_bytes_; }
  int num_splits() const { return num_splits_; }
  SplitMerge merge() const { return merge_; }  // workspace or cluster (also when unsplit: workspace)
  int pages_per_split() const { return pages_per_split_; }
  int heads_per_block() const { return heads_per_block_; }  // q heads of one kv head a block takes
  bool overlaps_previous_kernel() const { return overlap_; }  // LaunchOverlap::allow taken on this device
  const LoadedKernel& kernel() const { return *kernel_; }
  // paged_decode_kv_pair plans (decode_kv_pair_key): the kernel a launch takes when its strides do
  // not keep a pair of kv heads side by side; null for every other plan.
  const LoadedKernel* unpaired_kernel() const { return unpaired_; }
  const DecodeShape& shape() const { return shape_; }
  const Runtime& runtime() const { return *runtime_; }

  // Checks the arguments against the plan, then launches on `stream`.
  Status launch(const DecodeArgs& args, CUstream_st* stream) const;

 private:
  DecodePlan() = default;
  const Runtime* runtime_ = nullptr;
  const LoadedKernel* kernel_ = nullptr;
  const LoadedKernel* unpaired_ = nullptr;
  DecodeShape shape_;
  Dtype kv_dtype_ = Dtype::bf16;
  int num_splits_ = 1;
  SplitMerge merge_ = SplitMerge::workspace;
  int pages_per_split_ = 0;
  int head_chunks_ = 1;
  int heads_per_block_ = 8;
  size_t workspace_bytes_ = 0;
  size_t param_bytes_ = 0;
  bool overlap_ = false;
};

}  // namespace cubinrt
