//===- ops.cpp - the torch extension: TORCH_LIBRARY(cute) -----------------===//
//
// Links libtorch and the runtime, never MLIR. This is the skeleton the torch-bridge issue fills
// with `cute::pointwise` and friends (C++ key, C++ cache, launch on the current stream); today
// it registers the namespace and one op that reports whether the runtime can reach a GPU.
//
//===----------------------------------------------------------------------===//

#include "cute_torch/runtime.h"

#include <torch/library.h>

#include <string>

namespace {

/// "ok: N device(s)" or "unavailable: <why>"; a cheap way to check the extension is loaded.
std::string runtimeStatus() {
  std::string why;
  if (!cute_torch::runtime::driverAvailable(&why))
    return "unavailable: " + why;
  return "ok: " + std::to_string(cute_torch::runtime::deviceCount()) + " device(s)";
}

} // namespace

TORCH_LIBRARY(cute, m) {
  m.def("runtime_status() -> str", &runtimeStatus);
}
