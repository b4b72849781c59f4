//===- ops.cpp - the torch extension: TORCH_LIBRARY(cute) -----------------===//
//
// Links libtorch and the runtime, never MLIR. The schemas of every torch.ops.cute op and their
// CUDA, CPU (an error) and Autograd kernels (cute::gemm's in GemmAutograd.cpp, its derivative
// expressions from cute_torch/ops/gemm_autograd.py); fake (meta) kernels are registered from Python
// (cute_torch/ops/registration.py), where the expression language lives.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "Pointwise.h"
#include "RowOps.h"
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

/// c10's code of a dtype. A ScalarType[] argument reaches Python (fake) kernels as these
/// codes, so Python maps them back by asking here instead of copying c10's enum.
int64_t scalarTypeCode(c10::ScalarType type) { return static_cast<int64_t>(type); }

} // namespace

TORCH_LIBRARY(cute, m) {
  m.def("runtime_status() -> str", &runtimeStatus);
  m.def("scalar_type_code(ScalarType dtype) -> int", &scalarTypeCode);
  m.def("pointwise(str expr, Tensor[] inputs, ScalarType? out_dtype=None) -> Tensor");
  m.def("pointwise.multi(str[] exprs, Tensor[] inputs, ScalarType[]? out_dtypes=None) -> Tensor[]");
  m.def("pointwise.into(str[] exprs, Tensor[] inputs, Tensor(a!)[] outs) -> ()");
  m.def("pointwise.foreach_into(str[] exprs, Tensor[] inputs, Tensor(a!)[] outs) -> ()");
  // Tensor[] takes no default in a schema: cute_torch.ops.gemm gives epilogue and inputs theirs.
  m.def("gemm(Tensor a, Tensor b, str epilogue, Tensor[] inputs, ScalarType? out_dtype=None) -> "
        "Tensor");
  m.def("gemm_plan(Tensor a, Tensor b, Tensor[] inputs, int outputs) -> str",
        &cute_torch::ops::gemmPlan);
  m.def("gemm_choice(Tensor a, Tensor b, Tensor[] inputs, int outputs, int sms, "
        "bool fast_memory=False, ScalarType[]? out_dtypes=None, bool calls=False) -> str",
        &cute_torch::ops::gemmChoice);
  m.def("gemm.multi(Tensor a, Tensor b, str[] epilogues, Tensor[] inputs, ScalarType[]? "
        "out_dtypes=None) "
        "-> Tensor[]");
  cute_torch::ops::defineRowOps(m);
}

TORCH_LIBRARY_IMPL(cute, CUDA, m) {
  m.impl("pointwise", &cute_torch::ops::pointwiseCuda);
  m.impl("pointwise.multi", &cute_torch::ops::pointwiseMultiCuda);
  m.impl("pointwise.into", &cute_torch::ops::pointwiseIntoCuda);
  m.impl("pointwise.foreach_into", &cute_torch::ops::pointwiseForeachIntoCuda);
  m.impl("gemm", &cute_torch::ops::gemmCuda);
  m.impl("gemm.multi", &cute_torch::ops::gemmMultiCuda);
  cute_torch::ops::implementRowOpsCuda(m);
}
TORCH_LIBRARY_IMPL(cute, CPU, m) {
  m.impl("pointwise", &cute_torch::ops::pointwiseCpu);
  m.impl("pointwise.multi", &cute_torch::ops::pointwiseMultiCpu);
  m.impl("pointwise.into", &cute_torch::ops::pointwiseIntoCpu);
  m.impl("pointwise.foreach_into", &cute_torch::ops::pointwiseForeachIntoCpu);
  m.impl("gemm", &cute_torch::ops::gemmCpu);
  m.impl("gemm.multi", &cute_torch::ops::gemmMultiCpu);
  cute_torch::ops::implementRowOpsCpu(m);
}
TORCH_LIBRARY_IMPL(cute, Autograd, m) {
  m.impl("pointwise", &cute_torch::ops::pointwiseAutograd);
  cute_torch::ops::implementGemmAutograd(m);
  cute_torch::ops::implementRowOpsAutograd(m);
}
