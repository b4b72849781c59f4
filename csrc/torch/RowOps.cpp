//===- RowOps.cpp - cute::softmax, layer_norm, cross_entropy, column_sum -===//
//
// A call checks its operands, views them as (M, N) rows with unit column stride, allocates the
// outputs, describes each operand by what the compiled kernel depends on (dtype, N, row
// stride, alignment, whether offsets need 64 bits; M is a run-time value), and runs the
// kernel's host entry from a C++ cache on the current stream. A miss asks the Python builder
// (cute_torch/ops/row_build.py), which compiles the kernel for the description and returns its
// host entry, the CTA shape and where each argument slot's value comes from.
//
//===----------------------------------------------------------------------===//

#include "RowOps.h"

#include "OpCommon.h"
#include "PythonBuilder.h"
#include "cute_torch/runtime.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace cute_torch::ops {
namespace {

// kernels/norms.MAX_NORM_N: one CTA's registers times the largest cluster.
constexpr int64_t kMaxNormRow = 32768 * 8;

struct RowKernel {
  void (*entry)(void **) = nullptr;
  runtime::LoadedArtifact *runtime = nullptr;
  int64_t rowsPerCta = 1; // per group of `cluster` CTAs
  int64_t threads = 128;
  int64_t cluster = 1;
  int64_t resident = 0;        // groups that run at once (a persistent grid; 0: not one)
  std::vector<int64_t> recipe; // kind * 1000 + index (cute_torch/ops/row_build.py)
};

std::mutex cacheMutex;
std::unordered_map<std::string, RowKernel> kernelCache;

void checkCuda(const char *op, std::initializer_list<const at::Tensor *> tensors) {
  for (const at::Tensor *t : tensors)
    if (t && t->defined())
      TORCH_CHECK(t->is_cuda(), "cute::", op, " runs on CUDA tensors; got one on ",
                  deviceName(t->device()));
}

/// `t` as (M, N) rows, N its last dim, with unit column stride (copied only if needed).
at::Tensor rowsOf(const at::Tensor &t, const char *op, const char *name) {
  TORCH_CHECK_VALUE(t.dim() >= 1, "cute::", op, ": ", name, " must have at least one dimension");
  at::Tensor rows = t.dim() == 2 ? t : t.reshape({-1, t.size(-1)});
  return rows.stride(-1) == 1 || rows.size(-1) <= 1 ? rows : rows.contiguous();
}

int64_t alignmentOf(const at::Tensor &t) {
  const auto address = reinterpret_cast<uintptr_t>(t.data_ptr());
  int64_t align = 16;
  while (align > t.element_size() && address % align)
    align /= 2;
  return align;
}

/// "kind;dtype;n;row_stride;alignment;wide" (row_build.py), or "-" for an absent operand.
std::string describe(char kind, const at::Tensor &t, const char *op) {
  if (!t.defined())
    return "-";
  std::string text = std::string(1, kind) + ";" + dtypeName(t.scalar_type(), op, "an operand");
  int64_t n = 1, stride = 1;
  bool wide = false;
  if (kind == 'r') {
    n = t.size(1);
    stride = t.size(0) > 1 ? t.stride(0) : n;
    wide = (t.size(0) - 1) * stride + n >= (int64_t(1) << 31);
  } else if (kind == 'c') {
    n = t.size(0);
  }
  return text + ";" + std::to_string(n) + ";" + std::to_string(stride) + ";" +
         std::to_string(alignmentOf(t)) + ";" + (wide ? "1" : "0");
}

const RowKernel &rowKernel(const std::string &op, const std::string &described,
                           const std::string &flags, int device) {
  const std::string key =
      op + '\x1f' + flags + '\x1f' + std::to_string(device) + '\x1f' + described;
  {
    std::lock_guard<std::mutex> lock(cacheMutex);
    auto found = kernelCache.find(key);
    if (found != kernelCache.end())
      return found->second;
  }
  BuilderResult built = callBuilder(
      "rows", {BuilderArg(op), BuilderArg(described), BuilderArg(flags), BuilderArg(device)});
  TORCH_CHECK(built.ints.size() >= 6, "cute::", op, ": the builder returned no kernel");
  RowKernel kernel{reinterpret_cast<void (*)(void **)>(built.ints[0]),
                   reinterpret_cast<runtime::LoadedArtifact *>(built.ints[1]),
                   static_cast<int64_t>(built.ints[2]),
                   static_cast<int64_t>(built.ints[3]),
                   static_cast<int64_t>(built.ints[4]),
                   static_cast<int64_t>(built.ints[5]),
                   {built.ints.begin() + 6, built.ints.end()}};
  std::lock_guard<std::mutex> lock(cacheMutex);
  return kernelCache.emplace(key, std::move(kernel)).first->second;
}

/// kernels/row_reduce.persistent_groups: a persistent grid of as many groups as run at once
/// (at most one per block of `m` rows); 1 (unused) for a kernel whose grid is not persistent.
int64_t persistentGroups(const RowKernel &k, int64_t m) {
  const int64_t blocks = (m + k.rowsPerCta - 1) / k.rowsPerCta;
  return std::max<int64_t>(1, std::min(blocks, k.resident));
}

void launch(const RowKernel &kernel, const std::vector<at::Tensor> &operands,
            std::initializer_list<double> floats, std::initializer_list<int64_t> ints,
            const char *op) {
  c10::SmallVector<int64_t, 24> slots;
  const std::vector<double> f(floats);
  const std::vector<int64_t> n(ints);
  for (int64_t code : kernel.recipe) {
    const int64_t kind = code / 1000, index = code % 1000;
    switch (kind) {
    case 0:
      slots.push_back(static_cast<int64_t>(
          reinterpret_cast<uintptr_t>(operands.at(static_cast<size_t>(index)).data_ptr())));
      break;
    case 1:
      slots.push_back(operands.at(static_cast<size_t>(index)).size(0));
      break;
    case 4: { // a float32 in the slot's low half
      const float value = static_cast<float>(f.at(static_cast<size_t>(index)));
      int32_t bits = 0;
      std::memcpy(&bits, &value, sizeof(bits));
      slots.push_back(static_cast<int64_t>(static_cast<uint32_t>(bits)));
      break;
    }
    default:
      slots.push_back(n.at(static_cast<size_t>(index)));
    }
  }
  runOnCurrentStream(kernel.entry, kernel.runtime, slots, operands.front().device(), op);
}

std::string join(std::initializer_list<std::string> parts) {
  std::string text;
  for (const std::string &p : parts)
    text += (text.empty() ? "" : "|") + p;
  return text;
}

// -- softmax -----------------------------------------------------------------------------------

at::Tensor softmaxCuda(const at::Tensor &x, bool log) {
  checkCuda("softmax", {&x});
  at::Tensor x2 = rowsOf(x, "softmax", "x");
  at::Tensor y = at::empty(x2.sizes(), x2.options());
  if (x2.numel()) {
    const RowKernel &k = rowKernel(
        "softmax", join({describe('r', x2, "cute::softmax"), describe('r', y, "cute::softmax")}),
        log ? "1" : "0", x.device().index());
    launch(k, {x2, y}, {}, {persistentGroups(k, x2.size(0))}, "cute::softmax");
  }
  return y.view(x.sizes());
}

at::Tensor softmaxBackwardCuda(const at::Tensor &y, const at::Tensor &dy, bool log) {
  checkCuda("softmax_backward", {&y, &dy});
  TORCH_CHECK_VALUE(y.sizes() == dy.sizes(), "cute::softmax_backward: y and dy differ in shape");
  at::Tensor y2 = rowsOf(y, "softmax_backward", "y"), dy2 = rowsOf(dy, "softmax_backward", "dy");
  at::Tensor dx = at::empty(y2.sizes(), dy2.options());
  if (y2.numel()) {
    const char *op = "cute::softmax_backward";
    const RowKernel &k =
        rowKernel("softmax_backward",
                  join({describe('r', y2, op), describe('r', dy2, op), describe('r', dx, op)}),
                  log ? "1" : "0", y.device().index());
    launch(k, {y2, dy2, dx}, {}, {persistentGroups(k, y2.size(0))}, op);
  }
  return dx.view(y.sizes());
}

at::Tensor softmaxCpu(const at::Tensor &x, bool) {
  checkCuda("softmax", {&x});
  return {};
}

at::Tensor softmaxBackwardCpu(const at::Tensor &y, const at::Tensor &dy, bool) {
  checkCuda("softmax_backward", {&y, &dy});
  return {};
}

// -- LayerNorm and RMSNorm ---------------------------------------------------------------------

void checkVector(const std::optional<at::Tensor> &t, int64_t n, const char *name) {
  if (t)
    TORCH_CHECK_VALUE(t->dim() == 1 && t->size(0) == n, "cute::layer_norm: ", name,
                      " must have shape (", std::to_string(n), ",)");
}

at::Tensor orEmpty(const at::Tensor &t, const at::Tensor &like) {
  return t.defined() ? t : at::empty({0}, like.options());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>
layerNormCuda(const at::Tensor &x, const std::optional<at::Tensor> &weight,
              const std::optional<at::Tensor> &bias, const std::optional<at::Tensor> &residual,
              double eps, bool rms) {
  const char *op = "cute::layer_norm";
  at::Tensor w = weight ? weight->contiguous() : at::Tensor(),
             b = bias ? bias->contiguous() : at::Tensor(), r = residual ? *residual : at::Tensor();
  checkCuda("layer_norm", {&x, &w, &b, &r});
  TORCH_CHECK_VALUE(!(rms && b.defined()), "cute::layer_norm: RMSNorm (rms=True) takes no bias");
  TORCH_CHECK_VALUE(x.dim() >= 1, "cute::layer_norm: x must have at least one dimension");
  const int64_t n = x.size(-1);
  TORCH_CHECK_VALUE(x.numel() == 0 || (n >= 1 && n <= kMaxNormRow), "cute::layer_norm: rows of ",
                    std::to_string(n), " elements; the norm kernels take 1 to ",
                    std::to_string(kMaxNormRow));
  checkVector(weight, n, "weight");
  checkVector(bias, n, "bias");
  TORCH_CHECK_VALUE(!r.defined() || r.sizes() == x.sizes(),
                    "cute::layer_norm: residual has another shape than x");
  at::Tensor x2 = rowsOf(x, "layer_norm", "x");
  at::Tensor r2 = r.defined() ? rowsOf(r, "layer_norm", "residual") : at::Tensor();
  const int64_t m = x2.size(0);
  at::Tensor y = at::empty(x2.sizes(), x2.options());
  at::Tensor rOut = r2.defined() ? at::empty(r2.sizes(), r2.options()) : at::Tensor();
  at::TensorOptions f32 = x.options().dtype(at::kFloat);
  at::Tensor rstd = at::empty({m}, f32);
  at::Tensor mean = rms ? at::Tensor() : at::empty({m}, f32);
  if (m && n) {
    const RowKernel &k =
        rowKernel("layer_norm",
                  join({describe('r', x2, op), describe('r', r2, op), describe('c', w, op),
                        describe('c', b, op), describe('r', y, op), describe('r', rOut, op),
                        describe('v', rstd, op), describe('v', mean, op)}),
                  rms ? "1" : "0", x.device().index());
    launch(k, {x2, r2, w, b, y, rOut, rstd, mean}, {eps}, {persistentGroups(k, m)}, op);
  }
  return {y.view(x.sizes()), rOut.defined() ? rOut.view(x.sizes()) : at::empty({0}, x.options()),
          rstd, orEmpty(mean, rstd)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
layerNormBackwardCuda(const at::Tensor &x, const std::optional<at::Tensor> &weight,
                      const at::Tensor &dy, const at::Tensor &rstdIn, const at::Tensor &meanIn,
                      bool weightGrad, bool biasGrad) {
  const char *op = "cute::layer_norm_backward";
  at::Tensor w = weight ? weight->contiguous() : at::Tensor();
  checkCuda("layer_norm_backward", {&x, &w, &dy, &rstdIn, &meanIn});
  TORCH_CHECK_VALUE(x.dim() >= 1 && dy.sizes() == x.sizes(),
                    "cute::layer_norm_backward: dy has another shape than x");
  const int64_t n = x.size(-1), m = n ? x.numel() / n : 0;
  TORCH_CHECK_VALUE(rstdIn.numel() == m && (meanIn.numel() == 0 || meanIn.numel() == m),
                    "cute::layer_norm_backward: rstd and mean must have one value per row (",
                    std::to_string(m), ")");
  TORCH_CHECK_VALUE(m == 0 || (n >= 1 && n <= kMaxNormRow), "cute::layer_norm_backward: rows of ",
                    std::to_string(n), " elements; the norm kernels take 1 to ",
                    std::to_string(kMaxNormRow));
  checkVector(weight, n, "weight");
  at::Tensor x2 = rowsOf(x, "layer_norm_backward", "x"),
             dy2 = rowsOf(dy, "layer_norm_backward", "dy");
  at::Tensor rstd = rstdIn.reshape({-1}).to(at::kFloat).contiguous();
  at::Tensor mean =
      meanIn.numel() ? meanIn.reshape({-1}).to(at::kFloat).contiguous() : at::Tensor();
  at::Tensor dx = at::empty(x2.sizes(), x2.options());
  const bool wantW = weightGrad && w.defined();
  at::TensorOptions f32 = x.options().dtype(at::kFloat);
  const at::ScalarType paramType = w.defined() ? w.scalar_type() : x.scalar_type();
  at::Tensor dw = at::empty({0}, x.options()), db = at::empty({0}, x.options());
  if (m == 0) {
    if (wantW)
      dw = at::zeros({n}, x.options().dtype(paramType));
    if (biasGrad)
      db = at::zeros({n}, x.options().dtype(paramType));
    return {dx.view(x.sizes()), dw, db};
  }
  // The partial rows are fresh allocations: described before they exist (stride N, 16 bytes).
  const std::string part = "r;float32;" + std::to_string(n) + ";" + std::to_string(n) + ";16;0";
  // dweight and dbias: the kernel's second launch sums the partial rows into them.
  if (wantW)
    dw = at::empty({n}, x.options().dtype(paramType));
  if (biasGrad)
    db = at::empty({n}, x.options().dtype(paramType));
  const RowKernel &k =
      rowKernel("layer_norm_backward",
                join({describe('r', x2, op), describe('c', w, op), describe('r', dy2, op),
                      describe('v', rstd, op), describe('v', mean, op), describe('r', dx, op),
                      wantW ? part : "-", biasGrad ? part : "-",
                      wantW ? describe('c', dw, op) : "-", biasGrad ? describe('c', db, op) : "-"}),
                "", x.device().index());
  const int64_t groups = persistentGroups(k, m);
  at::Tensor dwPart = wantW ? at::empty({groups, n}, f32) : at::Tensor(); // a row per group
  at::Tensor dbPart = biasGrad ? at::empty({groups, n}, f32) : at::Tensor();
  launch(k,
         {x2, w, dy2, rstd, mean, dx, dwPart, dbPart, wantW ? dw : at::Tensor(),
          biasGrad ? db : at::Tensor()},
         {}, {groups}, op);
  return {dx.view(x.sizes()), dw, db};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>
layerNormCpu(const at::Tensor &x, const std::optional<at::Tensor> &,
             const std::optional<at::Tensor> &, const std::optional<at::Tensor> &, double, bool) {
  checkCuda("layer_norm", {&x});
  return {};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
layerNormBackwardCpu(const at::Tensor &x, const std::optional<at::Tensor> &, const at::Tensor &,
                     const at::Tensor &, const at::Tensor &, bool, bool) {
  checkCuda("layer_norm_backward", {&x});
  return {};
}

// -- cross-entropy -----------------------------------------------------------------------------

void checkLogits(const at::Tensor &logits, const at::Tensor &target, const char *op) {
  TORCH_CHECK_VALUE(logits.dim() == 2 && target.dim() == 1 && target.size(0) == logits.size(0),
                    "cute::", op, ": cross_entropy takes logits (M, V) and targets (M,)");
  TORCH_CHECK_TYPE(target.scalar_type() == at::kLong || target.scalar_type() == at::kInt,
                   "cute::", op, ": cross_entropy targets are int64 or int32, got ",
                   c10::toString(target.scalar_type()));
}

void checkSmoothing(double labelSmoothing, const char *op) {
  TORCH_CHECK_VALUE(labelSmoothing >= 0 && labelSmoothing <= 1, "cute::", op,
                    ": label_smoothing must be in [0, 1], got ", labelSmoothing);
}

std::tuple<at::Tensor, at::Tensor> crossEntropyCuda(const at::Tensor &logitsIn,
                                                    const at::Tensor &targetIn, int64_t ignoreIndex,
                                                    double labelSmoothing) {
  const char *op = "cute::cross_entropy";
  checkCuda("cross_entropy", {&logitsIn, &targetIn});
  checkLogits(logitsIn, targetIn, "cross_entropy");
  checkSmoothing(labelSmoothing, "cross_entropy");
  at::Tensor logits = logitsIn.stride(1) == 1 ? logitsIn : logitsIn.contiguous();
  at::Tensor target = targetIn.contiguous();
  at::TensorOptions f32 = logits.options().dtype(at::kFloat);
  at::Tensor loss = at::empty({logits.size(0)}, f32), lse = at::empty({logits.size(0)}, f32);
  if (logits.size(0) && logits.size(1)) {
    const RowKernel &k = rowKernel("cross_entropy",
                                   join({describe('r', logits, op), describe('v', target, op),
                                         describe('v', loss, op), describe('v', lse, op)}),
                                   labelSmoothing != 0 ? "1" : "0", logits.device().index());
    launch(k, {logits, target, loss, lse}, {labelSmoothing}, {ignoreIndex}, op);
  }
  return {loss, lse};
}

at::Tensor crossEntropyBackwardCuda(const at::Tensor &logitsIn, const at::Tensor &targetIn,
                                    const at::Tensor &lseIn, const at::Tensor &dloss,
                                    int64_t ignoreIndex, double labelSmoothing) {
  const char *op = "cute::cross_entropy_backward";
  checkCuda("cross_entropy_backward", {&logitsIn, &targetIn, &lseIn, &dloss});
  checkLogits(logitsIn, targetIn, "cross_entropy_backward");
  checkSmoothing(labelSmoothing, "cross_entropy_backward");
  at::Tensor logits = logitsIn.stride(1) == 1 ? logitsIn : logitsIn.contiguous();
  at::Tensor target = targetIn.contiguous(), lse = lseIn.to(at::kFloat).contiguous();
  const bool reduced = dloss.dim() == 0;
  TORCH_CHECK_VALUE(reduced || dloss.numel() == logits.size(0),
                    "cute::cross_entropy_backward: dloss is one value or one per row");
  at::Tensor d = dloss.reshape({-1}).to(at::kFloat).contiguous();
  at::Tensor dx = at::empty(logits.sizes(), logits.options());
  if (logits.size(0) && logits.size(1)) {
    const RowKernel &k = rowKernel(
        "cross_entropy_backward",
        join({describe('r', logits, op), describe('v', target, op), describe('v', lse, op),
              describe(reduced ? 's' : 'v', d, op), describe('r', dx, op)}),
        labelSmoothing != 0 ? "1" : "0", logits.device().index());
    launch(k, {logits, target, lse, d, dx}, {labelSmoothing}, {ignoreIndex}, op);
  }
  return dx;
}

std::tuple<at::Tensor, at::Tensor> crossEntropyCpu(const at::Tensor &logits,
                                                   const at::Tensor &target, int64_t, double) {
  checkCuda("cross_entropy", {&logits, &target});
  return {};
}

at::Tensor crossEntropyBackwardCpu(const at::Tensor &logits, const at::Tensor &target,
                                   const at::Tensor &, const at::Tensor &, int64_t, double) {
  checkCuda("cross_entropy_backward", {&logits, &target});
  return {};
}

// -- column sums -------------------------------------------------------------------------------

at::Tensor columnSumCuda(const at::Tensor &x) {
  const char *op = "cute::column_sum";
  checkCuda("column_sum", {&x});
  TORCH_CHECK_VALUE(x.dim() >= 1, "cute::column_sum: x must have at least one dimension");
  const c10::ScalarType type = x.scalar_type();
  TORCH_CHECK_VALUE(type == at::kFloat || type == at::kBFloat16 || type == at::kHalf,
                    "cute::column_sum: x must be float32, bfloat16 or float16, got ",
                    c10::toString(type));
  const int64_t n = x.size(-1), m = n ? x.numel() / n : 0;
  at::Tensor out = at::empty({n}, x.options());
  if (m == 0 || n == 0)
    return out.zero_();
  at::Tensor x2 = rowsOf(x, "column_sum", "x");
  // The partial rows are a fresh allocation: described before it exists (stride N, 16 bytes).
  const std::string part = "r;float32;" + std::to_string(n) + ";" + std::to_string(n) + ";16;0";
  const RowKernel &k =
      rowKernel("column_sum", join({describe('r', x2, op), part, describe('c', out, op)}), "",
                x.device().index());
  // kernels/column_sums.slab_groups: a slab per CTA that runs at once, of 32 rows at least (the
  // builder's rows per group).
  const int64_t groups = persistentGroups(k, m);
  at::Tensor partial = at::empty({groups, n}, x.options().dtype(at::kFloat));
  launch(k, {x2, partial, out}, {}, {groups}, op);
  return out;
}

at::Tensor columnSumCpu(const at::Tensor &x) {
  checkCuda("column_sum", {&x});
  return {};
}

/// cute::row_describe(Tensor t, str kind) -> str: describe() on any device, for the CPU tests
/// that check the builder picks from a description what the kernels pick from the tensor.
std::string rowDescribe(const at::Tensor &t, c10::string_view kind) {
  TORCH_CHECK_VALUE(kind.size() == 1 && std::string("rvcs").find(kind[0]) != std::string::npos,
                    "cute::row_describe: kind is one of r, v, c, s");
  TORCH_CHECK_VALUE(kind[0] != 'r' || t.dim() == 2, "cute::row_describe: rows are 2-D");
  return describe(kind[0], t, "cute::row_describe");
}

} // namespace

void defineRowOps(torch::Library &m) {
  m.def("row_describe(Tensor t, str kind) -> str", &rowDescribe);
  m.def("softmax(Tensor x, bool log=False) -> Tensor");
  m.def("softmax_backward(Tensor y, Tensor dy, bool log=False) -> Tensor");
  m.def("layer_norm(Tensor x, Tensor? weight, Tensor? bias, Tensor? residual, float eps, bool rms) "
        "-> (Tensor, Tensor, Tensor, Tensor)");
  m.def("layer_norm_backward(Tensor x, Tensor? weight, Tensor dy, Tensor rstd, Tensor mean, "
        "bool weight_grad, bool bias_grad) -> (Tensor, Tensor, Tensor)");
  m.def("cross_entropy(Tensor logits, Tensor target, int ignore_index=-100, "
        "float label_smoothing=0.0) -> (Tensor, Tensor)");
  m.def("cross_entropy_backward(Tensor logits, Tensor target, Tensor lse, Tensor dloss, "
        "int ignore_index=-100, float label_smoothing=0.0) -> Tensor");
  m.def("column_sum(Tensor x) -> Tensor");
}

void implementRowOpsCuda(torch::Library &m) {
  m.impl("softmax", &softmaxCuda);
  m.impl("softmax_backward", &softmaxBackwardCuda);
  m.impl("layer_norm", &layerNormCuda);
  m.impl("layer_norm_backward", &layerNormBackwardCuda);
  m.impl("cross_entropy", &crossEntropyCuda);
  m.impl("cross_entropy_backward", &crossEntropyBackwardCuda);
  m.impl("column_sum", &columnSumCuda);
}

void implementRowOpsCpu(torch::Library &m) {
  m.impl("softmax", &softmaxCpu);
  m.impl("softmax_backward", &softmaxBackwardCpu);
  m.impl("layer_norm", &layerNormCpu);
  m.impl("layer_norm_backward", &layerNormBackwardCpu);
  m.impl("cross_entropy", &crossEntropyCpu);
  m.impl("cross_entropy_backward", &crossEntropyBackwardCpu);
  m.impl("column_sum", &columnSumCpu);
}

} // namespace cute_torch::ops
