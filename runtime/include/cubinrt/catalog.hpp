// The kernel catalog (manifest/catalog.json): data that declares every variant the build makes.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "cubinrt/error.hpp"
#include "cubinrt/types.hpp"

namespace cubinrt {

struct CatalogVariant {
  std::string id;      // "paged_decode.sm_90.hd128.bf16.fp8_e4m3.p16", also the cubin's file stem
  Arch arch;
  KernelKey key;
  std::string symbol;  // the kernel entry point the cubin must define
  std::string abi_name;
  uint32_t abi_version = 0;
};

struct Catalog {
  std::vector<CatalogVariant> variants;

  static Result<Catalog> parse(std::string_view json_text, std::string_view source_name);
  static Result<Catalog> load(const std::filesystem::path& path);
};

std::string variant_id(std::string_view family, const Arch& arch, const KernelKey& key);

}  // namespace cubinrt
