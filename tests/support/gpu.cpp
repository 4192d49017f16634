#include "support/gpu.hpp"

#include <cstdlib>

namespace cubinrt::test {

const GpuProbe& gpu() {
  static const GpuProbe probe = [] {
    GpuProbe p;
    auto d = open_driver();
    if (!d) return p.why_not = d.error().message, p;
    if (const CUresult r = (*d)->cuInit(0); r != CUDA_SUCCESS) return p.why_not = (*d)->describe("cuInit", r), p;
    int n = 0;
    if ((*d)->cuDeviceGetCount(&n) != CUDA_SUCCESS || n == 0) return p.why_not = "the CUDA driver reports no device", p;
    p.driver = *d;
    return p;
  }();
  return probe;
}

std::string build_file(const char* env_name, const char* build_path) {
  const char* v = std::getenv(env_name);
  return v && *v ? v : build_path;
}

DecodeAxes decode_axes(const KernelKey& key) {
  DecodeAxes a;
  a.head_dim = static_cast<uint32_t>(std::stoul(std::string(key.axis("head_dim"))));
  a.q_dtype = *parse_dtype(key.axis("q_dtype"));
  a.kv_dtype = *parse_dtype(key.axis("kv_dtype"));
  a.page_size = static_cast<uint32_t>(std::stoul(std::string(key.axis("page_size"))));
  return a;
}

}  // namespace cubinrt::test
