// fmt's compiled functions (formatting a float, the locale hooks, vformat), once for the project.
// Debian ships libfmt only as a shared library, and linking it would make libcubinrt.so and the
// Python module need libfmt.so.9 wherever they run; fmt's header-only mode instead compiled these
// functions in every translation unit, over a quarter of a tool file's compile time. So the project
// uses fmt's headers without FMT_HEADER_ONLY (the cubinrt_fmt target) and defines the functions
// here, in cubinrt_base, which every binary that formats links.
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {
// What fmt/format.h declares `extern template` when it is not header-only.
template auto thousands_sep_impl<char>(locale_ref) -> thousands_sep_result<char>;
template auto thousands_sep_impl<wchar_t>(locale_ref) -> thousands_sep_result<wchar_t>;
template auto decimal_point_impl(locale_ref) -> char;
template auto decimal_point_impl(locale_ref) -> wchar_t;
}  // namespace detail
FMT_END_NAMESPACE
