// CUBINRT_TRY(expr): the value of a Result, or return its error from the enclosing function.
// (A GNU statement expression; g++ and clang both have it.)
#pragma once

#include <utility>

#define CUBINRT_TRY(expr)                                      \
  ({                                                           \
    auto&& cubinrt_try_ = (expr);                              \
    if (!cubinrt_try_) return std::unexpected(std::move(cubinrt_try_).error()); \
    std::move(cubinrt_try_).value();                           \
  })

