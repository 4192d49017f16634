// Makes the bundle and manifest seeds from a real cubin: make_fuzz_seeds CUBIN BUNDLE MANIFEST.
#include <cstdio>

#include "bundle/bundle.hpp"
#include "common/file_io.hpp"
#include "pack/pack.hpp"
#include "cubin/cubin.hpp"

int main(int argc, char** argv) {
  if (argc != 4) return std::fprintf(stderr, "usage: make_fuzz_seeds CUBIN BUNDLE MANIFEST\n"), 2;
  auto cubin = cubinrt::read_file(argv[1]);
  if (!cubin) return std::fprintf(stderr, "%s\n", cubin.error().message.c_str()), 1;
  auto info = cubinrt::read_cubin(*cubin);
  if (!info) return std::fprintf(stderr, "%s\n", info.error().message.c_str()), 1;
  cubinrt::Manifest m;
  m.toolkit = info->tool_version;
  cubinrt::ManifestEntry e;
  e.id = "probe";
  e.arch = info->arch;
  e.key = {"probe", {{"size", "64"}, {"dtype", "bf16"}}};
  e.symbol = info->kernels.at(0).name;
  e.abi_name = "none";
  e.abi_version = 1;
  e.toolkit_version = info->toolkit_version;
  e.min_driver_version = info->min_driver_version();
  e.registers = info->kernels[0].registers;
  m.entries.push_back(e);
  auto bundle = cubinrt::assemble_bundle(m, std::vector<std::vector<std::byte>>{*cubin});
  if (!bundle) return std::fprintf(stderr, "%s\n", bundle.error().message.c_str()), 1;
  if (!cubinrt::write_file(argv[2], *bundle)) return 1;
  const std::string json = m.to_json();
  return cubinrt::write_file(argv[3], std::as_bytes(std::span(json))) ? 0 : 1;
}
