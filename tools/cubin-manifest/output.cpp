#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "cli.hpp"

namespace cli {

namespace {
bool tty() {
  static const bool is_tty = isatty(STDOUT_FILENO) != 0;
  return is_tty;
}
std::string paint(std::string_view s, const char* code) {
  return tty() ? fmt::format("\033[{}m{}\033[0m", code, s) : std::string(s);
}
}  // namespace

std::string green(std::string_view s) { return paint(s, "32"); }
std::string red(std::string_view s) { return paint(s, "31"); }
std::string bold(std::string_view s) { return paint(s, "1"); }

cubinrt::Result<std::shared_ptr<const cubinrt::Bundle>> open_bundle(const std::string& path) {
  auto b = path.empty() ? default_bundle() : cubinrt::Bundle::open(path);
  if (!b) return std::unexpected(std::move(b).error());
  return std::make_shared<const cubinrt::Bundle>(std::move(*b));
}

int report_error(const Global& g, const cubinrt::Error& e) {
  if (g.json) print_json({{"ok", false}, {"error", {{"code", cubinrt::errc_name(e.code)}, {"message", e.message}}}});
  else fmt::print(stderr, "cubin-manifest: {}\n", e.message);
  return kFailed;
}

// Strings from a file (a cubin's toolkit note, a kernel's name) need not be UTF-8: invalid bytes
// print as U+FFFD rather than throwing out of the tool.
void print_json(const nlohmann::ordered_json& j) {
  fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
}

std::string table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w(header.size());
  for (size_t i = 0; i < header.size(); ++i) w[i] = header[i].size();
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
  auto line = [&](const std::vector<std::string>& r) {
    std::string s;
    for (size_t i = 0; i < w.size(); ++i) s += fmt::format("{:<{}}{}", i < r.size() ? r[i] : "", w[i], i + 1 < w.size() ? "  " : "");
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "\n";
  };
  std::string out = bold(line(header));
  for (const auto& r : rows) out += line(r);
  return out;
}

std::string human_bytes(uint64_t n) {
  if (n >= 10 * 1024 * 1024) return fmt::format("{} MiB", n / (1024 * 1024));
  if (n >= 10 * 1024) return fmt::format("{} KiB", n / 1024);
  return fmt::format("{} B", n);
}

nlohmann::ordered_json entry_json(const cubinrt::ManifestEntry& e) { return nlohmann::ordered_json::parse(cubinrt::to_json(e)); }

}  // namespace cli
