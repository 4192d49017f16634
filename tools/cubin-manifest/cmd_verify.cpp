// verify [BUNDLE]: every entry's sha256, decompression, ELF validity, manifest-cubin agreement and
// ABI layout. Exit 0 only when all pass; one line per failure.
#include <fmt/format.h>

#include "cli.hpp"
#include "bundle/verify.hpp"

namespace cli {

void add_verify(CLI::App& app, Global& g) {
  auto* cmd = app.add_subcommand("verify", "Check a bundle statically: sha256, decompression, ELF, manifest vs cubin, ABI");
  auto path = std::make_shared<std::string>();
  cmd->add_option("bundle", *path, "Bundle file (default: --bundle, else the embedded bundle)");
  cmd->callback([&g, path] {
    auto b = open_bundle(path->empty() ? g.bundle : *path);
    if (!b) return void(exit_code = report_error(g, b.error()));
    std::vector<cubinrt::VerifyFailure> warnings;
    const auto failures = cubinrt::verify_bundle(**b, &warnings);
    const size_t n = (*b)->manifest().entries.size();
    exit_code = failures.empty() ? kOk : kFailed;
    if (g.json) {
      nlohmann::ordered_json f = nlohmann::ordered_json::array(), w = nlohmann::ordered_json::array();
      for (const auto& x : failures) f.push_back({{"entry", x.entry}, {"message", x.message}});
      for (const auto& x : warnings) w.push_back({{"entry", x.entry}, {"message", x.message}});
      return print_json({{"bundle", (*b)->name()}, {"ok", failures.empty()}, {"entries", n}, {"failures", f}, {"warnings", w}});
    }
    // Well formed but not understood (a newer toolkit's records): read, skipped, said, not failed.
    for (const auto& x : warnings) fmt::print("warning: {}: {}\n", x.entry, x.message);
    for (const auto& x : failures) fmt::print("{} {}\n", red("FAIL"), x.message);
    if (failures.empty()) fmt::print("{} {}: all {} entries verified (sha256, zstd, ELF, manifest vs cubin, ABI layout)\n", green("OK"), (*b)->name(), n);
    else fmt::print("{}: {} of {} entries failed\n", (*b)->name(), failures.size(), n);
  });
}

}  // namespace cli
