//===- RowOps.h - the row ops for the dispatcher --------------------*- C++ -*-===//
//
// cute::softmax, cute::layer_norm, cute::cross_entropy and their backward ops over the row
// kernels (kernels/softmax.py, norms.py, cross_entropy.py), and cute::column_sum
// (kernels/column_sums.py): the schemas and CUDA kernels are here, with a C++ cache of
// compiled kernels keyed by the operands' static description; the Autograd kernels are in
// RowAutograd.cpp (column_sum's in Python); fakes are registered from Python
// (cute_torch/ops/row_ops.py).
//
//===----------------------------------------------------------------------===//

#ifndef CUTE_TORCH_OPS_ROWOPS_H
#define CUTE_TORCH_OPS_ROWOPS_H

#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace cute_torch::ops {

/// The schemas (TORCH_LIBRARY(cute)) and the CUDA and CPU (an error) kernels.
void defineRowOps(torch::Library &m);
void implementRowOpsCuda(torch::Library &m);
void implementRowOpsCpu(torch::Library &m);
/// The Autograd kernels of softmax, layer_norm and cross_entropy (RowAutograd.cpp).
void implementRowOpsAutograd(torch::Library &m);

} // namespace cute_torch::ops

#endif // CUTE_TORCH_OPS_ROWOPS_H
