// The cubin (CUDA ELF) reader: a bounds-checked parse of everything cubinrt needs to know about
// a cubin before any driver sees it. read_cubin() validates as it reads and fails on the first
// broken rule with "rule <name>: ..." in the message.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cubinrt/error.hpp"
#include "cubinrt/types.hpp"

namespace cubinrt {

// What a container (a bundle entry, a fatbin entry) may claim a cubin decompresses to, checked
// before anything is allocated for it: the largest cubin this project builds (one family and
// arch, 54 kernels) is 4.4 MB, and LZ4 and zstd make cubins a few times smaller, not a thousand.
inline constexpr uint64_t kMaxCubinBytes = uint64_t{256} << 20;
inline constexpr uint64_t kMaxCompressionRatio = 1000;

struct ParamInfo {
  uint32_t ordinal = 0;
  uint32_t offset = 0;  // from the start of the parameter block
  uint32_t size = 0;
  friend bool operator==(const ParamInfo&, const ParamInfo&) = default;
};

struct KernelInfo {
  enum class Binding : uint8_t { local = 0, global = 1, weak = 2 };
  std::string name;                    // as in the ELF (mangled for C++ kernels)
  Binding binding = Binding::global;   // local: static or anonymous-namespace kernels
  std::vector<ParamInfo> params;       // by ordinal
  uint32_t param_bytes = 0;            // CBANK_PARAM_SIZE
  uint32_t param_base = 0;             // offset of the parameters in constant bank 0
  uint32_t registers = 0;              // REGCOUNT
  uint32_t max_reg_count = 0;          // MAXREG_COUNT (255 unless limited)
  uint32_t static_shared = 0;          // bytes, without the sm_90+ reserved 1 KiB
  uint32_t dynamic_shared = 0;         // bytes a launch must pass: cubinrt_dynamic_smem_<kernel>, 0 if absent
  bool waits_on_prior_grids = false;   // cubinrt_grid_dependency_<kernel> = 1: may be launched to overlap the previous kernel
  uint32_t local_bytes = 0;            // FRAME_SIZE per thread
  uint32_t max_threads = 1024;         // product of MAX_THREADS (launch bounds), 1024 if absent
  std::array<uint32_t, 3> max_ntid{};  // launch bounds, zero if absent
  std::array<uint32_t, 3> req_ntid{};  // required block size, zero if absent
  std::array<uint32_t, 3> cluster{};   // CTA_PER_CLUSTER, zero if absent
  bool explicit_cluster = false;
  uint32_t num_barriers = 0;
  uint64_t code_size = 0;              // bytes of .text.<kernel>
  std::string key;                     // the key the kernel states (cubinrt_key_<kernel>), "" if none
};

struct CubinInfo {
  uint32_t abi_version = 0;     // EI_ABIVERSION: 7 or 8
  uint32_t e_flags = 0;
  Arch arch;                    // the real SM; variant 'a' from e_flags or .nv.compat, 'f' from tkinfo
  uint32_t virtual_sm = 0;      // from .note.nv.cuinfo (v8) or e_flags (v7); 0 when absent
  uint32_t toolkit_version = 0; // x10: 130 = CUDA 13.0; 0 when the cubin does not say
  std::string tool_name;        // from .note.nv.tkinfo when present
  std::string tool_version;
  std::string tool_options;     // e.g. "-arch sm_90 -m 64 "
  std::vector<KernelInfo> kernels;
  // What was well formed but not understood, and skipped: attribute codes and notes newer than
  // this build. Never a reason to refuse the cubin; `show` prints them (a `warnings` array in --json).
  std::vector<std::string> warnings;

  const KernelInfo* kernel(std::string_view name) const;
  // The CUDA driver API version this cubin needs: toolkit major*1000 + minor*10 (13.0 -> 13000).
  int min_driver_version() const { return static_cast<int>(toolkit_version / 10 * 1000 + toolkit_version % 10 * 10); }
};

Result<CubinInfo> read_cubin(std::span<const std::byte> bytes);

}  // namespace cubinrt
