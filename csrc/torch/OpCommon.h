//===- OpCommon.h - helpers shared by the torch.ops.cute families --*- C++ -*-===//
//
// Error-message names and the launch of a compiled host entry on the current stream. Messages
// pass only strings to TORCH_CHECK: a size_t argument (c10::str of an unsigned long) crashed
// the process with torch 2.11's CUDA build, so numbers go through std::to_string.
//
//===----------------------------------------------------------------------===//

#ifndef CUTE_TORCH_OPS_OPCOMMON_H
#define CUTE_TORCH_OPS_OPCOMMON_H

#include "cute_torch/runtime.h"

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include <string>
#include <vector>

namespace cute_torch::ops {

/// "cuda:1", "cpu", ...
std::string deviceName(const c10::Device &device);

/// "[2, 3]": built with std::to_string, like every number in these messages (c10::str of a
/// shape crashed the process too).
std::string shapeText(c10::IntArrayRef sizes);

/// Between the expressions of a multi-output op (cute_torch's SEPARATOR): a character no valid
/// expression holds.
constexpr char kExprSeparator = '\x1e';

/// `exprs` joined by kExprSeparator: how several epilogues or expressions travel as one string.
std::string joinExprs(const std::vector<std::string> &exprs);

/// The expression language's name of `type` ("bfloat16", ...); a TypeError from `op` naming
/// `what` and the supported dtypes otherwise.
const char *dtypeName(c10::ScalarType type, const char *op, const std::string &what);

/// The dtype of a language name the Python builder returned.
c10::ScalarType dtypeFromName(const std::string &name, const char *op);

/// What the ops need to know of a device, asked of the Python builder once per device: its
/// number of SMs, and the family of GEMM kernels cute::gemm runs there (90: kernels/gemm_sm90,
/// 80: kernels/gemm_sm80, on GPUs before Hopper or when CUTE_TORCH_GEMM_KERNEL=sm80).
struct DeviceFacts {
  int64_t sms = 0;
  int64_t gemmFamily = 90;
  bool fastMemory = false; // kernels/row_reduce.py's fast_memory (an H200)
};
const DeviceFacts &deviceFacts(int device);

/// Whether an Autograd kernel must build a graph node: grad mode is on and a defined tensor of
/// `tensors` requires grad.
bool needsGradNode(at::ArrayRef<at::Tensor> tensors);

/// Runs a compiled host entry with its argument slots (8 bytes each; i32 arguments are read
/// from the low half) on the current stream of `device`, under a device guard; a CUDA error
/// becomes a torch error from `op`.
void runOnCurrentStream(void (*entry)(void **), runtime::LoadedArtifact *artifact,
                        c10::SmallVectorImpl<int64_t> &slots, const c10::Device &device,
                        const char *op);

} // namespace cute_torch::ops

#endif // CUTE_TORCH_OPS_OPCOMMON_H
