// pack_bundle: catalog + real cubins -> bundle bytes. Facts come from each cubin; the catalog only
// says what must be there, and every disagreement between the two is an error.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include <openssl/evp.h>
#include <zstd.h>

#include <map>
#include <memory>
#include <set>

#include "bundle/bundle.hpp"
#include "bundle/bundle_header.hpp"
#include "common/file_io.hpp"
#include "common/try.hpp"
#include "cubin/cubin.hpp"
#include "family/family.hpp"
#include "pack/pack.hpp"

namespace cubinrt {

using namespace detail;

namespace {

template <class T>
void put(std::vector<std::byte>& out, size_t at, T value) {
  std::memcpy(out.data() + at, &value, sizeof value);
}

Result<ManifestEntry> describe(const CatalogVariant& v, const CubinInfo& info) {
  if (!(info.arch == v.arch))
    return fail(Errc::mismatch, fmt::format("the catalog declares {}, the cubin is built for {}", v.arch.str(), info.arch.str()));
  const KernelInfo* k = info.kernel(v.symbol);
  if (k == nullptr) return fail(Errc::mismatch, fmt::format("the cubin defines no kernel '{}'", v.symbol));
  // Every kernel states its key (the unit source defines it); it must be this variant's.
  if (k->key != v.key.str())
    return fail(Errc::mismatch, fmt::format("kernel '{}' states the key '{}', the catalog's variant is '{}'", k->name,
                                            k->key.empty() ? "(none)" : k->key, v.key.str()));
  const AbiLayout* abi = CUBINRT_TRY(find_abi(v.key.family, v.abi_name, v.abi_version));
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
  struct Cubin {
    std::vector<std::byte> bytes;
    CubinInfo info;
    std::set<std::string> symbols;  // the catalog's kernels in it
  };
  std::map<std::filesystem::path, std::unique_ptr<Cubin>> files;  // each file read and parsed once
  Manifest manifest;
  std::vector<const Cubin*> of_entry;
  for (const CatalogVariant& v : catalog.variants) {
    // A family this build knows, taking exactly the variant's axes (the runtime's own key check).
    if (auto ok = check_key(v.key); !ok) return std::unexpected(std::move(ok).error().context(fmt::format("catalog variant {}", v.id)));
    std::filesystem::path path = options.cubin_dir / (v.id + ".cubin");
    if (std::error_code ec; !std::filesystem::exists(path, ec)) path = options.cubin_dir / (v.unit() + ".cubin");
    auto& file = files[path];
    if (!file) {
      auto bytes = read_file(path);
      if (!bytes) return std::unexpected(std::move(bytes).error().context(fmt::format("catalog variant {} has no cubin", v.id)));
      auto info = read_cubin(*bytes);
      if (!info) return std::unexpected(std::move(info).error().context(path.string()));
      file = std::make_unique<Cubin>(Cubin{std::move(*bytes), std::move(*info), {}});
    }
    auto entry = describe(v, file->info);
    if (!entry) return std::unexpected(std::move(entry).error().context(fmt::format("{} ({})", path.string(), v.id)));
    if (manifest.toolkit.empty()) manifest.toolkit = file->info.tool_version;
    file->symbols.insert(v.symbol);
    manifest.entries.push_back(std::move(*entry));
    of_entry.push_back(file.get());
  }
  // A kernel the catalog does not declare would ship unverified and unselectable: refuse it.
  for (const auto& [path, file] : files)
    for (const KernelInfo& k : file->info.kernels)
      if (!file->symbols.contains(k.name))
        return fail(Errc::mismatch, fmt::format("{}: kernel '{}' is not a variant of the catalog", path.string(), k.name));
  std::vector<std::span<const std::byte>> cubins;
  for (const Cubin* c : of_entry) cubins.emplace_back(c->bytes);
  return assemble_bundle(std::move(manifest), cubins, options.zstd_level);
}

Result<std::vector<std::byte>> assemble_bundle(Manifest manifest, const std::vector<std::vector<std::byte>>& cubins, int zstd_level) {
  std::vector<std::span<const std::byte>> spans(cubins.begin(), cubins.end());
  return assemble_bundle(std::move(manifest), spans, zstd_level);
}

Result<std::vector<std::byte>> assemble_bundle(Manifest manifest, const std::vector<std::span<const std::byte>>& cubins, int zstd_level) {
  if (cubins.size() != manifest.entries.size())
    return fail(Errc::invalid_argument, fmt::format("{} manifest entries for {} cubins", manifest.entries.size(), cubins.size()));
  manifest.generator = "cubinrt 0.1.0";
  manifest.min_driver_version = 0;
  std::vector<std::byte> payload;
  std::map<std::string, const ManifestEntry*> stored;  // by sha256: entries of one cubin share its frame
  for (size_t i = 0; i < cubins.size(); ++i) {
    ManifestEntry& entry = manifest.entries[i];
    const std::span<const std::byte> cubin = cubins[i];
    entry.sha256 = CUBINRT_TRY(sha256_hex(cubin));
    entry.size = cubin.size();
    manifest.min_driver_version = std::max(manifest.min_driver_version, entry.min_driver_version);
    if (const auto it = stored.find(entry.sha256); it != stored.end()) {
      entry.offset = it->second->offset;
      entry.compressed_size = it->second->compressed_size;
      continue;
    }
    std::vector<std::byte> frame(ZSTD_compressBound(cubin.size()));
    const size_t n = ZSTD_compress(frame.data(), frame.size(), cubin.data(), cubin.size(), zstd_level);
    if (ZSTD_isError(n)) return fail(Errc::io, fmt::format("{}: zstd: {}", entry.id, ZSTD_getErrorName(n)));
    entry.offset = payload.size();
    entry.compressed_size = n;
    payload.insert(payload.end(), frame.begin(), frame.begin() + static_cast<ptrdiff_t>(n));
    stored.emplace(entry.sha256, &entry);
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
  if (EVP_Digest(json.data(), json.size(), reinterpret_cast<unsigned char*>(out.data() + 48), &len, EVP_sha256(), nullptr) != 1 || len != 32)
    return fail(Errc::io, "sha256 of the manifest: OpenSSL's EVP_Digest failed");
  const auto* j = reinterpret_cast<const std::byte*>(json.data());
  out.insert(out.end(), j, j + json.size());
  out.resize(payload_offset);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

}  // namespace cubinrt
