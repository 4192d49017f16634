// read_cubin: the ELF tables, then the NVIDIA notes and attributes, validated as they are read.
#include <algorithm>
#include <optional>
#include <set>

#include "cubin/elf.hpp"
#include "cubin/nv_info.hpp"
#include "cubin/cubin.hpp"

namespace cubinrt {

using namespace detail;

namespace {


struct Note {
  uint32_t type;
  ByteView desc;
};

// Notes owned by "NVIDIA Corp" in one SHT_NOTE section.
Result<std::vector<Note>> parse_notes(const ByteView& s, std::string_view section) {
  std::vector<Note> notes;
  uint64_t at = 0;
  while (at + 12 <= s.size()) {
    const auto namesz = CUBINRT_TRY(s.read<uint32_t>(at, "note namesz"));
    const auto descsz = CUBINRT_TRY(s.read<uint32_t>(at + 4, "note descsz"));
    const auto type = CUBINRT_TRY(s.read<uint32_t>(at + 8, "note type"));
    const uint64_t name_at = at + 12, desc_at = name_at + ((uint64_t{namesz} + 3) & ~uint64_t{3});
    const ByteView name = CUBINRT_TRY(s.sub(name_at, namesz, fmt::format("{} note name", section)));
    const ByteView desc = CUBINRT_TRY(s.sub(desc_at, descsz, fmt::format("{} note description", section)));
    if (CUBINRT_TRY(name.cstr(0, "note owner")) == "NVIDIA Corp") notes.push_back({type, desc});
    at = desc_at + ((uint64_t{descsz} + 3) & ~uint64_t{3});
  }
  return notes;
}

Status read_notes(const ElfFile& elf, CubinInfo& info) {
  if (const Section* s = elf.find(".note.nv.cuinfo")) {
    for (const Note& n : CUBINRT_TRY(parse_notes(CUBINRT_TRY(elf.contents(*s)), s->name))) {
      if (n.type != 1000) continue;
      // A well-formed note of another layout (shorter than this build reads) is skipped, not
      // refused: the toolkit is then unknown.
      if (n.desc.size() < 8) {
        info.warnings.push_back(fmt::format("{}: a {}-byte cuinfo note (8 or more expected); virtual SM and toolkit unknown", s->name, n.desc.size()));
        continue;
      }
      info.virtual_sm = CUBINRT_TRY(n.desc.read<uint16_t>(2, "cuinfo virtual SM"));
      info.toolkit_version = CUBINRT_TRY(n.desc.read<uint32_t>(4, "cuinfo toolkit version"));
    }
  }
  if (const Section* s = elf.find(".note.nv.tkinfo")) {
    for (const Note& n : CUBINRT_TRY(parse_notes(CUBINRT_TRY(elf.contents(*s)), s->name))) {
      if (n.type != 2000) continue;
      if (n.desc.size() < 24) {
        info.warnings.push_back(fmt::format("{}: a {}-byte tkinfo note (24 or more expected); tool name, version and options unknown", s->name,
                                            n.desc.size()));
        continue;
      }
      const ByteView blob = CUBINRT_TRY(n.desc.sub(24, n.desc.size() - std::min<uint64_t>(24, n.desc.size()), "tkinfo strings"));
      auto field = [&](uint32_t index, std::string_view what) -> Result<std::string> {
        const auto offset = CUBINRT_TRY(n.desc.read<uint32_t>(uint64_t{index} * 4, "tkinfo field"));
        return std::string(CUBINRT_TRY(blob.cstr(offset, what)));
      };
      info.tool_name = CUBINRT_TRY(field(2, "tkinfo tool name"));
      info.tool_version = CUBINRT_TRY(field(3, "tkinfo tool version"));
      info.tool_options = CUBINRT_TRY(field(5, "tkinfo options"));
    }
  }
  return {};
}

Status read_arch(const ElfFile& elf, CubinInfo& info) {
  const uint32_t flags = elf.header.flags;
  bool accel = false;
  uint32_t sm = 0;
  if (elf.header.abi_version == 7) {
    sm = flags & 0xff;
    info.virtual_sm = (flags >> 16) & 0xff;
    accel = (flags & 0x800) != 0;
  } else {
    sm = (flags >> 8) & 0xff;
    accel = (flags & 0x8) != 0;
  }
  // Any SM an sm_NNN spells is an architecture, known to the selection rules or not (a newer
  // ptxas's sm_107 is read, not refused); below 10 no architecture exists.
  if (sm < 10) return fail(Errc::corrupt_cubin, fmt::format("rule elf-sm: e_flags {:#010x} name SM {}, which is no GPU architecture", flags, sm));
  if (const Section* s = elf.find(".nv.compat")) {
    for (const NvInfoRecord& r : CUBINRT_TRY(parse_nv_info(CUBINRT_TRY(elf.contents(*s)), s->name)))
      if (r.attribute == kCompatAcceleratorTarget && r.format == 2 && r.value == 1) accel = true;
  }
  Arch::Variant variant = accel ? Arch::Variant::accel : Arch::Variant::plain;
  // 'f' leaves no mark but the ptxas command line.
  if (!accel && info.tool_options.find(fmt::format("-arch sm_{}f", sm)) != std::string::npos) variant = Arch::Variant::family;
  info.arch = Arch::from_sm(sm, variant);
  return {};
}

struct GlobalAttrs {
  std::vector<std::pair<uint32_t, uint32_t>> regcount, frame_size;  // symbol index -> value
};

Result<GlobalAttrs> read_global_info(const ElfFile& elf, std::vector<std::string>& warnings) {
  GlobalAttrs g;
  const Section* s = elf.find(".nv.info");
  if (s == nullptr) return g;
  for (const NvInfoRecord& r : CUBINRT_TRY(parse_nv_info(CUBINRT_TRY(elf.contents(*s)), s->name, &warnings))) {
    if (r.format != 4 || (r.attribute != kRegCount && r.attribute != kFrameSize)) continue;
    const uint32_t sym = CUBINRT_TRY(r.word(0)), value = CUBINRT_TRY(r.word(1));
    (r.attribute == kRegCount ? g.regcount : g.frame_size).emplace_back(sym, value);
  }
  return g;
}

const Section* section_for(const ElfFile& elf, std::string_view prefix, std::string_view kernel) {
  for (const Section& s : elf.sections)
    if (s.name.size() == prefix.size() + kernel.size() && s.name.starts_with(prefix) && s.name.ends_with(kernel)) return &s;
  return nullptr;
}

// The most shared memory any supported GPU gives one block (sm_90 and sm_100 opt-in: 227 KiB).
constexpr uint32_t kMaxSharedPerBlock = 227 * 1024;

// A statement a kernel makes about itself: a 4-byte device object named <prefix><kernel>, read by
// name (a zero one lives in NOBITS .nv.global); nullopt when the cubin has none. `rule` names the
// check in errors.
Result<std::optional<uint32_t>> read_statement(const ElfFile& elf, std::string_view prefix, std::string_view kernel, std::string_view rule) {
  std::optional<uint32_t> value;
  for (const Symbol& s : elf.symbols) {
    if (s.name.size() != prefix.size() + kernel.size() || !s.name.starts_with(prefix) || !s.name.ends_with(kernel)) continue;
    if ((s.info & 0xf) != 1 /* OBJECT */ || s.size != 4 || s.shndx == 0 || s.shndx >= elf.sections.size())
      return fail(Errc::corrupt_cubin, fmt::format("rule {}: kernel '{}': {} is not a 4-byte object in a section", rule, kernel, s.name));
    const Section& sec = elf.sections[s.shndx];
    if (sec.type == kShtNobits) {
      if (s.value > sec.size || sec.size - s.value < 4) return fail(Errc::corrupt_cubin, fmt::format("rule {}: kernel '{}': {} lies outside its section", rule, kernel, s.name));
      value = 0;
    } else {
      const ByteView bytes = CUBINRT_TRY(elf.contents(sec));
      value = CUBINRT_TRY(bytes.read<uint32_t>(s.value, s.name));
    }
  }
  return value;
}

// A kernel that takes dynamic shared memory says how much in cubinrt_dynamic_smem_<kernel>;
// absent means none.
Status read_dynamic_shared(const ElfFile& elf, KernelInfo& k) {
  k.dynamic_shared = CUBINRT_TRY(read_statement(elf, "cubinrt_dynamic_smem_", k.name, "dynamic-smem")).value_or(0);
  return {};
}

// A kernel that waits for the kernel before it on the stream ahead of any global access
// (cubins/grid_dependency.cuh) says so with cubinrt_grid_dependency_<kernel> = 1; absent means it
// does not, and any other value is a cubin this reader does not understand.
Status read_grid_dependency(const ElfFile& elf, KernelInfo& k) {
  const std::optional<uint32_t> v = CUBINRT_TRY(read_statement(elf, "cubinrt_grid_dependency_", k.name, "grid-dependency"));
  if (v && *v != 1)
    return fail(Errc::corrupt_cubin, fmt::format("rule grid-dependency: kernel '{}': cubinrt_grid_dependency_{} is {}, not 1", k.name, k.name, *v));
  k.waits_on_prior_grids = v.has_value();
  return {};
}

// A kernel built from a catalog unit states its key in a NUL-terminated device string named
// cubinrt_key_<kernel> ("head_dim=128 q_dtype=bf16 ..."), so a manifest that gives one kernel of a
// many-kernel cubin another kernel's key is caught. Absent in one-kernel cubins of other builds.
constexpr uint64_t kMaxKeyBytes = 512;
Status read_key(const ElfFile& elf, KernelInfo& k) {
  constexpr std::string_view kPrefix = "cubinrt_key_";
  for (const Symbol& s : elf.symbols) {
    if (s.name.size() != kPrefix.size() + k.name.size() || !s.name.starts_with(kPrefix) || !s.name.ends_with(k.name)) continue;
    auto bad = [&](std::string_view why) { return fail(Errc::corrupt_cubin, fmt::format("rule kernel-key: kernel '{}': {} {}", k.name, s.name, why)); };
    if ((s.info & 0xf) != 1 /* OBJECT */ || s.size < 2 || s.size > kMaxKeyBytes || s.shndx == 0 || s.shndx >= elf.sections.size())
      return bad(fmt::format("is not an object of 2 to {} bytes in a section", kMaxKeyBytes));
    const Section& sec = elf.sections[s.shndx];
    if (sec.type == kShtNobits) return bad("has no contents");
    const ByteView bytes = CUBINRT_TRY(elf.contents(sec));
    const ByteView text = CUBINRT_TRY(bytes.sub(s.value, s.size, s.name));
    const auto chars = text.bytes();
    if (chars.back() != std::byte{0}) return bad("is not NUL-terminated");
    std::string key(reinterpret_cast<const char*>(chars.data()), chars.size() - 1);
    if (key.find('\0') != std::string::npos) return bad("holds a NUL before its end");
    k.key = std::move(key);
  }
  return {};
}

Result<KernelInfo> read_kernel(const ElfFile& elf, const GlobalAttrs& globals, const Symbol& sym, uint32_t sym_index,
                               const CubinInfo& info, std::vector<std::string>& warnings) {
  KernelInfo k;
  k.name = std::string(sym.name);
  if (sym.binding() > 2) return fail(Errc::corrupt_cubin, fmt::format("rule kernel-binding: kernel '{}' has ELF binding {} (local, global or weak expected)", k.name, sym.binding()));
  k.binding = static_cast<KernelInfo::Binding>(sym.binding());
  auto bad = [&](std::string_view rule, std::string msg) {
    return fail(Errc::corrupt_cubin, fmt::format("rule {}: kernel '{}': {}", rule, k.name, msg));
  };
  const Section* text = section_for(elf, ".text.", sym.name);
  if (text == nullptr || sym.shndx >= elf.sections.size() || &elf.sections[sym.shndx] != text)
    return bad("kernel-sections", "its symbol does not point at a .text.<kernel> section");
  const uint32_t text_index = static_cast<uint32_t>(text - elf.sections.data());
  k.code_size = text->size;

  const Section* info_sec = section_for(elf, ".nv.info.", sym.name);
  if (info_sec == nullptr || info_sec->info != text_index)
    return bad("kernel-sections", "no .nv.info.<kernel> section links to its .text");
  const Section* cbank = section_for(elf, ".nv.constant0.", sym.name);
  if (cbank == nullptr || cbank->info != text_index)
    return bad("kernel-sections", "no .nv.constant0.<kernel> section links to its .text");

  uint32_t cbank_param_size = 0, param_cbank_size = 0;
  bool have_cbank_param_size = false;
  std::vector<uint32_t> exit_offsets;
  for (const NvInfoRecord& r : CUBINRT_TRY(parse_nv_info(CUBINRT_TRY(elf.contents(*info_sec)), info_sec->name, &warnings))) {
    switch (r.attribute) {
      case kKparamInfo: {
        if (r.format != 4 || r.payload.size() != 12) return bad("kparam-record", fmt::format("KPARAM_INFO payload of {} bytes (12 expected)", r.payload.size()));
        const uint32_t packed = CUBINRT_TRY(r.payload.read<uint32_t>(8, "KPARAM packed"));
        k.params.push_back({CUBINRT_TRY(r.payload.read<uint16_t>(4, "KPARAM ordinal")),
                            CUBINRT_TRY(r.payload.read<uint16_t>(6, "KPARAM offset")), packed >> 18});
        break;
      }
      case kKparamInfoV2: {
        // The layout parameter blocks past 4 KiB take (CUDA 12.1+, up to 32 KiB): ordinal and
        // offset as in KPARAM_INFO, the size in the low 24 bits of the third word (the high byte
        // holds flags: 5 on pointers).
        if (r.format != 4 || r.payload.size() != 12) return bad("kparam-record", fmt::format("KPARAM_INFO_V2 payload of {} bytes (12 expected)", r.payload.size()));
        const uint32_t sized = CUBINRT_TRY(r.payload.read<uint32_t>(8, "KPARAM_V2 size"));
        k.params.push_back({CUBINRT_TRY(r.payload.read<uint16_t>(4, "KPARAM_V2 ordinal")),
                            CUBINRT_TRY(r.payload.read<uint16_t>(6, "KPARAM_V2 offset")), sized & 0xffffff});
        break;
      }
      case kCbankParamSize:
        if (r.format != 3) return bad("nv-info-format", "CBANK_PARAM_SIZE is not a half-word record");
        cbank_param_size = r.value;
        have_cbank_param_size = true;
        break;
      case kParamCbank: {
        if (r.format != 4 || r.payload.size() != 8) return bad("nv-info-format", "PARAM_CBANK payload is not 8 bytes");
        const uint32_t packed = CUBINRT_TRY(r.word(1));
        k.param_base = packed & 0xffff;
        param_cbank_size = packed >> 16;
        break;
      }
      case kMaxThreads:
      case kReqNtid:
      case kCtaPerCluster: {
        if (r.format != 4 || r.payload.size() != 12) return bad("nv-info-format", fmt::format("attribute {:#x} payload is not 12 bytes", r.attribute));
        auto& dims = r.attribute == kMaxThreads ? k.max_ntid : r.attribute == kReqNtid ? k.req_ntid : k.cluster;
        for (uint32_t i = 0; i < 3; ++i) dims[i] = CUBINRT_TRY(r.word(i));
        break;
      }
      case kExplicitCluster: k.explicit_cluster = true; break;
      case kNumBarriers: k.num_barriers = r.value; break;
      case kMaxRegCount: k.max_reg_count = r.value; break;
      case kExitInstrOffsets:
        if (r.format != 4) return bad("nv-info-format", "EXIT_INSTR_OFFSETS is not a sized record");
        for (uint32_t i = 0; i * 4 < r.payload.size(); ++i) exit_offsets.push_back(CUBINRT_TRY(r.word(i)));
        break;
      default: break;
    }
  }

  for (const auto& [s, v] : globals.regcount)
    if (s == sym_index) k.registers = v;
  for (const auto& [s, v] : globals.frame_size)
    if (s == sym_index) k.local_bytes = v;
  if (k.registers < 1 || k.registers > 255) return bad("regcount", fmt::format("REGCOUNT is {} (1 to 255 allowed)", k.registers));
  if (k.max_ntid[0] != 0) k.max_threads = k.max_ntid[0] * std::max(1u, k.max_ntid[1]) * std::max(1u, k.max_ntid[2]);
  if (k.max_threads == 0 || k.max_threads > 1024) return bad("max-threads", fmt::format("launch bounds allow {} threads (1 to 1024)", k.max_threads));

  std::ranges::sort(k.params, {}, &ParamInfo::ordinal);
  uint32_t param_end = 0;
  for (size_t i = 0; i < k.params.size(); ++i) {
    const ParamInfo& p = k.params[i];
    if (p.ordinal != i) return bad("kparam-ordinals", fmt::format("parameter ordinals are not 0..{} (found {} at position {})", k.params.size() - 1, p.ordinal, i));
    param_end = std::max(param_end, p.offset + p.size);
  }
  if (!k.params.empty() && !have_cbank_param_size) return bad("kparam-size", "parameters are described but CBANK_PARAM_SIZE is absent");
  k.param_bytes = cbank_param_size;
  if (param_end > cbank_param_size)
    return bad("kparam-size", fmt::format("parameters end at byte {} but CBANK_PARAM_SIZE is {}", param_end, cbank_param_size));
  if (param_cbank_size != cbank_param_size)
    return bad("kparam-size", fmt::format("PARAM_CBANK says {} parameter bytes, CBANK_PARAM_SIZE says {}", param_cbank_size, cbank_param_size));
  if (cbank->size < uint64_t{k.param_base} + cbank_param_size)
    return bad("cbank-size", fmt::format(".nv.constant0 holds {} bytes, less than parameter base {} + {} parameter bytes", cbank->size, k.param_base, cbank_param_size));
  // Instructions are 16 bytes from sm_70 (Volta) on, 8 before (Maxwell and Pascal SASS, as
  // NVIDIA's libraries still ship it for sm_50 and sm_60).
  const uint32_t slot = info.arch.major >= 7 ? 16 : 8;
  for (uint32_t off : exit_offsets)
    if (off >= text->size || off % slot != 0)
      return bad("exit-offsets", fmt::format("exit instruction offset {} is not a {}-byte slot inside its {}-byte .text", off, slot, text->size));

  if (const Section* shared = section_for(elf, ".nv.shared.", sym.name)) {
    const uint64_t reserved = info.arch.major >= 9 && shared->size >= 1024 ? 1024 : 0;
    // Checked before it is narrowed: a corrupt 4 GiB + 2 KiB section is refused, not read as 1 KiB.
    if (shared->size - reserved > kMaxSharedPerBlock)
      return bad("shared-size", fmt::format("{} holds {} bytes of shared memory, more than the {} any GPU gives a block", shared->name,
                                            shared->size, kMaxSharedPerBlock));
    k.static_shared = static_cast<uint32_t>(shared->size - reserved);
  }
  CUBINRT_TRY(read_dynamic_shared(elf, k));
  CUBINRT_TRY(read_grid_dependency(elf, k));
  CUBINRT_TRY(read_key(elf, k));
  if (uint64_t{k.static_shared} + k.dynamic_shared > kMaxSharedPerBlock)
    return bad("shared-size", fmt::format("{} static + {} dynamic bytes of shared memory exceed the {} any GPU gives a block", k.static_shared,
                                          k.dynamic_shared, kMaxSharedPerBlock));
  return k;
}

}  // namespace

const KernelInfo* CubinInfo::kernel(std::string_view name) const {
  for (const KernelInfo& k : kernels)
    if (k.name == name) return &k;
  return nullptr;
}

Result<CubinInfo> read_cubin(std::span<const std::byte> bytes) {
  const ElfFile elf = CUBINRT_TRY(ElfFile::parse(ByteView(bytes, Errc::corrupt_cubin)));
  CubinInfo info;
  info.abi_version = elf.header.abi_version;
  info.e_flags = elf.header.flags;
  if (elf.header.abi_version == 7 && elf.header.version >= 10) info.toolkit_version = elf.header.version;
  CUBINRT_TRY(read_notes(elf, info));
  CUBINRT_TRY(read_arch(elf, info));
  const GlobalAttrs globals = CUBINRT_TRY(read_global_info(elf, info.warnings));
  std::vector<std::string> kernel_warnings;
  std::set<std::string_view> seen;
  for (uint32_t i = 0; i < elf.symbols.size(); ++i) {
    const Symbol& sym = elf.symbols[i];
    if (!sym.is_entry()) continue;
    if (!seen.insert(sym.name).second) return fail(Errc::corrupt_cubin, fmt::format("rule kernel-unique: kernel '{}' is defined twice", sym.name));
    info.kernels.push_back(CUBINRT_TRY(read_kernel(elf, globals, sym, i, info, kernel_warnings)));
  }
  info.warnings.insert(info.warnings.end(), kernel_warnings.begin(), kernel_warnings.end());
  return info;
}

}  // namespace cubinrt
