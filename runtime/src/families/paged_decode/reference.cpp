#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "common/kv_strides.hpp"
#include "families/paged_decode/reference.hpp"

namespace cubinrt::ref {

namespace {

size_t bytes_of(Dtype d) { return dtype_bits(d) / 8; }

// splitmix64: reproducible, and fast enough to fill the self-check's problems at start-up.
struct SplitMix {
  using result_type = uint64_t;
  uint64_t state;
  static constexpr uint64_t min() { return 0; }
  static constexpr uint64_t max() { return ~uint64_t{0}; }
  uint64_t operator()() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1), never zero: 24 random bits, offset by half a step.
  float unit() { return (static_cast<float>((*this)() >> 40) + 0.5f) * (2.0f / 16777216.0f) - 1.0f; }
};

// The value of every code of a dtype, made once per process (the self-check runs at start-up).
const std::vector<double>& code_table(Dtype d) {
  static const auto make = [](Dtype t) {
    std::vector<double> v(dtype_bits(t) == 8 ? 256 : 65536);
    for (size_t c = 0; c < v.size(); ++c) v[c] = element_value(t, static_cast<uint16_t>(c));
    return v;
  };
  static const std::vector<double> fp16 = make(Dtype::fp16), bf16 = make(Dtype::bf16), e4m3 = make(Dtype::fp8_e4m3),
                                   e5m2 = make(Dtype::fp8_e5m2);
  return d == Dtype::fp16 ? fp16 : d == Dtype::bf16 ? bf16 : d == Dtype::fp8_e4m3 ? e4m3 : e5m2;
}

uint16_t load16(const std::vector<uint8_t>& v, size_t i) {
  uint16_t x;
  std::memcpy(&x, v.data() + 2 * i, 2);
  return x;
}

}  // namespace

Problem make_problem(const DecodeShape& s, Dtype kv_dtype, std::vector<int32_t> seq_lens, uint64_t seed) {
  Problem p;
  p.shape = s;
  p.kv_dtype = kv_dtype;
  p.seq_lens = std::move(seq_lens);
  SplitMix rng{seed};
  const size_t D = s.head_dim, B = s.batch, Hq = s.num_q_heads, Hk = s.num_kv_heads, P = s.page_size;

  // Every sequence gets its own pages, handed out in a shuffled order.
  int64_t pages = 0;
  for (int32_t len : p.seq_lens) pages += (len + P - 1) / P;
  p.num_pages = pages + 1;  // a page nobody uses
  std::vector<int32_t> order(static_cast<size_t>(p.num_pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  p.block_table.assign(B * s.block_table_stride, -1);  // unused slots hold an invalid page
  size_t next = 0;
  for (size_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < (p.seq_lens[b] + static_cast<int64_t>(P) - 1) / static_cast<int64_t>(P); ++i)
      p.block_table[b * s.block_table_stride + i] = order[next++];

  auto fill16 = [&](std::vector<uint8_t>& v, size_t n, Dtype d) {
    v.resize(2 * n);
    for (size_t i = 0; i < n; ++i) {
      const uint16_t bits = encode_float16(d, rng.unit());
      std::memcpy(v.data() + 2 * i, &bits, 2);
    }
  };
  static const std::vector<uint8_t> fp8_codes = [] {
    std::vector<uint8_t> codes;  // finite, non-zero and below 4 in both encodings
    for (int b = 0; b < 256; ++b) {
      const double x = element_value(Dtype::fp8_e4m3, static_cast<uint16_t>(b)), y = element_value(Dtype::fp8_e5m2, static_cast<uint16_t>(b));
      if (std::isfinite(x) && std::isfinite(y) && x != 0 && std::fabs(x) < 4 && std::fabs(y) < 4) codes.push_back(static_cast<uint8_t>(b));
    }
    return codes;
  }();
  auto fill8 = [&](std::vector<uint8_t>& v, size_t n) {
    v.resize(n);
    for (size_t i = 0; i < n; ++i) v[i] = fp8_codes[rng() % fp8_codes.size()];
  };
  fill16(p.q, B * Hq * D, s.q_dtype);
  const size_t kv_elems = static_cast<size_t>(p.num_pages) * P * Hk * D;
  if (kv_dtype == Dtype::nvfp4) {
    // Any byte is two valid codes. Scales: mostly 1/8 to 4 (codes 0x20-0x48), one block in 16 an
    // e4m3 subnormal (codes 1-7, down to 2^-9) and one in 64 zero.
    auto fill_nvfp4 = [&](std::vector<uint8_t>& data, std::vector<uint8_t>& sf) {
      data.resize(kv_elems / 2);
      for (uint8_t& x : data) x = static_cast<uint8_t>(rng());
      sf.resize(kv_elems / 16);
      for (uint8_t& x : sf) {
        const uint64_t r = rng();
        x = static_cast<uint8_t>(r % 64 == 0 ? 0 : r % 16 == 1 ? 1 + (r >> 8) % 7 : 0x20 + (r >> 8) % 0x29);
      }
    };
    fill_nvfp4(p.k, p.k_sf);
    fill_nvfp4(p.v, p.v_sf);
    p.k_scale = 0.375f, p.v_scale = 0.625f;
  } else if (bytes_of(kv_dtype) == 2) {
    fill16(p.k, kv_elems, kv_dtype), fill16(p.v, kv_elems, kv_dtype);
  } else {
    fill8(p.k, kv_elems), fill8(p.v, kv_elems);
  }
  if (bytes_of(kv_dtype) == 1) p.k_scale = 0.75f, p.v_scale = 1.25f;
  p.softmax_scale = 1.f / std::sqrt(static_cast<float>(D));
  return p;
}

namespace {
// Which row (page, token, kv head) is among a problem's rows of K, V or their scales, all
// contiguous in its layout.
size_t row_index(const DecodeShape& s, int64_t page, int64_t tok, int64_t h) {
  const size_t P = s.page_size, Hk = s.num_kv_heads;
  return s.layout == KvLayout::nhd ? (static_cast<size_t>(page) * P + tok) * Hk + h : (static_cast<size_t>(page) * Hk + h) * P + tok;
}
// Index of the first scale of (page, token, kv head) in a problem's scale rows.
size_t sf_row(const DecodeShape& s, int64_t page, int64_t tok, int64_t h) { return row_index(s, page, tok, h) * (s.head_dim / 16); }
// Moves every scale of one order to its place in the other: to_order from linear, or back.
std::vector<uint8_t> move_scales(const Problem& p, const std::vector<uint8_t>& sf, ScaleOrder order, bool to_order) {
  const DecodeShape& s = p.shape;
  const int64_t S = s.head_dim / 16;
  std::vector<uint8_t> out(sf.size());
  for (int64_t page = 0; page < p.num_pages; ++page)
    for (int64_t h = 0; h < s.num_kv_heads; ++h)
      for (int64_t t = 0; t < s.page_size; ++t)
        for (int64_t b = 0; b < S; ++b) {
          const ScalePlace at = scale_place(order, t, b, S);
          const size_t linear = sf_row(s, page, t, h) + b, ordered = sf_row(s, page, at.row, h) + at.col;
          if (to_order) out[ordered] = sf[linear];
          else out[linear] = sf[ordered];
        }
  return out;
}
}  // namespace

void reorder_v_scales(Problem& p, ScaleOrder order) {
  const std::vector<uint8_t> linear = move_scales(p, p.v_sf, p.shape.v_sf_order, false);
  p.v_sf = move_scales(p, linear, order, true);
  p.shape.v_sf_order = order;
}

Answer solve(const Problem& p, Dtype kv_as) {
  const DecodeShape& s = p.shape;
  const size_t D = s.head_dim, Hq = s.num_q_heads, Hk = s.num_kv_heads, P = s.page_size;
  const size_t group = Hq / Hk;
  const bool fp8 = bytes_of(kv_as) == 1, nvfp4 = kv_as == Dtype::nvfp4;
  const std::vector<double>& table = code_table(nvfp4 ? Dtype::fp8_e4m3 : kv_as);
  // Every element's value, in the cache's element order. NVFP4: e2m1(code) x e4m3(its block's
  // scale) x the global scale, element 2i in the low nibble of byte i (docs/formats.md).
  auto decode_cache = [&](const std::vector<uint8_t>& cache, const std::vector<uint8_t>& sf, double scale) {
    const size_t n = nvfp4 ? 2 * cache.size() : fp8 ? cache.size() : cache.size() / 2;
    std::vector<double> out(n);
    for (size_t i = 0; i < n; ++i) {
      if (nvfp4) out[i] = e2m1_value(static_cast<uint8_t>(cache[i / 2] >> (4 * (i % 2)) & 0xf)) * table[sf[i / 16]] * scale;
      else out[i] = (fp8 ? table[cache[i]] : table[load16(cache, i)]) * scale;
    }
    return out;
  };
  const bool scaled = fp8 || nvfp4;
  const std::vector<double> K = decode_cache(p.k, p.k_sf, scaled ? p.k_scale : 1.0),
                            V = decode_cache(p.v, nvfp4 ? move_scales(p, p.v_sf, s.v_sf_order, false) : p.v_sf, scaled ? p.v_scale : 1.0);
  auto row = [&](int64_t page, size_t tok, size_t h) { return row_index(s, page, static_cast<int64_t>(tok), static_cast<int64_t>(h)) * D; };
  Answer a;
  a.out.assign(s.batch * Hq * D, 0.0);
  a.lse.assign(s.batch * Hq, 0.0);
  std::vector<double> q(D);
  for (size_t b = 0; b < s.batch; ++b) {
    const int len = std::min<int>(p.seq_lens[b], static_cast<int>(s.block_table_stride * P));
    for (size_t qh = 0; qh < Hq; ++qh) {
      const size_t kh = qh / group;
      for (size_t d = 0; d < D; ++d) q[d] = code_table(s.q_dtype)[load16(p.q, (b * Hq + qh) * D + d)];
      std::vector<double> score(static_cast<size_t>(len));
      double mx = -INFINITY;
      for (int t = 0; t < len; ++t) {
        const double* k = &K[row(p.block_table[b * s.block_table_stride + t / P], t % P, kh)];
        double dot = 0;
        for (size_t d = 0; d < D; ++d) dot += q[d] * k[d];
        score[t] = dot * p.softmax_scale;
        mx = std::max(mx, score[t]);
      }
      double sum = 0;
      for (double& x : score) sum += (x = std::exp(x - mx));
      double* o = &a.out[(b * Hq + qh) * D];
      for (int t = 0; t < len; ++t) {
        const double* v = &V[row(p.block_table[b * s.block_table_stride + t / P], t % P, kh)];
        const double w = score[t] / sum;
        for (size_t d = 0; d < D; ++d) o[d] += w * v[d];
      }
      a.lse[b * Hq + qh] = len > 0 ? mx + std::log(sum) : -INFINITY;
    }
  }
  return a;
}

double rel_l2(Dtype q_dtype, const std::vector<uint8_t>& got, const std::vector<double>& want) {
  std::vector<float> g(want.size());
  for (size_t i = 0; i < want.size(); ++i) g[i] = static_cast<float>(element_value(q_dtype, load16(got, i)));
  return rel_l2(g, want);
}

double rel_l2(const std::vector<float>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return NAN;
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i])) return NAN;
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

double tolerance(Dtype out_dtype) { return out_dtype == Dtype::bf16 ? 1e-2 : 2e-3; }

}  // namespace cubinrt::ref
