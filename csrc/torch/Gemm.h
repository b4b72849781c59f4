//===- Gemm.h - cute::gemm kernels for the dispatcher --------------*- C++ -*-===//

#ifndef CUTE_TORCH_OPS_GEMM_H
#define CUTE_TORCH_OPS_GEMM_H

#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <vector>

namespace cute_torch::ops {

/// cute::gemm(Tensor a, Tensor b, str epilogue, Tensor[] inputs, ScalarType? out_dtype=None)
/// -> Tensor: epilogue(a @ b) with a (M, K) or (L, M, K) and b (K, N) or
/// (L, K, N), the epilogue an expression over `acc` and x0..xN (`inputs`, broadcast to the
/// output), on the library's Hopper GEMM (kernels/gemm_sm90.py), or its Ampere one
/// (kernels/gemm_sm80.py) before Hopper or with CUTE_TORCH_GEMM_KERNEL=sm80.
at::Tensor gemmCuda(const at::Tensor &a, const at::Tensor &b, c10::string_view epilogue,
                    at::TensorList inputs, std::optional<c10::ScalarType> outDtype);
/// cute::gemm.multi(Tensor a, Tensor b, str[] epilogues, Tensor[] inputs, ScalarType[]?
/// out_dtypes=None) -> Tensor[]: one output per epilogue, all from the same accumulators.
std::vector<at::Tensor> gemmMultiCuda(const at::Tensor &a, const at::Tensor &b,
                                      std::vector<std::string> epilogues, at::TensorList inputs,
                                      std::optional<std::vector<c10::ScalarType>> outDtypes);
/// CPU tensors get a clear error (the op runs on CUDA only).
at::Tensor gemmCpu(const at::Tensor &a, const at::Tensor &b, c10::string_view epilogue,
                   at::TensorList inputs, std::optional<c10::ScalarType> outDtype);
std::vector<at::Tensor> gemmMultiCpu(const at::Tensor &a, const at::Tensor &b,
                                     std::vector<std::string> epilogues, at::TensorList inputs,
                                     std::optional<std::vector<c10::ScalarType>> outDtypes);

/// cute::gemm_choice(Tensor a, Tensor b, Tensor[] inputs, int outputs, int sms, bool
/// fast_memory=False, ScalarType[]? out_dtypes=None, bool calls=False) -> str: the tile columns
/// and schedule a Hopper call with those operands (and outputs of `out_dtypes`, epilogues with
/// function `calls`) would take on `sms` SMs of a card with or without fast memory ("256";
/// "128p01": ping-pong, input 1 staged; "256h": 64-row ping-pong tiles; "k4:128h": split-K
/// over four K slices, then the choice; "t:192": the swapped problem's), on any device (for tests
/// against kernels/gemm_sm90.choose_tile_n, choose_schedule, wide_pingpong and plain_pingpong).
std::string gemmChoice(const at::Tensor &a, const at::Tensor &b, at::TensorList inputs,
                       int64_t outputs, int64_t sms, bool fastMemory,
                       std::optional<std::vector<c10::ScalarType>> outDtypes, bool calls);
/// cute::gemm_plan(Tensor a, Tensor b, Tensor[] inputs, int outputs) -> str: the views a call
/// would pass (each "dtype;sizes;strides;alignment;pattern", joined by "|"), on any device; the
/// CPU tests compare them with kernels/gemm_sm90.py's host_arguments.
std::string gemmPlan(const at::Tensor &a, const at::Tensor &b, at::TensorList inputs,
                     int64_t outputs);

/// The Autograd kernels of cute::gemm and gemm.multi (GemmAutograd.cpp).
void implementGemmAutograd(torch::Library &m);

} // namespace cute_torch::ops

#endif // CUTE_TORCH_OPS_GEMM_H
