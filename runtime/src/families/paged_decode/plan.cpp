// Paged decode plans (shape -> kernel, splits, merge) and launches (arguments -> cuLaunchKernelEx).
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "common/kv_strides.hpp"
#include "common/try.hpp"
#include "cubinrt/paged_decode.hpp"
#include "driver/driver.hpp"
#include "driver/launch_attributes.hpp"
#include "driver/launch_target.hpp"
#include "families/paged_decode/family_parts.hpp"
#include "families/paged_decode/paged_decode_abi.h"
#include "families/paged_decode/planner.hpp"
#include "families/paged_decode/views.hpp"
#include "family/family.hpp"
#include "loader/loaded_kernel.hpp"

namespace cubinrt {

namespace {

using namespace paged_decode;

bool aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

Status check_shape(const DecodeShape& s) {
  auto bad = [](std::string m) { return fail(Errc::invalid_argument, "paged decode: " + m); };
  if (s.batch == 0 || s.num_q_heads == 0 || s.num_kv_heads == 0 || s.head_dim == 0 || s.page_size == 0 || s.block_table_stride == 0)
    return bad(fmt::format("batch {}, num_q_heads {}, num_kv_heads {}, head_dim {}, page_size {} and block_table_stride {} must all be positive",
                           s.batch, s.num_q_heads, s.num_kv_heads, s.head_dim, s.page_size, s.block_table_stride));
  if (s.num_q_heads % s.num_kv_heads != 0)
    return bad(fmt::format("num_q_heads {} is not a multiple of num_kv_heads {}", s.num_q_heads, s.num_kv_heads));
  if (s.q_dtype != Dtype::fp16 && s.q_dtype != Dtype::bf16)
    return bad(fmt::format("q dtype {} is not supported (fp16 or bf16)", dtype_name(s.q_dtype)));
  const uint64_t capacity = uint64_t{s.block_table_stride} * s.page_size;
  if (s.max_seq_len > capacity)
    return bad(fmt::format("max_seq_len {} exceeds the block table's capacity of {} tokens ({} pages of {})", s.max_seq_len, capacity,
                           s.block_table_stride, s.page_size));
  if (s.batch > 0x7fffffffu) return bad(fmt::format("batch {} is more than one launch takes", s.batch));
  return {};
}

}  // namespace

namespace {
KernelKey key_in(std::string_view family, uint32_t head_dim, Dtype q_dtype, Dtype kv_dtype, uint32_t page_size) {
  return {std::string(family),
          {{"head_dim", std::to_string(head_dim)},
           {"q_dtype", std::string(dtype_name(q_dtype))},
           {"kv_dtype", std::string(dtype_name(kv_dtype))},
           {"page_size", std::to_string(page_size)}}};
}
}  // namespace

KernelKey decode_key(uint32_t head_dim, Dtype q_dtype, Dtype kv_dtype, uint32_t page_size) {
  return key_in(kFamily, head_dim, q_dtype, kv_dtype, page_size);
}
KernelKey decode_g16_key(uint32_t head_dim, Dtype q_dtype, Dtype kv_dtype, uint32_t page_size) {
  return key_in(kG16Family, head_dim, q_dtype, kv_dtype, page_size);
}
KernelKey decode_vsf_interleaved_key(uint32_t head_dim, Dtype q_dtype, uint32_t page_size, bool sixteen_heads) {
  return key_in(sixteen_heads ? kG16VsfInterleavedFamily : kVsfInterleavedFamily, head_dim, q_dtype, Dtype::nvfp4, page_size);
}
KernelKey decode_kv_pair_key(Dtype q_dtype, uint32_t page_size) {
  return key_in(kKvPairFamily, kKvPairHeadDim, q_dtype, Dtype::nvfp4, page_size);
}

std::vector<KernelKey> DecodeRequirements::keys() const {
  std::vector<KernelKey> out;
  for (uint32_t hd : head_dims)
    for (Dtype q : q_dtypes)
      for (Dtype kv : kv_dtypes)
        for (uint32_t ps : page_sizes) out.push_back(decode_key(hd, q, kv, ps));
  return out;
}

Result<Dtype> resolve_kv_dtype(Dtype q_dtype, Dtype storage, std::optional<Dtype> declared) {
  auto bad = [](std::string m) { return fail(Errc::invalid_argument, "KV cache dtype: " + m); };
  switch (storage) {
    case Dtype::uint8:
      if (!declared)
        return bad("the KV cache is uint8 storage with no declared dtype; declare fp8_e4m3, fp8_e5m2 or nvfp4 (cubinrt never infers the encoding from storage)");
      if (*declared == Dtype::fp8_e4m3 || *declared == Dtype::fp8_e5m2 || *declared == Dtype::nvfp4) return *declared;
      return bad(fmt::format("uint8 storage cannot hold {} KV", dtype_name(*declared)));
    case Dtype::fp8_e4m3:
    case Dtype::fp8_e5m2:
    case Dtype::fp16:
    case Dtype::bf16:
      if (declared && *declared != storage)
        return bad(fmt::format("storage is {} but the declared dtype is {}; FP8 and NVFP4 caches are declared on uint8 storage",
                               dtype_name(storage), dtype_name(*declared)));
      if ((storage == Dtype::fp16 || storage == Dtype::bf16) && storage != q_dtype)
        return bad(fmt::format("16-bit KV must match the q dtype ({} KV with {} q)", dtype_name(storage), dtype_name(q_dtype)));
      return storage;
    case Dtype::nvfp4:
      return bad("nvfp4 is not a storage dtype: an NVFP4 cache is uint8 storage declared nvfp4 (two codes a byte), with its block scales");
  }
  return bad("unknown storage dtype");
}

Result<DecodePlan> DecodePlan::create(const Runtime& runtime, const DecodeShape& s) {
  CUBINRT_TRY(check_shape(s));
  DecodePlan plan;
  plan.runtime_ = &runtime;
  plan.shape_ = s;
  plan.kv_dtype_ = CUBINRT_TRY(resolve_kv_dtype(s.q_dtype, s.kv_storage, s.kv_declared));
  const bool nvfp4 = plan.kv_dtype_ == Dtype::nvfp4;
  CUBINRT_TRY(check_scale_order("paged decode", s.v_sf_order, nvfp4, s.page_size, s.head_dim));
  const bool quads = nvfp4 && s.v_sf_order == ScaleOrder::interleaved4;
  const int group = static_cast<int>(s.num_q_heads / s.num_kv_heads);
  // A group over 8 takes the 16-head kernels where this bundle has one for this device; their
  // absence is no error (the 8-head kernels take such a group in chunks), a failed load is.
  const KernelKey wide = quads ? decode_vsf_interleaved_key(s.head_dim, s.q_dtype, s.page_size, true)
                               : decode_g16_key(s.head_dim, s.q_dtype, plan.kv_dtype_, s.page_size);
  // NVFP4 head_dim 128 in NHD pages may take the kernels that read two neighbouring kv heads a
  // block (whole 128-byte lines) where this bundle has them for this device; the group's two
  // copies must fit the 8 rows of a block (below: when it does).
  const bool pairable = nvfp4 && !quads && s.head_dim == kKvPairHeadDim && s.layout == KvLayout::nhd &&
                        2 * group <= CUBINRT_PAGED_DECODE_HEADS && s.num_kv_heads % 2 == 0 &&
                        runtime.selected(decode_kv_pair_key(s.q_dtype, s.page_size)) != nullptr;
  if (group > CUBINRT_PAGED_DECODE_HEADS && runtime.selected(wide) != nullptr) {
    plan.kernel_ = CUBINRT_TRY(runtime.kernel(wide));
    plan.heads_per_block_ = CUBINRT_PAGED_DECODE_G16_HEADS;
  } else {
    plan.kernel_ = CUBINRT_TRY(runtime.kernel(quads ? decode_vsf_interleaved_key(s.head_dim, s.q_dtype, s.page_size)
                                                    : decode_key(s.head_dim, s.q_dtype, plan.kv_dtype_, s.page_size)));
    plan.heads_per_block_ = CUBINRT_PAGED_DECODE_HEADS;
  }
  const int64_t max_len = s.max_seq_len ? s.max_seq_len : int64_t{s.block_table_stride} * s.page_size;
  const int64_t pages = (max_len + s.page_size - 1) / s.page_size;
  const int64_t multiprocessors = std::max(1, runtime.device().multiprocessors);
  const int64_t by_length = std::clamp<int64_t>(max_len / kMinTokensPerSplit, 1, 65535);
  // head_dim 512's kernels split the dims across their warps (paged_decode_abi.h).
  const int64_t saturating = s.head_dim > CUBINRT_PAGED_DECODE_TOKEN_SPLIT_MAX_HEAD_DIM ? kSaturatingBlocksDimSplit : kSaturatingBlocks;
  // Pairs halve the blocks, so they pay where the unpaired grid fills the GPU unsplit (H100 run
  // 97, B64 L8192 32q/8kv: 249 against 295 us); where it must be split to fill it, pairs need
  // twice the splits and their merge (B1 L32768: 63 splits, 32.3 us, against 32, 23.0 us). A
  // forced split count takes them as the shape allows (tests, benchmarks). The launch checks that
  // the strides keep a pair side by side and otherwise runs the unpaired kernel, kept here, with
  // the same splits and workspace. The unpaired grid's choice (a pairable group is one head
  // chunk) is also the plan's where it does not pair.
  std::optional<int64_t> unpaired_splits;
  if (pairable && s.num_splits <= 0)
    unpaired_splits = choose_splits(int64_t{s.batch} * s.num_kv_heads, pages, multiprocessors, plan.kernel_->blocks_per_sm, by_length, saturating);
  const bool pairs = pairable && (s.num_splits > 0 || unpaired_splits == 1);
  if (pairs) {
    plan.unpaired_ = plan.kernel_;
    plan.kernel_ = CUBINRT_TRY(runtime.kernel(decode_kv_pair_key(s.q_dtype, s.page_size)));
  }
  plan.overlap_ = takes_overlap(s.overlap, *plan.kernel_);
  const ManifestEntry& entry = *plan.kernel_->entry;
  plan.param_bytes_ = CUBINRT_TRY(find_abi(entry.key.family, entry.abi_name, entry.abi_version))->param_bytes;
  // The launch fills this struct; a kernel of another ABI (a bundle that is not this build's)
  // would take a parameter block of another size.
  if (plan.param_bytes_ > sizeof(CubinrtPagedDecodeParamsV6))
    return fail(Errc::mismatch, fmt::format("paged decode: kernel {} takes {} parameter bytes, this build fills {}", entry.id,
                                            plan.param_bytes_, sizeof(CubinrtPagedDecodeParamsV6)));

  plan.head_chunks_ = (group + plan.heads_per_block_ - 1) / plan.heads_per_block_;
  if (uint64_t{s.num_kv_heads} * static_cast<uint64_t>(plan.head_chunks_) > 65535)
    return fail(Errc::invalid_argument, fmt::format("paged decode: {} kv heads in {} chunks of up to {} q heads are more blocks than a launch's "
                                                    "grid y takes (65535)", s.num_kv_heads, plan.head_chunks_, plan.heads_per_block_));
  const int64_t blocks = int64_t{s.batch} * s.num_kv_heads * plan.head_chunks_ / (pairs ? 2 : 1);
  const bool can_cluster = supports_cluster_merge(runtime.device(), *plan.kernel_->entry);
  if (s.merge == SplitMerge::cluster && !can_cluster)
    return fail(Errc::unsupported, fmt::format("paged decode: a cluster merge needs thread-block clusters, which {} (kernel {} for {}) "
                                               "does not have; use SplitMerge::workspace or choose",
                                               runtime.device().str(), plan.kernel_->entry->id, plan.kernel_->entry->arch.str()));
  if (s.merge == SplitMerge::cluster && (s.num_splits == 1 || s.num_splits > kMaxClusterSplits))
    return fail(Errc::invalid_argument, fmt::format("paged decode: a cluster merge takes 2 to {} splits, {} asked", kMaxClusterSplits, s.num_splits));
  int64_t splits = s.num_splits;
  bool cluster = s.merge == SplitMerge::cluster;
  if (splits <= 0) {
    // Full waves of blocks at the kernel's occupancy, without splits so short that merging them
    // through the workspace costs more than it hides.
    splits = unpaired_splits && !pairs ? *unpaired_splits
                                       : choose_splits(blocks, pages, multiprocessors, plan.kernel_->blocks_per_sm, by_length, saturating);
    // Where the workspace would take 2 to 8 splits, a cluster merges them instead, in splits as
    // short as 128 tokens, if they are short (kMaxTokensPerClusterSplit) or a pair.
    if (can_cluster && (s.merge == SplitMerge::cluster || (s.merge == SplitMerge::choose && splits > 1 && splits <= kMaxClusterSplits))) {
      const int64_t by_cluster = std::clamp<int64_t>(max_len / kMinTokensPerClusterSplit, 1, kMaxClusterSplits);
      const int64_t c = choose_splits(blocks, pages, multiprocessors, plan.kernel_->blocks_per_sm, by_cluster, saturating);
      const bool cluster_pays = c == 2 || (max_len + c - 1) / c <= kMaxTokensPerClusterSplit;
      if (c > 1 && (s.merge == SplitMerge::cluster || cluster_pays)) splits = c, cluster = true;
      else if (s.merge == SplitMerge::cluster) splits = 1;
    }
  }
  splits = std::clamp<int64_t>(splits, 1, std::max<int64_t>(1, pages));
  plan.pages_per_split_ = static_cast<int>((pages + splits - 1) / splits);
  plan.num_splits_ = static_cast<int>((pages + plan.pages_per_split_ - 1) / plan.pages_per_split_);
  plan.merge_ = cluster && plan.num_splits_ > 1 ? SplitMerge::cluster : SplitMerge::workspace;
  if (plan.num_splits_ > 1 && plan.merge_ == SplitMerge::workspace) {
    const size_t partial = size_t{s.batch} * s.num_q_heads * plan.num_splits_ * (s.head_dim + 1) * sizeof(float);
    plan.workspace_bytes_ = (partial + 255) / 256 * 256 + size_t{s.batch} * s.num_kv_heads * plan.head_chunks_ * sizeof(int32_t);
  }
  return plan;
}

Status DecodePlan::launch(const DecodeArgs& a, CUstream_st* stream) const {
  const DecodeShape& s = shape_;
  auto bad = [](std::string m) { return fail(Errc::invalid_argument, "paged decode launch: " + m); };
  if (!a.q || !a.kv.k || !a.kv.v || !a.block_table || !a.seq_lens || !a.out)
    return bad("q, kv.k, kv.v, block_table, seq_lens and out must all be non-null");
  if (!aligned(a.block_table, 4) || !aligned(a.seq_lens, 4)) return bad("block_table and seq_lens must be 4-byte aligned");
  if (a.kv.storage != s.kv_storage || a.kv.declared != s.kv_declared)
    return bad(fmt::format("the KV descriptor's dtype (storage {}, declared {}) is not the plan's (storage {}, declared {})",
                           dtype_name(a.kv.storage), a.kv.declared ? dtype_name(*a.kv.declared) : "none", dtype_name(s.kv_storage),
                           s.kv_declared ? dtype_name(*s.kv_declared) : "none"));
  if (a.kv.page_size != s.page_size || a.kv.num_kv_heads != s.num_kv_heads || a.kv.layout != s.layout)
    return bad(fmt::format("the KV descriptor (page_size {}, {} kv heads) is not the plan's (page_size {}, {} kv heads) or its layout differs",
                           a.kv.page_size, a.kv.num_kv_heads, s.page_size, s.num_kv_heads));
  if (a.kv.num_pages <= 0) return bad("kv.num_pages must be positive");
  if (a.kv.v_sf_order != s.v_sf_order)
    return bad("the KV descriptor's v_sf_order is not the plan's (the order of V's scales picks the kernel)");
  const ViewStrides strides = CUBINRT_TRY(resolve_views(s, kv_dtype_, a));
  // A pair of kv heads is one row where their code rows and scale rows lie side by side, the scale
  // pair copied as one 16-byte piece; any other strides take the unpaired kernel.
  const bool paired = unpaired_ != nullptr && strides.kv_head == int64_t{kKvPairHeadDim} / 2 && strides.sf_head == kKvPairHeadDim / 16 &&
                      strides.sf_token % 16 == 0 && strides.sf_page % 16 == 0 && aligned(a.kv.k_sf, 16) && aligned(a.kv.v_sf, 16);
  const LoadedKernel& kernel = unpaired_ == nullptr || paired ? *kernel_ : *unpaired_;
  if (num_splits_ > 1 && merge_ == SplitMerge::workspace && (a.workspace == nullptr || a.workspace_bytes < workspace_bytes_ || !aligned(a.workspace, 16)))
    return bad(fmt::format("this plan splits the KV range {} ways and needs a 16-byte aligned workspace of {} bytes ({} given)", num_splits_,
                           workspace_bytes_, a.workspace ? a.workspace_bytes : 0));
  // The stream and every tensor on this plan's device (driver questions, no formatting unless
  // wrong); on the NULL stream, the device's context current for the launch.
  const LaunchTensor tensors[] = {{a.q, "q"},          {a.kv.k, "kv.k"}, {a.kv.v, "kv.v"}, {a.block_table, "block_table"}, {a.seq_lens, "seq_lens"},
                                  {a.out, "out"},      {a.lse, "lse"},   {num_splits_ > 1 && merge_ == SplitMerge::workspace ? a.workspace : nullptr, "workspace"},
                                  {kv_dtype_ == Dtype::nvfp4 ? a.kv.k_sf : nullptr, "kv.k_sf"}, {kv_dtype_ == Dtype::nvfp4 ? a.kv.v_sf : nullptr, "kv.v_sf"}};
  ContextGuard on_device = CUBINRT_TRY(enter_launch_target(*runtime_, stream, tensors, "paged decode launch"));

  const int64_t D = s.head_dim;
  CubinrtPagedDecodeParamsV6 p{};
  p.q = a.q;
  p.k_cache = a.kv.k;
  p.v_cache = a.kv.v;
  p.block_table = a.block_table;
  p.seq_lens = a.seq_lens;
  p.out = a.out;
  p.lse = a.lse;
  if (num_splits_ > 1 && merge_ == SplitMerge::workspace) {
    const size_t partial = size_t{s.batch} * s.num_q_heads * num_splits_ * (s.head_dim + 1) * sizeof(float);
    p.partial = static_cast<float*>(a.workspace);
    p.split_counters = reinterpret_cast<int32_t*>(static_cast<char*>(a.workspace) + (partial + 255) / 256 * 256);
  }
  p.kv_stride_page = strides.kv_page;
  p.kv_stride_token = strides.kv_token;
  p.kv_stride_head = strides.kv_head;
  p.q_stride_batch = strides.q_batch;
  p.q_stride_head = strides.q_head;
  p.out_stride_batch = strides.out_batch;
  p.out_stride_head = strides.out_head;
  p.lse_stride_batch = strides.lse_batch;
  p.lse_stride_head = strides.lse_head;
  const bool scaled = kv_dtype_ == Dtype::fp8_e4m3 || kv_dtype_ == Dtype::fp8_e5m2 || kv_dtype_ == Dtype::nvfp4;
  p.k_scale = scaled ? a.kv.k_scale : 1.f;
  p.v_scale = scaled ? a.kv.v_scale : 1.f;
  if (kv_dtype_ == Dtype::nvfp4) {
    p.k_sf = static_cast<const uint8_t*>(a.kv.k_sf);
    p.v_sf = static_cast<const uint8_t*>(a.kv.v_sf);
    p.sf_stride_page = strides.sf_page;
    p.sf_stride_token = strides.sf_token;
    p.sf_stride_head = strides.sf_head;
  }
  p.softmax_scale = a.softmax_scale != 0.f ? a.softmax_scale : 1.f / std::sqrt(static_cast<float>(D));
  p.batch = static_cast<int32_t>(s.batch);
  p.num_q_heads = static_cast<int32_t>(s.num_q_heads);
  p.num_kv_heads = static_cast<int32_t>(s.num_kv_heads);
  p.block_table_stride = static_cast<int32_t>(s.block_table_stride);
  p.num_splits = num_splits_;
  p.pages_per_split = pages_per_split_;

  // The parameter block ends at the last field (the struct's tail padding is not part of it).
  size_t size = param_bytes_;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &p, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  CUlaunchConfig config{};
  config.gridDimX = s.batch;
  config.gridDimY = s.num_kv_heads / (paired ? 2 : 1) * static_cast<unsigned>(head_chunks_);
  config.gridDimZ = static_cast<unsigned>(num_splits_);
  config.blockDimX = kernel.block_threads;
  config.blockDimY = config.blockDimZ = 1;
  config.sharedMemBytes = kernel.dynamic_shared;
  config.hStream = stream;
  LaunchAttributes attrs;
  // A cluster merge: the splits of each (sequence, head chunk) are one cluster along z.
  if (merge_ == SplitMerge::cluster) attrs.cluster_along_z(static_cast<unsigned>(num_splits_));
  if (overlap_ && kernel.waits_on_prior_grids) attrs.overlap_previous_kernel();
  attrs.apply(config);
  const DriverApi& d = runtime_->driver();
  // Nothing is formatted unless the launch fails: the message is made on the error path only.
  const CUresult r = d.cuLaunchKernelEx(&config, kernel.function, nullptr, extra);
  if (r == CUDA_SUCCESS) return on_device.leave("paged decode launch");
  return d.check(r, "cuLaunchKernelEx", fmt::format("{}: kernel {}", runtime_->device().str(), kernel.entry->symbol));
}

}  // namespace cubinrt
