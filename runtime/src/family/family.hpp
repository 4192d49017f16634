// What the core knows of a kernel family: its name, the axes of its keys, the parameter ABIs its
// kernels may declare, and how to run its known-answer test. Everything else about a family (its
// plan and launch, its planner, its reference) lives in its own folder, runtime/src/families/<name>/,
// and the core never names it. A family in that folder is found by the build (CMake lists the
// folders); one defined elsewhere (a test's) calls register_family before the runtime is made.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cubinrt/error.hpp"
#include "cubinrt/types.hpp"
#include "family/abi.hpp"

namespace cubinrt {

class Runtime;

// One kernel's known answer: its error against a float64 reference and what it must meet.
struct KnownAnswer {
  double error = 0;      // relative L2 against the reference (the worst of the family's measures)
  double tolerance = 0;
  std::string detail;    // what was measured, for messages ("output 1.2e-03, lse 3.1e-05")
  bool passed() const { return error <= tolerance; }
};

class Family {
 public:
  virtual ~Family() = default;
  virtual std::string_view name() const = 0;
  // The axes of every key, in the catalog's order (the first one names the kernel's size class
  // in messages: head_dim for attention).
  virtual std::span<const std::string_view> axes() const = 0;
  // The parameter ABIs this build's kernels of the family may declare.
  virtual std::span<const AbiLayout* const> abis() const = 0;
  // A known-answer test of each key (all of this family, each servable on the runtime's device):
  // small fixed inputs, the kernel on the device, a float64 reference on the host.
  virtual Result<std::vector<KnownAnswer>> known_answers(const Runtime& runtime, std::span<const KernelKey> keys) const = 0;
};

// The families this process knows: the build's (runtime/src/families/*) and any registered.
std::vector<const Family*> families();
const Family* find_family(std::string_view name);
// Makes a family defined outside runtime/src/families known (tests; a plug-in). Registering the
// same family again does nothing; another family of a known name is refused.
Status register_family(const Family& family);

// A key of a known family with exactly its axes, in its order; or a sentence saying what differs.
Status check_key(const KernelKey& key);

// A numeric axis of a key ("head_dim"), or why it is not one (families read their keys with it).
Result<uint32_t> axis_number(const KernelKey& key, std::string_view axis);

// The layout of a family's ABI, or an error naming what this build knows.
Result<const AbiLayout*> find_abi(std::string_view family, std::string_view abi_name, uint32_t abi_version);

}  // namespace cubinrt
