#include <fmt/format.h>

#include "common/try.hpp"
#include "cubinrt/abi.hpp"
#include "cubinrt/verify.hpp"

namespace cubinrt {

namespace {

Status agree(const ManifestEntry& e, const VerifiedCubin& v) {
  auto bad = [&](std::string what) { return fail(Errc::mismatch, fmt::format("manifest and cubin disagree: {}", what)); };
  if (!(v.info.arch == e.arch)) return bad(fmt::format("arch {} in the manifest, {} in the cubin", e.arch.str(), v.info.arch.str()));
  if (v.info.toolkit_version != e.toolkit_version)
    return bad(fmt::format("toolkit {} in the manifest, {} in the cubin", e.toolkit_version, v.info.toolkit_version));
  if (v.info.min_driver_version() != e.min_driver_version)
    return bad(fmt::format("minimum driver {} in the manifest, {} from the cubin", e.min_driver_version, v.info.min_driver_version()));
  if (v.kernel->dynamic_shared != e.dynamic_shared)
    return bad(fmt::format("{} bytes of dynamic shared memory in the manifest, {} in the cubin", e.dynamic_shared, v.kernel->dynamic_shared));
  if (v.kernel->registers != e.registers)
    return bad(fmt::format("{} registers in the manifest, {} in the cubin", e.registers, v.kernel->registers));
  return {};
}

}  // namespace

Result<VerifiedCubin> verify_entry(const Bundle& bundle, const ManifestEntry& e) {
  auto context = [&](Error err) { return std::unexpected(std::move(err).context(fmt::format("bundle {}: entry {}", bundle.name(), e.id))); };
  auto bytes = bundle.cubin(e);  // carries its own context
  if (!bytes) return std::unexpected(std::move(bytes).error());
  VerifiedCubin v{std::move(*bytes), {}, nullptr};
  auto info = read_cubin(v.bytes);
  if (!info) return context(std::move(info).error());
  v.info = std::move(*info);
  v.kernel = v.info.kernel(e.symbol);
  if (v.kernel == nullptr)
    return context(Error{Errc::mismatch, fmt::format("manifest and cubin disagree: the cubin defines no kernel '{}'", e.symbol)});
  if (auto ok = agree(e, v); !ok) return context(std::move(ok).error());
  auto abi = find_abi(e.abi_name, e.abi_version);
  if (!abi) return context(std::move(abi).error());
  if (auto ok = check_kernel_abi(*v.kernel, **abi); !ok) return context(std::move(ok).error());
  return v;
}

std::vector<VerifyFailure> verify_bundle(const Bundle& bundle) {
  std::vector<VerifyFailure> failures;
  for (const ManifestEntry& e : bundle.manifest().entries)
    if (auto v = verify_entry(bundle, e); !v) failures.push_back({e.id, v.error().message});
  if (bundle.manifest().entries.empty()) failures.push_back({"-", fmt::format("bundle {}: holds no entries", bundle.name())});
  return failures;
}

}  // namespace cubinrt
