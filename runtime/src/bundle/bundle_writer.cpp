// pack_bundle: catalog + real cubins -> bundle bytes. Facts come from each cubin; the catalog only
// says what must be there, and every disagreement between the two is an error.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include <openssl/evp.h>
#include <zstd.h>

#include "bundle/bundle_header.hpp"
#include "common/try.hpp"
#include "cubinrt/abi.hpp"
#include "cubinrt/bundle.hpp"
#include "cubinrt/cubin.hpp"

namespace cubinrt {

using namespace detail;

namespace {

template <class T>
void put(std::vector<std::byte>& out, size_t at, T value) {
  std::memcpy(out.data() + at, &value, sizeof value);
}

Result<ManifestEntry> describe(const CatalogVariant& v, std::span<const std::byte> cubin) {
  const CubinInfo info = CUBINRT_TRY(read_cubin(cubin));
  if (!(info.arch == v.arch))
    return fail(Errc::mismatch, fmt::format("the catalog declares {}, the cubin is built for {}", v.arch.str(), info.arch.str()));
  const KernelInfo* k = info.kernel(v.symbol);
  if (k == nullptr) return fail(Errc::mismatch, fmt::format("the cubin defines no kernel '{}'", v.symbol));
  if (info.kernels.size() != 1) return fail(Errc::mismatch, fmt::format("the cubin defines {} kernels, one is expected", info.kernels.size()));
  const AbiLayout* abi = CUBINRT_TRY(find_abi(v.abi_name, v.abi_version));
  CUBINRT_TRY(check_kernel_abi(*k, *abi));
  if (info.toolkit_version == 0) return fail(Errc::mismatch, "the cubin does not record the toolkit that built it");
  ManifestEntry e;
  e.id = v.id;
  e.arch = info.arch;
  e.key = v.key;
  e.symbol = k->name;
  e.abi_name = v.abi_name;
  e.abi_version = v.abi_version;
  e.toolkit_version = info.toolkit_version;
  e.min_driver_version = info.min_driver_version();
  e.registers = k->registers;
  e.static_shared = k->static_shared;
  e.dynamic_shared = k->dynamic_shared;
  e.max_threads = k->max_threads;
  return e;
}

}  // namespace

Result<std::vector<std::byte>> pack_bundle(const Catalog& catalog, const PackOptions& options) {
  Manifest manifest;
  std::vector<std::vector<std::byte>> cubins;
  for (const CatalogVariant& v : catalog.variants) {
    const std::filesystem::path path = options.cubin_dir / (v.id + ".cubin");
    auto cubin = read_file(path);
    if (!cubin) return std::unexpected(std::move(cubin).error().context(fmt::format("catalog variant {} has no cubin", v.id)));
    auto entry = describe(v, *cubin);
    if (!entry) return std::unexpected(std::move(entry).error().context(fmt::format("{} ({})", path.string(), v.id)));
    if (manifest.toolkit.empty()) manifest.toolkit = read_cubin(*cubin)->tool_version;
    manifest.entries.push_back(std::move(*entry));
    cubins.push_back(std::move(*cubin));
  }
  return assemble_bundle(std::move(manifest), cubins, options.zstd_level);
}

Result<std::vector<std::byte>> assemble_bundle(Manifest manifest, const std::vector<std::vector<std::byte>>& cubins, int zstd_level) {
  if (cubins.size() != manifest.entries.size())
    return fail(Errc::invalid_argument, fmt::format("{} manifest entries for {} cubins", manifest.entries.size(), cubins.size()));
  manifest.generator = "cubinrt 0.1.0";
  manifest.min_driver_version = 0;
  std::vector<std::byte> payload;
  for (size_t i = 0; i < cubins.size(); ++i) {
    ManifestEntry& entry = manifest.entries[i];
    const std::vector<std::byte>& cubin = cubins[i];
    std::vector<std::byte> frame(ZSTD_compressBound(cubin.size()));
    const size_t n = ZSTD_compress(frame.data(), frame.size(), cubin.data(), cubin.size(), zstd_level);
    if (ZSTD_isError(n)) return fail(Errc::io, fmt::format("{}: zstd: {}", entry.id, ZSTD_getErrorName(n)));
    entry.sha256 = sha256_hex(cubin);
    entry.size = cubin.size();
    entry.offset = payload.size();
    entry.compressed_size = n;
    payload.insert(payload.end(), frame.begin(), frame.begin() + static_cast<ptrdiff_t>(n));
    manifest.min_driver_version = std::max(manifest.min_driver_version, entry.min_driver_version);
  }

  const std::string json = manifest.to_json();
  std::vector<std::byte> out(kBundleHeaderSize);
  const uint64_t manifest_offset = kBundleHeaderSize;
  const uint64_t payload_offset = (manifest_offset + json.size() + 63) / 64 * 64;
  std::memcpy(out.data(), kBundleMagic, sizeof kBundleMagic);
  put<uint32_t>(out, 8, kBundleFormatVersion);
  put<uint32_t>(out, 12, kBundleHeaderSize);
  put<uint64_t>(out, 16, manifest_offset);
  put<uint64_t>(out, 24, json.size());
  put<uint64_t>(out, 32, payload_offset);
  put<uint64_t>(out, 40, payload.size());
  unsigned int len = 0;
  EVP_Digest(json.data(), json.size(), reinterpret_cast<unsigned char*>(out.data() + 48), &len, EVP_sha256(), nullptr);
  const auto* j = reinterpret_cast<const std::byte*>(json.data());
  out.insert(out.end(), j, j + json.size());
  out.resize(payload_offset);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

}  // namespace cubinrt
