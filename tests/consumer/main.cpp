// Links the installed cubinrt, verifies its embedded bundle and asks the runtime for a kernel.
// Exit 0 when the bundle verifies and the runtime either starts or refuses with a clear error.
#include <cstdio>

#include <cubinrt/paged_decode.hpp>
#include <cubinrt/runtime.hpp>
#include <cubinrt/verify.hpp>

int main() {
  auto bundle = cubinrt::Bundle::embedded();
  if (!bundle) return std::printf("embedded bundle: %s\n", bundle.error().message.c_str()), 1;
  const auto failures = cubinrt::verify_bundle(*bundle);
  std::printf("embedded bundle: %zu entries, %zu failures\n", bundle->manifest().entries.size(), failures.size());
  if (!failures.empty() || bundle->manifest().entries.empty()) return 1;
  cubinrt::RuntimeOptions o;
  o.required = {{128}, {cubinrt::Dtype::bf16}, {cubinrt::Dtype::fp8_e4m3}, {16}};
  auto rt = cubinrt::Runtime::create(o);
  if (!rt) {
    std::printf("runtime: %s\n", rt.error().message.c_str());
    return rt.error().code == cubinrt::Errc::no_driver || rt.error().code == cubinrt::Errc::no_device ? 0 : 1;
  }
  std::printf("runtime: %s, %zu kernels loaded\n", (*rt)->device().str().c_str(), (*rt)->loaded().size());
  return 0;
}
