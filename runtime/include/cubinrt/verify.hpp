// Static verification of a bundle entry: everything that can be known without a GPU.
#pragma once

#include <string>
#include <vector>

#include "cubinrt/bundle.hpp"
#include "cubinrt/cubin.hpp"

namespace cubinrt {

struct VerifiedCubin {
  std::vector<std::byte> bytes;
  CubinInfo info;
  const KernelInfo* kernel = nullptr;  // points into info
};

// Decompression to the recorded size, sha256, ELF validity, manifest-cubin agreement (arch,
// symbol, toolkit) and the kernel's parameter layout against its ABI. The loader runs this before
// the driver sees a byte; `verify` and the self-check run it on every entry.
Result<VerifiedCubin> verify_entry(const Bundle& bundle, const ManifestEntry& entry);

struct VerifyFailure {
  std::string entry;    // entry id
  std::string message;  // one line
};

// Every entry; an empty result means all passed.
std::vector<VerifyFailure> verify_bundle(const Bundle& bundle);

}  // namespace cubinrt
