// pack: the bundle writer the build uses (catalog + directory of cubins -> bundle file).
#include <fmt/format.h>

#include "cli.hpp"

namespace cli {

void add_pack(CLI::App& app, Global& g) {
  auto* cmd = app.add_subcommand("pack", "Pack a catalog's cubins into a bundle");
  struct Opts {
    std::string catalog, cubin_dir, output;
    int level = 12;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--catalog", o->catalog, "Kernel catalog (JSON)")->required();
  cmd->add_option("--cubin-dir", o->cubin_dir, "Directory holding <variant id>.cubin for every variant")->required();
  cmd->add_option("--output", o->output, "Bundle file to write")->required();
  cmd->add_option("--zstd-level", o->level, "zstd compression level")->check(CLI::Range(1, 19));
  cmd->callback([&g, o] {
    auto catalog = cubinrt::Catalog::load(o->catalog);
    if (!catalog) return void(exit_code = report_error(g, catalog.error()));
    auto bytes = cubinrt::pack_bundle(*catalog, {o->cubin_dir, o->level});
    if (!bytes) return void(exit_code = report_error(g, bytes.error()));
    if (auto ok = cubinrt::write_file(o->output, *bytes); !ok) return void(exit_code = report_error(g, ok.error()));
    if (g.json) return print_json({{"ok", true}, {"output", o->output}, {"entries", catalog->variants.size()}, {"size", bytes->size()}});
    fmt::print("packed {} cubins into {} ({})\n", catalog->variants.size(), o->output, human_bytes(bytes->size()));
  });
}

}  // namespace cli
