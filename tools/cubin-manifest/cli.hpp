// What every cubin-manifest subcommand shares: options, the bundle to work on, output helpers.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bundle/bundle.hpp"
#include "common/file_io.hpp"
#include "pack/pack.hpp"

namespace cli {

// Exit codes, documented in docs/cli.md.
inline constexpr int kOk = 0;
inline constexpr int kFailed = 1;    // a check failed, or bad input
inline constexpr int kUsage = 2;     // the command line was wrong
inline constexpr int kNoGpu = 3;     // selfcheck: no GPU here; every static step passed

struct Global {
  bool json = false;
  std::string bundle;  // path, or empty for the embedded default
};

// The embedded default bundle (cubin-manifest) or an error (the stage-0 pack tool has none).
cubinrt::Result<cubinrt::Bundle> default_bundle();
cubinrt::Result<std::shared_ptr<const cubinrt::Bundle>> open_bundle(const std::string& path);

// Prints an error in one line to stderr (or as JSON on stdout) and returns kFailed.
int report_error(const Global& g, const cubinrt::Error& e);
void print_json(const nlohmann::ordered_json& j);

// Colour only when stdout is a terminal.
std::string green(std::string_view s);
std::string red(std::string_view s);
std::string bold(std::string_view s);

// A plain-text table: column widths fitted to the cells.
std::string table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

nlohmann::ordered_json entry_json(const cubinrt::ManifestEntry& e);
std::string human_bytes(uint64_t n);

void add_list(CLI::App& app, Global& g);
void add_show(CLI::App& app, Global& g);
void add_verify(CLI::App& app, Global& g);
void add_select(CLI::App& app, Global& g);
void add_diff(CLI::App& app, Global& g);
void add_pack(CLI::App& app, Global& g);
void add_selfcheck(CLI::App& app, Global& g);

// Set by the subcommand's callback; main returns it.
inline int exit_code = kOk;

}  // namespace cli
