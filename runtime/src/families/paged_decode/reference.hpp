// Host-side truth for the decode kernels: exact element encodings, reproducible random problems
// and a float64 reference. The self-check's known-answer tests and the GPU tests both use it.
#pragma once

#include <cstdint>
#include <vector>

#include "cubinrt/paged_decode.hpp"
#include "common/encodings.hpp"
#include "cubinrt/types.hpp"

namespace cubinrt::ref {

// Element encodings: cubinrt::element_value and encode_float16 (common/encodings.hpp).
using cubinrt::element_value;
using cubinrt::encode_float16;

// A complete decode problem in host memory, elements stored as their encodings.
struct Problem {
  DecodeShape shape;
  Dtype kv_dtype = Dtype::bf16;        // the logical KV encoding the data was made in
  std::vector<int32_t> seq_lens;
  std::vector<int32_t> block_table;    // [batch, block_table_stride], pages shuffled
  int64_t num_pages = 0;
  std::vector<uint8_t> q, k, v;        // raw bytes in the q / KV encodings (NVFP4: two codes a byte)
  std::vector<uint8_t> k_sf, v_sf;     // NVFP4: e4m3 block scales, rows of head_dim / 16 in the KV's layout
  float k_scale = 1.f, v_scale = 1.f, softmax_scale = 0.f;  // FP8's scales, NVFP4's global ones
};

// Random (never zero) inputs: q and 16-bit KV uniform in [-1, 1); FP8 KV as random codes that are
// finite and below 4 in magnitude in BOTH FP8 encodings, so one buffer is valid as either; NVFP4
// as random codes (all 16 are finite) with random block scales, among them e4m3 subnormals and 0.
Problem make_problem(const DecodeShape& shape, Dtype kv_dtype, std::vector<int32_t> seq_lens, uint64_t seed);

// Reorders an NVFP4 problem's V scales from their order (shape.v_sf_order) to `order`: the same
// cache, as TensorRT-LLM's SM100 writer would have laid it out; solve reads them back in that
// order, and a plan of the shape takes the kernels that do.
void reorder_v_scales(Problem& p, ScaleOrder order);

struct Answer {
  std::vector<double> out;  // [batch, num_q_heads, head_dim]
  std::vector<double> lse;  // [batch, num_q_heads], natural log
};
// Attention in float64, decoding KV as `kv_as` (normally p.kv_dtype).
Answer solve(const Problem& p, Dtype kv_as);

// ||got - want|| / ||want|| over all elements; got in the q encoding. NaN if any value is NaN.
double rel_l2(Dtype q_dtype, const std::vector<uint8_t>& got, const std::vector<double>& want);
double rel_l2(const std::vector<float>& got, const std::vector<double>& want);

// The tolerance of a result rounded to `out_dtype` (what a correct kernel must meet).
double tolerance(Dtype out_dtype);

}  // namespace cubinrt::ref
