// A program an engine would write, built against the installed package with one include and one
// link (find_package(cubinrt), cubinrt::cubinrt). It asks the runtime for a kernel: exit 0 when the
// runtime starts, or refuses with a clear error because this machine has no driver or GPU.
#include <cstdio>

#include <cubinrt/paged_decode.hpp>

int main() {
  cubinrt::RuntimeOptions o;
  o.required = cubinrt::DecodeRequirements{{128}, {cubinrt::Dtype::bf16}, {cubinrt::Dtype::fp8_e4m3}, {16}}.keys();
  o.self_check = true;
  auto rt = cubinrt::Runtime::create(o);
  if (!rt) {
    std::printf("runtime: %s\n", rt.error().message.c_str());
    return rt.error().code == cubinrt::Errc::no_driver || rt.error().code == cubinrt::Errc::no_device ? 0 : 1;
  }
  const cubinrt::Support s = (*rt)->supports(cubinrt::decode_key(128, cubinrt::Dtype::bf16, cubinrt::Dtype::fp8_e4m3, 16));
  std::printf("runtime: %s: %s\n", (*rt)->device().str().c_str(), s.reason.c_str());
  return s ? 0 : 1;
}
