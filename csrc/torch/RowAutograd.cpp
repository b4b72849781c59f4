//===- RowAutograd.cpp - autograd of cute::softmax, layer_norm, cross_entropy -===//
//
// The Autograd kernels of the row ops, in C++ like cute::pointwise's: an eager call that needs
// no gradient goes straight to the CUDA kernel below autograd, and one that does builds its
// graph node here, without the Python of torch.library.register_autograd (about 100-200 us a
// call on the GPU machine's host). The formulas are the backward ops'; graphs compiled by
// backend="cute" run below autograd and never reach this file.
//
//===----------------------------------------------------------------------===//

#include "OpCommon.h"
#include "RowOps.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>

namespace cute_torch::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <typename Signature> c10::TypedOperatorHandle<Signature> typedOp(const char *name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

// -- softmax ----------------------------------------------------------------------------------

const auto &softmaxOp() {
  static auto op = typedOp<at::Tensor(const at::Tensor &, bool)>("cute::softmax");
  return op;
}

class SoftmaxFunction : public torch::autograd::Function<SoftmaxFunction> {
public:
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, bool log) {
    at::AutoDispatchBelowADInplaceOrView below;
    at::Tensor y = softmaxOp().call(x, log);
    ctx->saved_data["log"] = log;
    ctx->save_for_backward({y});
    return y;
  }

  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    static auto op =
        typedOp<at::Tensor(const at::Tensor &, const at::Tensor &, bool)>("cute::softmax_backward");
    const at::Tensor y = ctx->get_saved_variables()[0];
    return {op.call(y, grads[0], ctx->saved_data["log"].toBool()), at::Tensor()};
  }
};

at::Tensor softmaxAutograd(const at::Tensor &x, bool log) {
  if (needsGradNode(x))
    return SoftmaxFunction::apply(x, log);
  at::AutoDispatchBelowADInplaceOrView below;
  return softmaxOp().call(x, log);
}

// -- layer_norm -------------------------------------------------------------------------------

using NormOutputs = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

const auto &layerNormOp() {
  static auto op = typedOp<NormOutputs(
      const at::Tensor &, const std::optional<at::Tensor> &, const std::optional<at::Tensor> &,
      const std::optional<at::Tensor> &, double, bool)>("cute::layer_norm");
  return op;
}
using NormBackwardSig = std::tuple<at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor &, const std::optional<at::Tensor> &, const at::Tensor &, const at::Tensor &,
    const at::Tensor &, bool, bool);

// Which optional operands a call has: they travel to apply() as one list (autograd's C++
// functions count each list element as an input), in this order.
constexpr int64_t kWeight = 1, kBias = 2, kResidual = 4;

std::optional<at::Tensor> given(const at::Tensor &t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

class LayerNormFunction : public torch::autograd::Function<LayerNormFunction> {
public:
  /// `operands` holds weight, bias and residual, those present (`has`, a kWeight | kBias |
  /// kResidual mask), in that order.
  static variable_list forward(AutogradContext *ctx, const at::Tensor &x, at::TensorList operands,
                               int64_t has, double eps, bool rms) {
    at::AutoDispatchBelowADInplaceOrView below;
    at::Tensor weight, bias, residual;
    size_t next = 0;
    for (auto [bit, slot] : {std::pair{kWeight, &weight}, {kBias, &bias}, {kResidual, &residual}})
      if (has & bit)
        *slot = operands[next++];
    auto [y, resOut, rstd, mean] =
        layerNormOp().call(x, given(weight), given(bias), given(residual), eps, rms);
    ctx->saved_data["has"] = has;
    ctx->saved_data["x_dtype"] = x.scalar_type();
    ctx->saved_data["res_dtype"] = residual.defined() ? residual.scalar_type() : x.scalar_type();
    // The backward normalizes what the forward normalized: x, or the sum x + residual.
    ctx->save_for_backward({residual.defined() ? resOut : x, weight, rstd, mean});
    ctx->mark_non_differentiable({rstd, mean});
    return {y, resOut, rstd, mean};
  }

  /// x and the residual both feed the sum s = x + residual: each gets dL/ds, the norm's
  /// gradient plus the gradient of residual_out (the residual stream going on).
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    static auto op = typedOp<NormBackwardSig>("cute::layer_norm_backward");
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &s = saved[0], &weight = saved[1], &rstd = saved[2], &mean = saved[3];
    const int64_t has = ctx->saved_data["has"].toInt();
    // needs_input_grad counts x, then each operand of the list.
    size_t slot = 1;
    bool weightGrad = false, biasGrad = false;
    if (has & kWeight)
      weightGrad = ctx->needs_input_grad(slot++);
    if (has & kBias)
      biasGrad = ctx->needs_input_grad(slot++);
    auto [ds, dw, db] = op.call(s, given(weight), grads[0], rstd, mean, weightGrad, biasGrad);
    if ((has & kResidual) && grads[1].defined())
      ds = ds + grads[1];
    variable_list result{ds.to(ctx->saved_data["x_dtype"].toScalarType())};
    if (has & kWeight)
      result.push_back(dw.numel() ? dw : at::Tensor());
    if (has & kBias)
      result.push_back(db.numel() ? db : at::Tensor());
    if (has & kResidual)
      result.push_back(ds.to(ctx->saved_data["res_dtype"].toScalarType()));
    result.resize(result.size() + 3); // has, eps, rms
    return result;
  }
};

NormOutputs layerNormAutograd(const at::Tensor &x, const std::optional<at::Tensor> &weight,
                              const std::optional<at::Tensor> &bias,
                              const std::optional<at::Tensor> &residual, double eps, bool rms) {
  const at::Tensor w = weight.value_or(at::Tensor()), b = bias.value_or(at::Tensor()),
                   r = residual.value_or(at::Tensor());
  if (needsGradNode({x, w, b, r})) {
    std::vector<at::Tensor> operands;
    int64_t has = 0;
    for (auto [bit, t] : {std::pair{kWeight, &w}, {kBias, &b}, {kResidual, &r}})
      if (t->defined()) {
        has |= bit;
        operands.push_back(*t);
      }
    variable_list out = LayerNormFunction::apply(x, at::TensorList(operands), has, eps, rms);
    return {out[0], out[1], out[2], out[3]};
  }
  at::AutoDispatchBelowADInplaceOrView below;
  return layerNormOp().call(x, weight, bias, residual, eps, rms);
}

// -- cross_entropy ----------------------------------------------------------------------------

const auto &crossEntropyOp() {
  static auto op = typedOp<std::tuple<at::Tensor, at::Tensor>(
      const at::Tensor &, const at::Tensor &, int64_t, double)>("cute::cross_entropy");
  return op;
}

using CrossEntropyBackwardSig = at::Tensor(const at::Tensor &, const at::Tensor &,
                                           const at::Tensor &, const at::Tensor &, int64_t, double);

class CrossEntropyFunction : public torch::autograd::Function<CrossEntropyFunction> {
public:
  static variable_list forward(AutogradContext *ctx, const at::Tensor &logits,
                               const at::Tensor &target, int64_t ignoreIndex,
                               double labelSmoothing) {
    at::AutoDispatchBelowADInplaceOrView below;
    auto [loss, lse] = crossEntropyOp().call(logits, target, ignoreIndex, labelSmoothing);
    ctx->saved_data["ignore_index"] = ignoreIndex;
    ctx->saved_data["label_smoothing"] = labelSmoothing;
    ctx->save_for_backward({logits, target, lse});
    ctx->mark_non_differentiable({lse});
    return {loss, lse};
  }

  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    static auto op = typedOp<CrossEntropyBackwardSig>("cute::cross_entropy_backward");
    const variable_list saved = ctx->get_saved_variables();
    return {op.call(saved[0], saved[1], saved[2], grads[0], ctx->saved_data["ignore_index"].toInt(),
                    ctx->saved_data["label_smoothing"].toDouble()),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

std::tuple<at::Tensor, at::Tensor> crossEntropyAutograd(const at::Tensor &logits,
                                                        const at::Tensor &target,
                                                        int64_t ignoreIndex,
                                                        double labelSmoothing) {
  if (needsGradNode(logits)) {
    variable_list out = CrossEntropyFunction::apply(logits, target, ignoreIndex, labelSmoothing);
    return {out[0], out[1]};
  }
  at::AutoDispatchBelowADInplaceOrView below;
  return crossEntropyOp().call(logits, target, ignoreIndex, labelSmoothing);
}

} // namespace

void implementRowOpsAutograd(torch::Library &m) {
  m.impl("softmax", &softmaxAutograd);
  m.impl("layer_norm", &layerNormAutograd);
  m.impl("cross_entropy", &crossEntropyAutograd);
}

} // namespace cute_torch::ops
