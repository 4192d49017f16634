// cubin-manifest: inspect, verify and pack cubinrt bundles, cubins and fatbins.
#include <fmt/format.h>

#include "cli.hpp"

int main(int argc, char** argv) {
  CLI::App app{"cubin-manifest: inspect, verify, select from and pack cubinrt kernel bundles"};
  app.require_subcommand(1);
  // Global options are taken where people type them: before the subcommand or after it
  // (`cubin-manifest show --json FILE`); the subcommands, made below, inherit this.
  app.fallthrough();
  cli::Global g;
  app.add_flag("--json", g.json, "Write JSON instead of tables (every subcommand)");
  app.add_option("--bundle", g.bundle, "Bundle file to work on (default: the embedded default bundle)");
  cli::add_list(app, g);
  cli::add_show(app, g);
  cli::add_verify(app, g);
  cli::add_select(app, g);
  cli::add_diff(app, g);
  cli::add_pack(app, g);
  cli::add_selfcheck(app, g);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? cli::kOk : cli::kUsage;
  }
  return cli::exit_code;
}
