#include <map>
#include <optional>

#include <fmt/format.h>

#include "bundle/verify.hpp"
#include "common/try.hpp"
#include "family/family.hpp"

namespace cubinrt {

namespace {

Status agree(const ManifestEntry& e, const CubinInfo& info, const KernelInfo& k, uint32_t manifest_version) {
  auto bad = [&](std::string what) { return fail(Errc::mismatch, fmt::format("manifest and cubin disagree: {}", what)); };
  if (!(info.arch == e.arch)) return bad(fmt::format("arch {} in the manifest, {} in the cubin", e.arch.str(), info.arch.str()));
  if (info.toolkit_version != e.toolkit_version)
    return bad(fmt::format("toolkit {} in the manifest, {} in the cubin", e.toolkit_version, info.toolkit_version));
  if (info.min_driver_version() != e.min_driver_version)
    return bad(fmt::format("minimum driver {} in the manifest, {} from the cubin", e.min_driver_version, info.min_driver_version()));
  if (k.dynamic_shared != e.dynamic_shared)
    return bad(fmt::format("{} bytes of dynamic shared memory in the manifest, {} in the cubin", e.dynamic_shared, k.dynamic_shared));
  if (k.registers != e.registers) return bad(fmt::format("{} registers in the manifest, {} in the cubin", e.registers, k.registers));
  // Every kernel of a version-2 bundle says which key it is (cubinrt_key_<kernel>): otherwise an
  // entry could name a sibling (the e5m2 kernel for an e4m3 key) and nothing here would see it.
  // Version-1 bundles held one kernel a cubin, found by its symbol alone.
  if (k.key.empty() && (manifest_version >= 2 || info.kernels.size() > 1))
    return bad(fmt::format("kernel '{}' does not state its key (cubinrt_key_{})", k.name, k.name));
  if (!k.key.empty() && k.key != e.key.str())
    return bad(fmt::format("kernel '{}' states the key '{}', the manifest gives it '{}'", k.name, k.key, e.key.str()));
  return {};
}

}  // namespace

Result<VerifiedCubin> read_verified_cubin(const Bundle& bundle, const ManifestEntry& e) {
  auto bytes = bundle.cubin(e);  // carries its own context
  if (!bytes) return std::unexpected(std::move(bytes).error());
  VerifiedCubin v{std::move(*bytes), {}, nullptr, e.sha256, e.size, e.compressed_size};
  auto info = read_cubin(v.bytes);
  if (!info) return std::unexpected(std::move(info).error().context(fmt::format("bundle {}: entry {}", bundle.name(), e.id)));
  v.info = std::move(*info);
  return v;
}

Result<const KernelInfo*> verify_kernel(const Bundle& bundle, const VerifiedCubin& v, const ManifestEntry& e) {
  auto check = [&]() -> Result<const KernelInfo*> {
    if (e.sha256 != v.sha256 || e.size != v.size || e.compressed_size != v.compressed_size)
      return fail(Errc::corrupt_bundle, fmt::format("its cubin at offset {} is recorded as sha256 {}, {} bytes ({} compressed) by another "
                                                    "entry, and as sha256 {}, {} bytes ({} compressed) here",
                                                    e.offset, v.sha256, v.size, v.compressed_size, e.sha256, e.size, e.compressed_size));
    const KernelInfo* k = v.info.kernel(e.symbol);
    if (k == nullptr) return fail(Errc::mismatch, fmt::format("manifest and cubin disagree: the cubin defines no kernel '{}'", e.symbol));
    CUBINRT_TRY(agree(e, v.info, *k, bundle.manifest().version));
    const AbiLayout* abi = CUBINRT_TRY(find_abi(e.key.family, e.abi_name, e.abi_version));
    CUBINRT_TRY(check_kernel_abi(*k, *abi));
    return k;
  };
  auto k = check();
  if (!k) return std::unexpected(std::move(k).error().context(fmt::format("bundle {}: entry {}", bundle.name(), e.id)));
  return k;
}

Result<VerifiedCubin> verify_entry(const Bundle& bundle, const ManifestEntry& e) {
  VerifiedCubin v = CUBINRT_TRY(read_verified_cubin(bundle, e));
  v.kernel = CUBINRT_TRY(verify_kernel(bundle, v, e));
  return v;
}

std::vector<VerifyFailure> verify_entries(const Bundle& bundle, std::span<const ManifestEntry* const> entries,
                                          std::vector<VerifyFailure>* warnings) {
  // One cubin at a time (memory: the largest cubin, not the bundle's sum): the entries grouped by
  // their cubin, whose bytes are decompressed and checked once for the group, then dropped.
  std::map<uint64_t, std::vector<size_t>> by_cubin;
  for (size_t i = 0; i < entries.size(); ++i) by_cubin[entries[i]->offset].push_back(i);
  std::vector<std::optional<VerifyFailure>> by_entry(entries.size());
  for (const auto& [offset, group] : by_cubin) {
    const Result<VerifiedCubin> cubin = read_verified_cubin(bundle, *entries[group.front()]);
    if (cubin && warnings)
      for (const std::string& w : cubin->info.warnings) warnings->push_back({entries[group.front()]->id, w});
    for (size_t i : group) {
      const ManifestEntry& e = *entries[i];
      if (!cubin) {
        // Said for each entry of the cubin, named by that entry (read again, on failure only).
        const auto again = i == group.front() ? Result<VerifiedCubin>(std::unexpected(cubin.error())) : read_verified_cubin(bundle, e);
        by_entry[i] = VerifyFailure{e.id, again ? cubin.error().message : again.error().message};
        continue;
      }
      if (auto k = verify_kernel(bundle, *cubin, e); !k) by_entry[i] = VerifyFailure{e.id, k.error().message};
    }
  }
  std::vector<VerifyFailure> failures;
  for (auto& f : by_entry)
    if (f) failures.push_back(std::move(*f));
  return failures;
}

std::vector<VerifyFailure> verify_bundle(const Bundle& bundle, std::vector<VerifyFailure>* warnings) {
  std::vector<const ManifestEntry*> all;
  for (const ManifestEntry& e : bundle.manifest().entries) all.push_back(&e);
  std::vector<VerifyFailure> failures = verify_entries(bundle, all, warnings);
  if (all.empty()) failures.push_back({"-", fmt::format("bundle {}: holds no entries", bundle.name())});
  return failures;
}

}  // namespace cubinrt
