//===- GemmAutograd.cpp - autograd of cute::gemm and gemm.multi ------------===//
//
// The Autograd kernels of the GEMM ops, in C++ like cute::pointwise's and the row ops': an eager
// call that needs no gradient goes straight below autograd, and one that does builds its graph
// node here, without the Python of torch.library.register_autograd. With out_k = e_k(acc,
// x0..xN) and acc = a @ b, backward computes
//     dacc = sum_k g_k * de_k/dacc     (a cute::pointwise kernel per output; Float32)
//     da = dacc @ b^T, db = a^T @ dacc (cute::gemm, the transposes read in place)
//     dx_i = sum_k g_k * de_k/dx_i     (summed down to x_i's shape in Float32, then its dtype)
// The derivative expressions come from cute_torch/ops/gemm_autograd.py's gradient_table, asked
// once per epilogues. `acc` is recomputed by one more GEMM only when a derivative reads it. A
// gated GEMM's epilogues read `gate` and `up`: dacc interleaves dgate and dup in groups of 8
// columns, the accumulator columns' order (kernels/gemm_common.interleave_gated).
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "OpCommon.h"
#include "PythonBuilder.h"

#include <ATen/ExpandUtils.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/zeros_like.h>
#include <torch/autograd.h>

#include <cctype>
#include <mutex>
#include <unordered_map>

namespace cute_torch::ops {
namespace {

constexpr char kUnit = '\x1f'; // between one epilogue's derivatives (gemm_autograd.UNIT)

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using DtypeList = std::optional<std::vector<c10::ScalarType>>;

const auto &gemmOp() {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("cute::gemm", "")
                       .typed<at::Tensor(const at::Tensor &, const at::Tensor &, c10::string_view,
                                         at::TensorList, std::optional<c10::ScalarType>)>();
  return op;
}

const auto &gemmMultiOp() {
  static auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("cute::gemm", "multi")
          .typed<std::vector<at::Tensor>(const at::Tensor &, const at::Tensor &,
                                         std::vector<std::string>, at::TensorList, DtypeList)>();
  return op;
}

const auto &pointwiseOp() {
  static auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("cute::pointwise", "")
          .typed<at::Tensor(c10::string_view, at::TensorList, std::optional<c10::ScalarType>)>();
  return op;
}

std::vector<std::string> split(const std::string &text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t end; (end = text.find(separator, start)) != std::string::npos; start = end + 1)
    parts.push_back(text.substr(start, end - start));
  parts.push_back(text.substr(start));
  return parts;
}

/// The derivatives of a GEMM's epilogues over n inputs: per epilogue, one expression per
/// accumulator (acc, or gate and up) then per input ("" where zero).
struct GradientTable {
  size_t accumulators = 1;
  std::vector<std::vector<std::string>> derivatives;
};

std::mutex tableMutex;
std::unordered_map<std::string, GradientTable> tableCache;

/// `joined`: the epilogues joined by kExprSeparator (joinExprs).
const GradientTable &gradientTable(const std::string &joined, size_t n) {
  const std::string key = joined + '\x1d' + std::to_string(n);
  {
    std::lock_guard<std::mutex> lock(tableMutex);
    auto found = tableCache.find(key);
    if (found != tableCache.end())
      return found->second;
  }
  BuilderResult result = callBuilder("gemm_grads", {joined, static_cast<int64_t>(n)});
  TORCH_CHECK(!result.isNone && !result.text.empty(),
              "cute::gemm: the builder gave no derivatives");
  GradientTable table;
  table.accumulators = result.text[0] == '2' ? 2 : 1;
  for (const std::string &part : split(result.text.substr(1), kExprSeparator))
    table.derivatives.push_back(split(part, kUnit));
  std::lock_guard<std::mutex> lock(tableMutex);
  return tableCache.emplace(key, std::move(table)).first->second;
}

/// Whether `expr` reads input `x<index>` (a whole name, not a prefix of x12).
bool reads(const std::string &expr, size_t index) {
  const std::string name = "x" + std::to_string(index);
  for (size_t at = expr.find(name); at != std::string::npos; at = expr.find(name, at + 1)) {
    const size_t after = at + name.size();
    const bool startsName = at == 0 || !(std::isalnum(expr[at - 1]) || expr[at - 1] == '_');
    if (startsName && (after == expr.size() || !std::isdigit(expr[after])))
      return true;
  }
  return false;
}

/// The sum of the terms g_k * d e_k / d name over the outputs with a gradient (undefined if
/// none), each from one pointwise kernel over env and g_k, in Float32.
at::Tensor sumOfTerms(const GradientTable &table, size_t column, const variable_list &env,
                      const variable_list &grads) {
  at::Tensor total;
  for (size_t k = 0; k < grads.size(); ++k) {
    const std::string &d = table.derivatives[k][column];
    if (!grads[k].defined() || d.empty())
      continue;
    variable_list operands = env;
    operands.push_back(grads[k]);
    at::Tensor term = pointwiseOp().call(d, operands, c10::kFloat);
    total = total.defined() ? total + term : term;
  }
  return total;
}

/// gate and up interleaved in groups of 8 columns (kernels/gemm_common.interleave_gated).
at::Tensor interleaveGated(const at::Tensor &gate, const at::Tensor &up) {
  std::vector<c10::SymInt> groups(gate.sym_sizes().begin(), gate.sym_sizes().end() - 1);
  groups.push_back(gate.sym_size(-1) / 8);
  groups.push_back(1);
  groups.push_back(8);
  at::Tensor pairs = at::cat({gate.reshape_symint(groups), up.reshape_symint(groups)}, -2);
  std::vector<c10::SymInt> shape(gate.sym_sizes().begin(), gate.sym_sizes().end() - 1);
  shape.push_back(gate.sym_size(-1) * 2);
  return pairs.reshape_symint(shape);
}

/// A broadcast operand's gradient: summed over the dims it was broadcast along.
at::Tensor sumTo(const at::Tensor &grad, const at::Tensor &like) {
  return grad.sym_sizes() == like.sym_sizes() ? grad : at::sum_to(grad, like.sym_sizes());
}

class GemmFunction : public torch::autograd::Function<GemmFunction> {
public:
  static variable_list forward(AutogradContext *ctx, const at::Tensor &a, const at::Tensor &b,
                               std::vector<std::string> epilogues, at::TensorList inputs,
                               DtypeList outDtypes, bool single) {
    at::AutoDispatchBelowADInplaceOrView below;
    variable_list saved{a, b};
    saved.insert(saved.end(), inputs.begin(), inputs.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["epilogues"] = joinExprs(epilogues);
    if (single) // cute::gemm itself below autograd (its out_dtype a ScalarType, not a list)
      return {gemmOp().call(a, b, epilogues[0], inputs,
                            outDtypes ? std::optional<c10::ScalarType>((*outDtypes)[0])
                                      : std::nullopt)};
    return gemmMultiOp().call(a, b, std::move(epilogues), inputs, std::move(outDtypes));
  }

  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    variable_list saved = ctx->get_saved_variables();
    const at::Tensor a = saved[0], b = saved[1];
    const variable_list xs(saved.begin() + 2, saved.end());
    const size_t n = xs.size();
    const GradientTable &table = gradientTable(ctx->saved_data["epilogues"].toStringRef(), n);
    const size_t accs = table.accumulators;
    bool wantsX = false;
    for (size_t i = 0; i < n; ++i)
      wantsX |= ctx->needs_input_grad(2 + i) && xs[i].is_floating_point();
    // Recompute the accumulators only when a derivative wanted reads them.
    bool readsAcc = false;
    for (size_t k = 0; k < grads.size(); ++k) {
      if (!grads[k].defined())
        continue;
      for (size_t column = 0; column < accs + (wantsX ? n : 0); ++column)
        for (size_t j = 0; j < accs; ++j)
          readsAcc |= reads(table.derivatives[k][column], n + j);
    }
    at::Tensor anyGrad;
    for (const at::Tensor &g : grads)
      if (g.defined())
        anyGrad = g;
    variable_list env = xs;
    if (readsAcc) {
      if (accs == 2) {
        variable_list both = gemmMultiOp().call(a, b, {"gate", "up"}, {}, std::nullopt);
        env.insert(env.end(), both.begin(), both.end());
      } else {
        env.push_back(gemmOp().call(a, b, "acc", {}, std::nullopt));
      }
    } else {
      env.insert(env.end(), accs, anyGrad); // stand-ins: no derivative reads them
    }
    variable_list result(n + 5); // a, b, epilogues, each input, out_dtypes, single
    at::Tensor dacc = sumOfTerms(table, 0, env, grads);
    if (accs == 2) {
      at::Tensor dup = sumOfTerms(table, 1, env, grads);
      if (dacc.defined() || dup.defined()) {
        const at::Tensor zeros = at::zeros_like(anyGrad, anyGrad.options().dtype(c10::kFloat));
        dacc = interleaveGated(dacc.defined() ? dacc : zeros, dup.defined() ? dup : zeros);
      }
    }
    if (dacc.defined()) {
      dacc = dacc.to(a.scalar_type());
      if (ctx->needs_input_grad(0)) {
        at::Tensor da = gemmOp().call(dacc, b.transpose(-1, -2), "acc", {}, std::nullopt);
        result[0] = da.dim() > a.dim() ? sumTo(da, a) : da;
      }
      if (ctx->needs_input_grad(1)) {
        if (b.dim() == 2 && a.dim() == 3) { // one weight for the batch: the sum over it
          const at::Tensor rows = a.reshape_symint({-1, a.sym_size(-1)});
          result[1] = gemmOp().call(rows.t(), dacc.reshape_symint({-1, dacc.sym_size(-1)}), "acc",
                                    {}, std::nullopt);
        } else {
          result[1] = gemmOp().call(a.transpose(-1, -2), dacc, "acc", {}, std::nullopt);
        }
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (!ctx->needs_input_grad(2 + i) || !xs[i].is_floating_point())
        continue;
      at::Tensor dx = sumOfTerms(table, accs + i, env, grads);
      if (dx.defined())
        result[3 + i] = sumTo(dx, xs[i]).to(xs[i].scalar_type());
    }
    return result;
  }
};

std::vector<at::Tensor> gemmMultiAutograd(const at::Tensor &a, const at::Tensor &b,
                                          std::vector<std::string> epilogues, at::TensorList inputs,
                                          DtypeList outDtypes) {
  std::vector<at::Tensor> operands{a, b};
  operands.insert(operands.end(), inputs.begin(), inputs.end());
  if (needsGradNode(operands))
    return GemmFunction::apply(a, b, std::move(epilogues), inputs, std::move(outDtypes), false);
  at::AutoDispatchBelowADInplaceOrView below;
  return gemmMultiOp().call(a, b, std::move(epilogues), inputs, std::move(outDtypes));
}

at::Tensor gemmAutograd(const at::Tensor &a, const at::Tensor &b, c10::string_view epilogue,
                        at::TensorList inputs, std::optional<c10::ScalarType> outDtype) {
  std::vector<at::Tensor> operands{a, b};
  operands.insert(operands.end(), inputs.begin(), inputs.end());
  if (needsGradNode(operands)) {
    DtypeList dtypes;
    if (outDtype)
      dtypes = std::vector<c10::ScalarType>{*outDtype};
    return GemmFunction::apply(a, b, std::vector<std::string>{std::string(epilogue)}, inputs,
                               std::move(dtypes), true)[0];
  }
  at::AutoDispatchBelowADInplaceOrView below;
  return gemmOp().call(a, b, epilogue, inputs, outDtype);
}

} // namespace

void implementGemmAutograd(torch::Library &m) {
  m.impl("gemm", &gemmAutograd);
  m.impl("gemm.multi", &gemmMultiAutograd);
}

} // namespace cute_torch::ops
