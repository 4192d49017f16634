// show ENTRY | FILE.cubin | FILE.fatbin | OBJECT: everything the reader knows.
#include <cxxabi.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli.hpp"
#include "common/byte_view.hpp"
#include "common/version.hpp"
#include "cubin/cubin.hpp"
#include "fatbin/fatbin.hpp"

namespace cli {

namespace {

// A C++ kernel's name as its source spells it ("" for C names and anything that does not demangle).
std::string demangle(const std::string& name) {
  if (!name.starts_with("_Z")) return "";
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 && out ? std::string(out.get()) : std::string();
}

const char* binding_name(cubinrt::KernelInfo::Binding b) {
  using B = cubinrt::KernelInfo::Binding;
  return b == B::local ? "local" : b == B::weak ? "weak" : "global";
}

// Shared memory the driver reserves in every block on sm_90 and later (its
// CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK): not the kernel's, so not in its static
// shared figure (as ptxas -v), but in cuobjdump's SHARED.
uint32_t reserved_shared(const cubinrt::CubinInfo& c) { return c.arch.major >= 9 ? 1024 : 0; }

nlohmann::ordered_json cubin_json(const cubinrt::CubinInfo& c) {
  nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
  for (const auto& k : c.kernels) {
    nlohmann::ordered_json params = nlohmann::ordered_json::array();
    for (const auto& p : k.params) params.push_back({{"ordinal", p.ordinal}, {"offset", p.offset}, {"size", p.size}});
    const std::string demangled = demangle(k.name);
    kernels.push_back({{"name", k.name}, {"demangled", demangled.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(demangled)},
                       {"binding", binding_name(k.binding)}, {"registers", k.registers}, {"max_reg_count", k.max_reg_count},
                       {"static_shared", k.static_shared}, {"reserved_shared", reserved_shared(c)}, {"dynamic_shared", k.dynamic_shared}, {"waits_on_prior_grids", k.waits_on_prior_grids}, {"local_bytes", k.local_bytes}, {"max_threads", k.max_threads},
                       {"max_ntid", k.max_ntid}, {"req_ntid", k.req_ntid}, {"cluster", k.cluster},
                       {"explicit_cluster", k.explicit_cluster}, {"num_barriers", k.num_barriers}, {"code_size", k.code_size},
                       {"param_base", k.param_base}, {"param_bytes", k.param_bytes}, {"params", params}});
  }
  // 0 is "the cubin does not say": null, not a version 0.0.
  const nlohmann::ordered_json toolkit = c.toolkit_version ? nlohmann::ordered_json(c.toolkit_version) : nlohmann::ordered_json(nullptr);
  const nlohmann::ordered_json min_driver = c.toolkit_version ? nlohmann::ordered_json(c.min_driver_version()) : nlohmann::ordered_json(nullptr);
  return {{"abi_version", c.abi_version}, {"e_flags", fmt::format("{:#010x}", c.e_flags)}, {"arch", c.arch.str()},
          {"virtual_sm", c.virtual_sm}, {"toolkit_version", toolkit}, {"tool", c.tool_name},
          {"tool_version", c.tool_version}, {"tool_options", c.tool_options}, {"min_driver_version", min_driver},
          {"kernels", kernels}, {"warnings", c.warnings}};
}

std::string toolkit_text(const cubinrt::CubinInfo& c) {
  return c.toolkit_version ? fmt::format("{}.{}", c.toolkit_version / 10, c.toolkit_version % 10) : std::string("unknown");
}

void print_cubin(const cubinrt::CubinInfo& c) {
  fmt::print("arch {}  (ELF ABI v{}, e_flags {:#010x}, virtual sm_{}, toolkit {})\n", bold(c.arch.str()), c.abi_version, c.e_flags,
             c.virtual_sm, toolkit_text(c));
  if (!c.tool_name.empty()) fmt::print("built by {}: {}; options '{}'\n", c.tool_name, c.tool_version, c.tool_options);
  for (const std::string& w : c.warnings) fmt::print("warning: {}\n", w);
  for (const auto& k : c.kernels) {
    const std::string demangled = demangle(k.name);
    fmt::print("\nkernel {}{}\n", bold(k.name), k.binding == cubinrt::KernelInfo::Binding::global ? "" : fmt::format(" ({})", binding_name(k.binding)));
    if (!demangled.empty()) fmt::print("  {}\n", demangled);
    fmt::print("  registers {} (max {}), static shared {} B{}, dynamic shared {} B, local {} B/thread, max threads {}, barriers {}, code {} B\n",
               k.registers, k.max_reg_count, k.static_shared, reserved_shared(c) ? " (+1 KiB the driver reserves, which cuobjdump counts)" : "",
               k.dynamic_shared, k.local_bytes, k.max_threads, k.num_barriers, k.code_size);
    if (k.waits_on_prior_grids) fmt::print("  waits for the previous kernel on its stream (may be launched to overlap it)\n");
    if (k.req_ntid[0]) fmt::print("  required block {}\n", fmt::join(k.req_ntid, "x"));
    if (k.cluster[0]) fmt::print("  cluster {}{}\n", fmt::join(k.cluster, "x"), k.explicit_cluster ? " (explicit)" : "");
    fmt::print("  {} parameters, {} bytes at constant bank offset {:#x}\n", k.params.size(), k.param_bytes, k.param_base);
    std::vector<std::vector<std::string>> rows;
    for (const auto& p : k.params) rows.push_back({"  " + std::to_string(p.ordinal), std::to_string(p.offset), std::to_string(p.size)});
    if (!rows.empty()) fmt::print("{}", table({"  ordinal", "offset", "size"}, rows));
  }
}

enum class FileKind { cubin, fatbin, object, other };

// By the first bytes: a CUDA ELF is a cubin, the fatbin magic a fatbin, any other ELF a host
// object that may carry one. Each then gets its own reader, so a refusal has one cause.
FileKind file_kind(std::span<const std::byte> bytes) {
  const cubinrt::detail::ByteView v(bytes, cubinrt::Errc::corrupt_cubin);
  if (cubinrt::looks_like_fatbin(bytes)) return FileKind::fatbin;
  if (v.read<uint32_t>(0, "magic").value_or(0) != 0x464c457f) return FileKind::other;
  return v.read<uint16_t>(18, "e_machine").value_or(0) == 190 ? FileKind::cubin : FileKind::object;
}

// Each entry as it is read (one decompressed entry in memory at a time); the exit code says
// whether every entry could be read.
void show_container(const Global& g, const std::string& path, std::span<const std::byte> bytes) {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  std::vector<std::string> failed;
  auto listed = cubinrt::for_each_fatbin_entry(bytes, [&](cubinrt::FatbinEntry& e) {
    nlohmann::ordered_json ej = {{"offset", e.offset}, {"kind", e.kind_name()}, {"arch", e.arch.str()}, {"compression", e.compression},
                                 {"stored_size", e.stored_size}, {"size", e.size}, {"flags", fmt::format("{:#x}", e.flags)}};
    if (!g.json) fmt::print("{} entry {} at offset {} ({}, {} stored, {} bytes)\n", bold(e.kind_name()), e.arch.str(), e.offset, e.compression,
                            e.stored_size, e.size);
    if (!e.error.empty()) {
      failed.push_back(fmt::format("entry at offset {} ({} {}): {}", e.offset, e.kind_name(), e.arch.str(), e.error));
      ej["error"] = e.error;
      if (!g.json) fmt::print("  {}: {}\n\n", red("could not be read"), e.error);
    } else if (e.cubin) {
      ej["cubin"] = cubin_json(*e.cubin);
      if (!g.json) print_cubin(*e.cubin), fmt::print("\n");
    } else {
      ej["note"] = e.explanation();
      if (!g.json) fmt::print("  {}\n\n", e.explanation());
    }
    j.push_back(std::move(ej));
  });
  if (!listed) return void(exit_code = report_error(g, std::move(listed).error().context(path)));
  if (g.json) print_json({{"file", path}, {"fatbin_entries", j}, {"unreadable_entries", failed.size()}});
  if (failed.empty()) return;
  exit_code = kFailed;
  if (!g.json)
    fmt::print(stderr, "cubin-manifest: {}: {} of {} entries could not be read: {}\n", path, failed.size(), *listed, fmt::join(failed, "; "));
}

}  // namespace

void add_show(CLI::App& app, Global& g) {
  auto* cmd = app.add_subcommand("show", "Everything known about one bundle entry, cubin or fatbin");
  auto what = std::make_shared<std::string>();
  cmd->add_option("target", *what, "A bundle entry id, or a .cubin, .fatbin or object file")->required();
  cmd->callback([&g, what] {
    // An entry id unless a file of that name exists (a name the OS refuses is not a file).
    std::error_code ec;
    if (std::filesystem::exists(*what, ec)) {
      auto bytes = cubinrt::read_file(*what);
      if (!bytes) return void(exit_code = report_error(g, bytes.error()));
      switch (file_kind(*bytes)) {
        case FileKind::fatbin:
        case FileKind::object: return show_container(g, *what, *bytes);
        case FileKind::other: {
          std::string head;
          for (size_t i = 0; i < std::min<size_t>(4, bytes->size()); ++i) head += fmt::format(" {:02x}", static_cast<unsigned>((*bytes)[i]));
          return void(exit_code = report_error(g, {cubinrt::Errc::corrupt_cubin,
                                                   fmt::format("{}: not a cubin, a fatbin or an ELF object (it starts with{})", *what,
                                                               head.empty() ? " nothing: it is empty" : head)}));
        }
        case FileKind::cubin: break;
      }
      auto c = cubinrt::read_cubin(*bytes);
      if (!c) return void(exit_code = report_error(g, std::move(c).error().context(*what)));
      if (g.json) return print_json({{"file", *what}, {"cubin", cubin_json(*c)}});
      fmt::print("{}: cubin, {} bytes, sha256 {}\n", *what, bytes->size(), cubinrt::sha256_hex(*bytes).value_or("(sha256 failed)"));
      return print_cubin(*c);
    }
    auto b = open_bundle(g.bundle);
    if (!b) return void(exit_code = report_error(g, b.error()));
    const auto* e = (*b)->manifest().find(*what);
    if (e == nullptr)
      return void(exit_code = report_error(g, {cubinrt::Errc::not_in_bundle, fmt::format("'{}' is neither a file nor an entry of bundle {}", *what, (*b)->name())}));
    auto bytes = (*b)->cubin(*e);
    if (!bytes) return void(exit_code = report_error(g, bytes.error()));
    auto c = cubinrt::read_cubin(*bytes);
    if (!c) return void(exit_code = report_error(g, c.error()));
    if (g.json) return print_json({{"entry", entry_json(*e)}, {"cubin", cubin_json(*c)}});
    fmt::print("entry {} of {}\n  {} {} (ABI {} v{}), {} bytes ({} compressed), sha256 {}\n  minimum driver CUDA {}\n", bold(e->id),
               (*b)->name(), e->key.family, e->key.str(), e->abi_name, e->abi_version, e->size, e->compressed_size, e->sha256,
               cubinrt::cuda_version_text(e->min_driver_version));
    print_cubin(*c);
  });
}

}  // namespace cli
