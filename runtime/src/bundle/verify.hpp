// Static verification of bundle entries: everything that can be known without a GPU.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "bundle/bundle.hpp"
#include "cubin/cubin.hpp"

namespace cubinrt {

// One cubin of a bundle, decompressed to its recorded size, its sha256 checked and its ELF read
// (which validates it). Entries of one cubin share it (same offset).
struct VerifiedCubin {
  std::vector<std::byte> bytes;
  CubinInfo info;
  const KernelInfo* kernel = nullptr;  // the entry's kernel (verify_entry), pointing into info
  // What the entry it was read for records of it: every other entry of the same offset must
  // record the same, or it is not this cubin's entry.
  std::string sha256;
  uint64_t size = 0, compressed_size = 0;
};

// The entry's cubin, without checking its kernel yet (a loader checks each entry of it).
Result<VerifiedCubin> read_verified_cubin(const Bundle& bundle, const ManifestEntry& entry);
// The entry's kernel in its already verified cubin: manifest-cubin agreement (arch, symbol,
// toolkit, resources) and the kernel's parameter layout against its family's ABI.
Result<const KernelInfo*> verify_kernel(const Bundle& bundle, const VerifiedCubin& cubin, const ManifestEntry& entry);
// Both, for one entry. The loader runs these before the driver sees a byte; `verify` and the
// self-check run them on every entry.
Result<VerifiedCubin> verify_entry(const Bundle& bundle, const ManifestEntry& entry);

struct VerifyFailure {
  std::string entry;    // entry id
  std::string message;  // one line
};

// Every entry (each cubin decompressed once); an empty result means all passed.
// With `warnings`, each cubin's well-formed records it skipped (CubinInfo::warnings), once a
// cubin, under the first entry that names it.
std::vector<VerifyFailure> verify_bundle(const Bundle& bundle, std::vector<VerifyFailure>* warnings = nullptr);
// The same for some entries.
std::vector<VerifyFailure> verify_entries(const Bundle& bundle, std::span<const ManifestEntry* const> entries,
                                          std::vector<VerifyFailure>* warnings = nullptr);

}  // namespace cubinrt
