// Expands the catalog's groups (cross products of axes) into variants.
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cubinrt/bundle.hpp"
#include "cubinrt/catalog.hpp"
#include "common/try.hpp"

namespace cubinrt {

namespace {

using nlohmann::json;

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

Result<Catalog> expand(const json& doc) {
  if (doc.value("format", "") != "cubinrt-catalog" || doc.value("version", 0) != 1)
    return fail(Errc::corrupt_manifest, "not a cubinrt-catalog version 1 document");
  Catalog catalog;
  std::set<std::string> ids;
  for (const json& fam : doc.at("families")) {
    const std::string family = fam.at("name");
    const std::string symbol_pattern = fam.at("symbol");
    const std::string abi_name = fam.at("abi").at("name");
    const uint32_t abi_version = fam.at("abi").at("version");
    for (const json& g : fam.at("groups")) {
      for (const std::string arch_text : g.at("arch")) {
        const Arch arch = CUBINRT_TRY(Arch::parse(arch_text));
        for (const uint32_t hd : g.at("head_dim")) {
          for (const std::string q_text : g.at("q_dtype")) {
            const Dtype q = CUBINRT_TRY(parse_dtype(q_text));
            for (const std::string kv_text : g.at("kv_dtype")) {
              const Dtype kv = kv_text == "same_as_q" ? q : CUBINRT_TRY(parse_dtype(kv_text));
              for (const uint32_t ps : g.at("page_size")) {
                CatalogVariant v;
                v.arch = arch;
                v.key = {family, hd, q, kv, ps};
                v.id = variant_id(family, arch, v.key);
                std::string sym = replace_all(symbol_pattern, "{head_dim}", std::to_string(hd));
                sym = replace_all(sym, "{q_dtype}", dtype_name(q));
                sym = replace_all(sym, "{kv_dtype}", dtype_name(kv));
                v.symbol = replace_all(sym, "{page_size}", std::to_string(ps));
                v.abi_name = abi_name;
                v.abi_version = abi_version;
                if (!ids.insert(v.id).second) return fail(Errc::corrupt_manifest, fmt::format("variant {} is declared twice", v.id));
                catalog.variants.push_back(std::move(v));
              }
            }
          }
        }
      }
    }
  }
  return catalog;
}

}  // namespace

std::string variant_id(std::string_view family, const Arch& arch, const KernelKey& key) {
  return fmt::format("{}.{}.hd{}.{}.{}.p{}", family, arch.str(), key.head_dim, dtype_name(key.q_dtype),
                     dtype_name(key.kv_dtype), key.page_size);
}

Result<Catalog> Catalog::parse(std::string_view text, std::string_view source_name) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return fail(Errc::corrupt_manifest, fmt::format("catalog {}: not valid JSON", source_name));
  try {
    auto catalog = expand(doc);
    if (!catalog) return std::unexpected(std::move(catalog).error().context(fmt::format("catalog {}", source_name)));
    return catalog;
  } catch (const json::exception& e) {
    return fail(Errc::corrupt_manifest, fmt::format("catalog {}: {}", source_name, e.what()));
  }
}

Result<Catalog> Catalog::load(const std::filesystem::path& path) {
  const auto bytes = CUBINRT_TRY(read_file(path));
  return parse(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path.string());
}

}  // namespace cubinrt
