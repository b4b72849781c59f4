//===- Pointwise.h - cute::pointwise kernels for the dispatcher ---*- C++ -*-===//

#ifndef CUTE_TORCH_OPS_POINTWISE_H
#define CUTE_TORCH_OPS_POINTWISE_H

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>
#include <string>
#include <vector>

namespace cute_torch::ops {

using PointwiseOp = c10::TypedOperatorHandle<at::Tensor(c10::string_view, at::TensorList,
                                                        std::optional<c10::ScalarType>)>;
/// The dispatcher's handle of cute::pointwise (every call goes through it).
const PointwiseOp &pointwiseOp();

/// cute::pointwise(str expr, Tensor[] inputs, ScalarType? out_dtype=None) -> Tensor
at::Tensor pointwiseCuda(c10::string_view expr, at::TensorList inputs,
                         std::optional<c10::ScalarType> outDtype);
/// cute::pointwise.multi(str[] exprs, Tensor[] inputs, ScalarType[]? out_dtypes=None) -> Tensor[]:
/// several expressions over the same inputs, one kernel, one output each.
std::vector<at::Tensor> pointwiseMultiCuda(std::vector<std::string> exprs, at::TensorList inputs,
                                           std::optional<std::vector<c10::ScalarType>> outDtypes);
/// cute::pointwise.into(str[] exprs, Tensor[] inputs, Tensor(a!)[] outs) -> (): pointwise.multi
/// writing into `outs` (contiguous, of the broadcast shape; their dtypes are the results'). An
/// input may be an output too (an in-place update): each element is read before it is written,
/// by the same thread; one read through a view of an output is the caller's to rule out.
void pointwiseIntoCuda(std::vector<std::string> exprs, at::TensorList inputs, at::TensorList outs);
/// cute::pointwise.foreach_into(str[] exprs, Tensor[] inputs, Tensor(a!)[] outs) -> (): the same
/// pointwise.into call on each of S segments (outs in S groups of one per expression, inputs in
/// S groups of equally many), in one launch where they allow (a compiled optimizer's updates of
/// every parameter). The segments must be independent: no out of one overlaps an input or out of
/// another (as for torch's _foreach ops, this is the caller's to ensure).
void pointwiseForeachIntoCuda(std::vector<std::string> exprs, at::TensorList inputs,
                              at::TensorList outs);
/// CPU tensors get a clear error (the op runs on CUDA only).
at::Tensor pointwiseCpu(c10::string_view expr, at::TensorList inputs,
                        std::optional<c10::ScalarType> outDtype);
std::vector<at::Tensor> pointwiseMultiCpu(std::vector<std::string> exprs, at::TensorList inputs,
                                          std::optional<std::vector<c10::ScalarType>> outDtypes);
void pointwiseIntoCpu(std::vector<std::string> exprs, at::TensorList inputs, at::TensorList outs);
void pointwiseForeachIntoCpu(std::vector<std::string> exprs, at::TensorList inputs,
                             at::TensorList outs);
/// The Autograd kernel: a C++ autograd Function whose backward is cute::pointwise again
/// (the derivative expression comes from the Python builder, once per expression).
at::Tensor pointwiseAutograd(c10::string_view expr, at::TensorList inputs,
                             std::optional<c10::ScalarType> outDtype);

} // namespace cute_torch::ops

#endif // CUTE_TORCH_OPS_POINTWISE_H
