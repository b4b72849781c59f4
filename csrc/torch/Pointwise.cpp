//===- Pointwise.cpp - cute::pointwise: key, cache, launch, autograd -----===//
//
// The hot path of a call, all in C++: check devices and dtypes, broadcast, allocate the
// output, coalesce the dimensions of the output and every input together, pick the kernel
// variant (a Plan, see cute_torch/pointwise/kernel.py) from a C++ cache and run its host
// entry on the current stream of the inputs' device. A miss asks the Python builder.
//
// cute::pointwise.multi computes several expressions over the same inputs in one kernel (the
// torch.compile backend uses it for intermediates that are also needed outside a fused
// region). Internally every call is the multi form: the expressions travel joined by
// kExprSeparator, which cannot appear in a valid expression.
//
//===----------------------------------------------------------------------===//

#include "Pointwise.h"

#include "OpCommon.h"
#include "PythonBuilder.h"
#include "cute_torch/runtime.h"

#include <ATen/ExpandUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/autograd.h>

#include <algorithm>
#include <array>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace cute_torch::ops {
namespace {

constexpr int kMaxRank = 4;

struct Kernel {
  void (*entry)(void **) = nullptr;
  runtime::LoadedArtifact *runtime = nullptr;
};

/// What one expression list over one combination of input dtypes needs: the result dtypes
/// and the compiled variants.
struct ExprInfo {
  std::vector<c10::ScalarType> outDtypes;
  std::unordered_map<std::string, Kernel> kernels; // by plan key
};

std::mutex cacheMutex;
std::unordered_map<std::string, std::unique_ptr<ExprInfo>> exprCache;
std::unordered_map<std::string, std::string> gradCache;

void checkSameDevice(at::TensorList inputs) {
  const c10::Device device = inputs[0].device();
  for (size_t i = 1; i < inputs.size(); ++i)
    TORCH_CHECK(inputs[i].device() == device,
                "cute::pointwise: expected all inputs on the same device, but x0 is on ",
                deviceName(device), " and x", std::to_string(i), " is on ",
                deviceName(inputs[i].device()));
}

/// Comma-joined language names of `types`.
std::string dtypeNames(c10::ArrayRef<c10::ScalarType> types, const char *what) {
  std::string names;
  for (c10::ScalarType t : types)
    names += std::string(names.empty() ? "" : ",") + dtypeName(t, "cute::pointwise", what);
  return names;
}

/// The builder's view of the dtypes: names, and which inputs are 0-dim (they promote like
/// scalars in torch).
std::vector<BuilderArg> dtypeArgs(c10::string_view expr, at::TensorList inputs,
                                  c10::ArrayRef<c10::ScalarType> outDtypes) {
  std::string names, zeroDims;
  for (size_t i = 0; i < inputs.size(); ++i) {
    names += std::string(i ? "," : "") +
             dtypeName(inputs[i].scalar_type(), "cute::pointwise", "input x" + std::to_string(i));
    zeroDims += inputs[i].dim() == 0 ? '1' : '0';
  }
  return {std::string(expr), names, zeroDims,
          outDtypes.empty() ? BuilderArg::none() : BuilderArg(dtypeNames(outDtypes, "out_dtype"))};
}

/// `expr` holds `count` expressions joined by kExprSeparator; `outDtypes` is empty or one each.
ExprInfo &exprInfo(c10::string_view expr, size_t count, at::TensorList inputs,
                   c10::ArrayRef<c10::ScalarType> outDtypes) {
  std::string key(expr);
  key += '\x1f';
  for (c10::ScalarType t : outDtypes)
    key += static_cast<char>('A' + static_cast<int>(t));
  for (const at::Tensor &t : inputs) {
    key += static_cast<char>('A' + static_cast<int>(t.scalar_type()));
    key += t.dim() == 0 ? '0' : 'n';
  }
  {
    std::lock_guard<std::mutex> lock(cacheMutex);
    auto found = exprCache.find(key);
    if (found != exprCache.end())
      return *found->second;
  }
  // A miss: Python parses and types the expression (errors come back with the position).
  BuilderResult result = callBuilder("dtype", dtypeArgs(expr, inputs, outDtypes));
  auto info = std::make_unique<ExprInfo>();
  for (size_t start = 0; start <= result.text.size();) {
    size_t end = result.text.find(',', start);
    end = end == std::string::npos ? result.text.size() : end;
    info->outDtypes.push_back(
        dtypeFromName(result.text.substr(start, end - start), "cute::pointwise"));
    start = end + 1;
  }
  TORCH_CHECK(info->outDtypes.size() == count, "cute::pointwise: the builder typed ",
              std::to_string(info->outDtypes.size()), " results for ", std::to_string(count),
              " expressions");
  std::lock_guard<std::mutex> lock(cacheMutex);
  auto &slot = exprCache[key];
  if (!slot)
    slot = std::move(info);
  return *slot;
}

/// The output and inputs as one iteration space: sizes (outer to inner) and each input's
/// strides, with size-1 dimensions dropped and mergeable neighbours merged.
struct Geometry {
  int rank = 0;
  std::array<int64_t, kMaxRank> sizes{};
  std::vector<std::array<int64_t, kMaxRank>> strides; // per input
};

bool coalesce(c10::IntArrayRef shape, at::TensorList inputs, Geometry &g) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  const size_t n = inputs.size();
  // Inner to outer: (size, strides of each input).
  c10::SmallVector<int64_t, 8> sizes;
  c10::SmallVector<c10::SmallVector<int64_t, 8>, 8> strides(n);
  for (int64_t d = ndim - 1; d >= 0; --d) {
    if (shape[d] == 1)
      continue;
    bool merge = !sizes.empty();
    c10::SmallVector<int64_t, 8> here(n);
    for (size_t i = 0; i < n; ++i) {
      const int64_t j = d - (ndim - inputs[i].dim());
      here[i] = (j < 0 || inputs[i].size(j) == 1) ? 0 : inputs[i].stride(j);
      if (merge && here[i] != strides[i].back() * sizes.back())
        merge = false;
    }
    if (merge) {
      sizes.back() *= shape[d];
      continue;
    }
    sizes.push_back(shape[d]);
    for (size_t i = 0; i < n; ++i)
      strides[i].push_back(here[i]);
  }
  if (sizes.empty()) { // one element
    sizes.push_back(1);
    for (auto &s : strides)
      s.push_back(0);
  }
  if (sizes.size() > kMaxRank)
    return false;
  g.rank = static_cast<int>(sizes.size());
  g.strides.assign(n, {});
  for (int d = 0; d < g.rank; ++d) {
    g.sizes[d] = sizes[g.rank - 1 - d];
    for (size_t i = 0; i < n; ++i)
      g.strides[i][d] = strides[i][g.rank - 1 - d];
  }
  return true;
}

/// The plan's key (kernel.py's Plan) and what it is built from: per-input inner-stride classes,
/// vector width, 64-bit offsets.
struct Launch {
  std::string planKey, inner;
  int vec = 1;
  bool wide = false;
};

Launch plan(const Geometry &g, at::TensorList outs, at::TensorList inputs) {
  Launch p;
  const int last = g.rank - 1;
  int64_t minElement = 16;
  bool vectorizable = true;
  for (const at::Tensor &out : outs) {
    minElement = std::min<int64_t>(minElement, out.element_size());
    vectorizable &= reinterpret_cast<uintptr_t>(out.data_ptr()) % 16 == 0;
  }
  int64_t extent = outs[0].numel();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int64_t inner = g.strides[i][last];
    p.inner += inner == 1 ? '1' : inner == 0 ? '0' : 's';
    int64_t span = 1;
    for (int d = 0; d < g.rank; ++d)
      span += (g.sizes[d] - 1) * g.strides[i][d];
    extent = std::max(extent, span);
    if (inner == 1) {
      minElement = std::min<int64_t>(minElement, inputs[i].element_size());
      vectorizable &= reinterpret_cast<uintptr_t>(inputs[i].data_ptr()) % 16 == 0;
    } else if (inner != 0) {
      vectorizable = false;
    }
  }
  const int vec = static_cast<int>(16 / minElement);
  vectorizable &= g.sizes[last] % vec == 0;
  for (size_t i = 0; vectorizable && i < inputs.size(); ++i)
    if (p.inner[i] == '1')
      for (int d = 0; d < last; ++d)
        vectorizable &= g.strides[i][d] % vec == 0;
  p.vec = vectorizable ? vec : 1;
  p.wide = extent >= (int64_t(1) << 31);
  // rank, classes, vec, wide, device: short enough to stay in std::string's inline buffer.
  p.planKey += static_cast<char>('0' + g.rank);
  p.planKey += p.inner;
  p.planKey += static_cast<char>('A' + p.vec);
  p.planKey += p.wide ? 'w' : 'n';
  p.planKey += static_cast<char>('0' + outs[0].device().index());
  return p;
}

const Kernel &kernelFor(ExprInfo &info, c10::string_view expr, at::TensorList inputs, int rank,
                        const Launch &p, int device, int64_t segments = 1) {
  {
    std::lock_guard<std::mutex> lock(cacheMutex);
    auto found = info.kernels.find(p.planKey);
    if (found != info.kernels.end())
      return found->second;
  }
  std::vector<BuilderArg> args = dtypeArgs(expr, inputs, info.outDtypes);
  args.insert(args.end(), {BuilderArg(rank), BuilderArg(p.inner), BuilderArg(p.vec),
                           BuilderArg(p.wide), BuilderArg(device), BuilderArg(segments)});
  BuilderResult built = callBuilder("kernel", args);
  TORCH_CHECK(built.ints.size() >= 2, "cute::pointwise: the builder returned no kernel");
  Kernel kernel{reinterpret_cast<void (*)(void **)>(built.ints[0]),
                reinterpret_cast<runtime::LoadedArtifact *>(built.ints[1])};
  std::lock_guard<std::mutex> lock(cacheMutex);
  return info.kernels.emplace(p.planKey, kernel).first->second;
}

void run(const Kernel &kernel, const Geometry &g, const Launch &p, at::TensorList outs,
         at::TensorList inputs) {
  c10::SmallVector<int64_t, 48> slots;
  for (const at::Tensor &t : outs)
    slots.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr())));
  for (const at::Tensor &t : inputs)
    slots.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr())));
  slots.push_back(outs[0].numel());
  for (int d = 0; d < g.rank; ++d)
    slots.push_back(g.sizes[d]);
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (int d = 0; d + 1 < g.rank; ++d)
      slots.push_back(g.strides[i][d]);
    if (p.inner[i] == 's')
      slots.push_back(g.strides[i][g.rank - 1]);
  }
  runOnCurrentStream(kernel.entry, kernel.runtime, slots, outs[0].device(), "cute::pointwise");
}

} // namespace

namespace {

/// cute::pointwise.into's own checks: one output per expression, no separator in them.
void checkInto(const std::vector<std::string> &exprs, at::TensorList outs) {
  TORCH_CHECK_VALUE(!exprs.empty(), "cute::pointwise.into needs at least one expression");
  TORCH_CHECK_VALUE(outs.size() == exprs.size(),
                    "cute::pointwise.into: ", std::to_string(exprs.size()), " expressions but ",
                    std::to_string(outs.size()), " outs");
  for (const std::string &e : exprs)
    TORCH_CHECK_VALUE(e.find(kExprSeparator) == std::string::npos,
                      "cute::pointwise.into: an expression contains the character \\x1e");
}

/// The ops: `expr` holds `count` expressions joined by kExprSeparator. `given` is empty (the
/// outputs are allocated) or one contiguous tensor of the broadcast shape per expression,
/// written in place (cute::pointwise.into).
std::vector<at::Tensor> pointwiseImpl(c10::string_view expr, size_t count, at::TensorList inputs,
                                      c10::ArrayRef<c10::ScalarType> outDtypes,
                                      at::TensorList given = {}) {
  TORCH_CHECK_VALUE(!inputs.empty(), "cute::pointwise needs at least one input tensor");
  const c10::Device device = inputs[0].device();
  checkSameDevice(inputs);
  TORCH_CHECK(device.is_cuda(), "cute::pointwise runs on CUDA tensors; its inputs are on ",
              deviceName(device));
  ExprInfo &info = exprInfo(expr, count, inputs, outDtypes);
  c10::DimVector shape(inputs[0].sizes().begin(), inputs[0].sizes().end());
  for (size_t i = 1; i < inputs.size(); ++i)
    shape = at::infer_size_dimvector(shape, inputs[i].sizes());
  std::vector<at::Tensor> outs;
  for (size_t i = 0; i < given.size(); ++i) {
    const at::Tensor &out = given[i];
    TORCH_CHECK_VALUE(out.device() == device && out.sizes() == c10::IntArrayRef(shape) &&
                          out.is_contiguous() && out.scalar_type() == info.outDtypes[i],
                      "cute::pointwise.into: outs[", std::to_string(i), "] must be a contiguous ",
                      dtypeName(info.outDtypes[i], "cute::pointwise", "out"), " tensor of shape ",
                      shapeText(shape), " on ", deviceName(device), "; got ",
                      dtypeName(out.scalar_type(), "cute::pointwise", "out"), " ",
                      shapeText(out.sizes()), out.is_contiguous() ? "" : " (not contiguous)",
                      " on ", deviceName(out.device()));
    outs.push_back(out);
  }
  if (given.empty())
    for (c10::ScalarType type : info.outDtypes)
      outs.push_back(at::empty(shape, inputs[0].options().dtype(type)));
  if (outs[0].numel() == 0)
    return outs;

  std::vector<at::Tensor> dense; // only when the layout has more than kMaxRank dimensions
  at::TensorList operands = inputs;
  Geometry g;
  if (!coalesce(shape, operands, g)) {
    for (const at::Tensor &t : inputs)
      dense.push_back(t.expand(shape).contiguous());
    operands = dense;
    TORCH_INTERNAL_ASSERT(coalesce(shape, operands, g));
  }
  const Launch p = plan(g, outs, operands);
  const Kernel &kernel = kernelFor(info, expr, operands, g.rank, p, device.index());
  run(kernel, g, p, outs, operands);
  return outs;
}

// -- cute::pointwise.foreach_into: one launch for many independent segments ----------------

/// Kernel parameter bytes one segmented launch may take: CUDA's 4 KB, less what the DSL adds.
constexpr int64_t kSegmentParamBytes = 3584;

/// Segments of at least this many elements launch on their own (the one-segment kernel): in the
/// segmented kernel every block first picks its segment's pointers (a select per pointer per
/// segment, 8 x 31 for 32 AdamW segments), which cost the H200 17 % at d_model 4096 (0.858 ms
/// against 0.735 per parameter), while a launch of this size hides its own launch gap.
constexpr int64_t kOwnLaunchNumel = int64_t(1) << 22;

/// The segments of one foreach_into call: `count` of them, each `k` inputs and `m` outs.
struct Segments {
  at::TensorList inputs, outs;
  size_t k = 0, m = 0, count = 0;
  at::TensorList in(size_t s) const { return inputs.slice(s * k, k); }
  at::TensorList out(size_t s) const { return outs.slice(s * m, m); }
};

/// Segment `s`'s per-input classes for the segmented kernel ('1': contiguous of the outputs'
/// shape, '0': one element that broadcasts), or "" where it needs the general path: its
/// dtypes or device differ from segment 0's (which typed the expressions), an output is not
/// contiguous of one shape, or an input is strided or broadcasts along some dimensions only.
std::string segmentClasses(const Segments &all, size_t s,
                           c10::ArrayRef<c10::ScalarType> outDtypes) {
  at::TensorList in = all.in(s), out = all.out(s), first = all.in(0);
  const at::Tensor &lead = out[0];
  const c10::Device device = first[0].device();
  for (size_t j = 0; j < all.m; ++j)
    if (out[j].device() != device || out[j].scalar_type() != outDtypes[j] ||
        out[j].sizes() != lead.sizes() || !out[j].is_contiguous())
      return "";
  std::string inner;
  for (size_t i = 0; i < all.k; ++i) {
    const at::Tensor &t = in[i];
    if (t.device() != device || t.scalar_type() != first[i].scalar_type() ||
        (t.dim() == 0) != (first[i].dim() == 0))
      return "";
    if (t.sizes() == lead.sizes() && t.is_contiguous())
      inner += '1';
    else if (t.numel() == 1 && t.dim() <= lead.dim())
      inner += '0';
    else
      return "";
  }
  return inner;
}

/// Launches `chosen` (segments of one class string) in as few segmented kernels as the
/// parameter space allows; each launch's segment count is a power of two (padded with empty
/// segments) so that few kernels serve every parameter count.
void launchSegments(ExprInfo &info, c10::string_view expr, const Segments &all,
                    const std::string &inner, const std::vector<size_t> &chosen) {
  const at::Tensor &lead = all.out(chosen[0])[0];
  int64_t minElement = 16;
  bool aligned = true, wide = false;
  for (size_t s : chosen) {
    for (const at::Tensor &t : all.out(s)) {
      minElement = std::min<int64_t>(minElement, t.element_size());
      aligned &= reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
      wide |= t.numel() >= (int64_t(1) << 31);
    }
    at::TensorList in = all.in(s);
    for (size_t i = 0; i < all.k; ++i)
      if (inner[i] == '1') {
        minElement = std::min<int64_t>(minElement, in[i].element_size());
        aligned &= reinterpret_cast<uintptr_t>(in[i].data_ptr()) % 16 == 0;
      }
  }
  Launch p;
  p.inner = inner;
  p.vec = aligned ? static_cast<int>(16 / minElement) : 1;
  p.wide = wide;
  // Per segment: a pointer per tensor, its numel and (added by the host entry) its blocks' end.
  const int64_t perSegment = static_cast<int64_t>(all.m + all.k) * 8 + 2 * (wide ? 8 : 4);
  size_t cap = 1;
  while (static_cast<int64_t>(cap * 2) * perSegment <= kSegmentParamBytes)
    cap *= 2;
  const int device = lead.device().index();
  for (size_t begin = 0; begin < chosen.size(); begin += cap) {
    const size_t real = std::min(cap, chosen.size() - begin);
    size_t padded = 2;
    while (padded < real)
      padded *= 2;
    Launch launch = p;
    launch.planKey = std::string("1") + inner + static_cast<char>('A' + p.vec) +
                     (wide ? 'w' : 'n') + static_cast<char>('0' + device) + 'g' +
                     std::to_string(padded);
    const Kernel &kernel = kernelFor(info, expr, all.in(chosen[begin]), 1, launch, device,
                                     static_cast<int64_t>(padded));
    c10::SmallVector<int64_t, 256> slots;
    for (size_t j = 0; j < padded; ++j) { // an empty segment repeats the last one's pointers
      const size_t s = chosen[begin + std::min(j, real - 1)];
      for (const at::Tensor &t : all.out(s))
        slots.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr())));
      for (const at::Tensor &t : all.in(s))
        slots.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr())));
    }
    for (size_t j = 0; j < padded; ++j)
      slots.push_back(j < real ? all.out(chosen[begin + j])[0].numel() : 0);
    runOnCurrentStream(kernel.entry, kernel.runtime, slots, lead.device(),
                       "cute::pointwise.foreach_into");
  }
}

} // namespace

at::Tensor pointwiseCuda(c10::string_view expr, at::TensorList inputs,
                         std::optional<c10::ScalarType> outDtype) {
  TORCH_CHECK_VALUE(expr.find(kExprSeparator) == c10::string_view::npos,
                    "cute::pointwise: the expression contains the character \\x1e");
  c10::ArrayRef<c10::ScalarType> outDtypes;
  if (outDtype)
    outDtypes = *outDtype;
  return pointwiseImpl(expr, 1, inputs, outDtypes)[0];
}

std::vector<at::Tensor> pointwiseMultiCuda(std::vector<std::string> exprs, at::TensorList inputs,
                                           std::optional<std::vector<c10::ScalarType>> outDtypes) {
  TORCH_CHECK_VALUE(!exprs.empty(), "cute::pointwise.multi needs at least one expression");
  TORCH_CHECK_VALUE(!outDtypes || outDtypes->size() == exprs.size(),
                    "cute::pointwise.multi: ", std::to_string(exprs.size()), " expressions but ",
                    std::to_string(outDtypes ? outDtypes->size() : 0), " out_dtypes");
  for (const std::string &e : exprs)
    TORCH_CHECK_VALUE(e.find(kExprSeparator) == std::string::npos,
                      "cute::pointwise.multi: an expression contains the character \\x1e");
  return pointwiseImpl(joinExprs(exprs), exprs.size(), inputs,
                       outDtypes ? c10::ArrayRef<c10::ScalarType>(*outDtypes)
                                 : c10::ArrayRef<c10::ScalarType>());
}

void pointwiseIntoCuda(std::vector<std::string> exprs, at::TensorList inputs, at::TensorList outs) {
  checkInto(exprs, outs);
  std::vector<c10::ScalarType> outDtypes;
  for (const at::Tensor &out : outs)
    outDtypes.push_back(out.scalar_type());
  pointwiseImpl(joinExprs(exprs), exprs.size(), inputs, outDtypes, outs);
  for (const at::Tensor &out : outs) // as an in-place op's ADInplaceOrView kernel would
    torch::autograd::impl::bump_version(out);
}

namespace {

/// cute::pointwise.foreach_into's own checks; the segments they describe.
Segments checkForeachInto(const std::vector<std::string> &exprs, at::TensorList inputs,
                          at::TensorList outs) {
  TORCH_CHECK_VALUE(!exprs.empty(), "cute::pointwise.foreach_into needs at least one expression");
  for (const std::string &e : exprs)
    TORCH_CHECK_VALUE(e.find(kExprSeparator) == std::string::npos,
                      "cute::pointwise.foreach_into: an expression contains the character \\x1e");
  Segments all{inputs, outs, 0, exprs.size(), outs.size() / exprs.size()};
  TORCH_CHECK_VALUE(all.count > 0 && outs.size() % exprs.size() == 0,
                    "cute::pointwise.foreach_into: ", std::to_string(outs.size()),
                    " outs are not segments of one out per expression (",
                    std::to_string(exprs.size()), ")");
  TORCH_CHECK_VALUE(!inputs.empty() && inputs.size() % all.count == 0,
                    "cute::pointwise.foreach_into: ", std::to_string(inputs.size()),
                    " inputs do not split into ", std::to_string(all.count),
                    " segments of equally many (one segment per ", std::to_string(exprs.size()),
                    " outs)");
  all.k = inputs.size() / all.count;
  return all;
}

} // namespace

void pointwiseForeachIntoCuda(std::vector<std::string> exprs, at::TensorList inputs,
                              at::TensorList outs) {
  const Segments all = checkForeachInto(exprs, inputs, outs);
  const std::string expr = joinExprs(exprs);
  std::vector<c10::ScalarType> outDtypes;
  for (const at::Tensor &out : all.out(0))
    outDtypes.push_back(out.scalar_type());
  at::TensorList first = all.in(0);
  checkSameDevice(first);
  TORCH_CHECK(first[0].device().is_cuda(), "cute::pointwise.foreach_into runs on CUDA tensors; ",
              "its inputs are on ", deviceName(first[0].device()));
  ExprInfo &info = exprInfo(expr, exprs.size(), first, outDtypes); // results cast to the outs'
  // Segments in the segmented kernel's shape, by class string; the others one at a time (the
  // general path checks them as cute::pointwise.into does), and so are large ones.
  std::vector<std::pair<std::string, std::vector<size_t>>> groups;
  for (size_t s = 0; s < all.count; ++s) {
    const std::string inner = segmentClasses(all, s, outDtypes);
    if (inner.empty() || all.out(s)[0].numel() >= kOwnLaunchNumel) {
      std::vector<c10::ScalarType> types;
      for (const at::Tensor &out : all.out(s))
        types.push_back(out.scalar_type());
      try {
        pointwiseImpl(expr, exprs.size(), all.in(s), types, all.out(s));
      } catch (c10::Error &e) {
        e.add_context("segment " + std::to_string(s) + " of cute::pointwise.foreach_into");
        throw;
      }
      continue;
    }
    if (all.out(s)[0].numel() == 0)
      continue;
    auto group =
        std::find_if(groups.begin(), groups.end(), [&](const auto &g) { return g.first == inner; });
    if (group == groups.end())
      groups.push_back({inner, {s}});
    else
      group->second.push_back(s);
  }
  for (const auto &[inner, chosen] : groups)
    launchSegments(info, expr, all, inner, chosen);
  for (const at::Tensor &out : outs)
    torch::autograd::impl::bump_version(out);
}

at::Tensor pointwiseCpu(c10::string_view, at::TensorList inputs, std::optional<c10::ScalarType>) {
  TORCH_CHECK(false, "cute::pointwise runs on CUDA tensors; got a tensor on ",
              inputs.empty() ? "cpu" : deviceName(inputs[0].device()),
              ". Move the inputs with .cuda()");
}

std::vector<at::Tensor> pointwiseMultiCpu(std::vector<std::string>, at::TensorList inputs,
                                          std::optional<std::vector<c10::ScalarType>> outDtypes) {
  return {pointwiseCpu("", inputs, std::nullopt)};
}

void pointwiseIntoCpu(std::vector<std::string> exprs, at::TensorList inputs, at::TensorList outs) {
  checkInto(exprs, outs);
  pointwiseCpu("", inputs, std::nullopt);
}

void pointwiseForeachIntoCpu(std::vector<std::string> exprs, at::TensorList inputs,
                             at::TensorList outs) {
  checkForeachInto(exprs, inputs, outs);
  pointwiseCpu("", inputs, std::nullopt);
}

// -- autograd
// --------------------------------------------------------------------------------------

const PointwiseOp &pointwiseOp() {
  static auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("cute::pointwise", "")
          .typed<at::Tensor(c10::string_view, at::TensorList, std::optional<c10::ScalarType>)>();
  return op;
}

namespace {

/// d(expr)/d(x_index) * x_n as an expression over x0..x_{n-1} and the incoming gradient x_n;
/// "" if the expression does not depend on that input differentiably.
std::string gradExpression(const std::string &expr, size_t n, size_t index) {
  std::string key = expr + '\x1f' + std::to_string(n) + '/' + std::to_string(index);
  {
    std::lock_guard<std::mutex> lock(cacheMutex);
    auto found = gradCache.find(key);
    if (found != gradCache.end())
      return found->second;
  }
  BuilderResult result =
      callBuilder("grad", {expr, static_cast<int64_t>(n), static_cast<int64_t>(index)});
  std::lock_guard<std::mutex> lock(cacheMutex);
  return gradCache.emplace(key, result.isNone ? "" : result.text).first->second;
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class PointwiseFunction : public torch::autograd::Function<PointwiseFunction> {
public:
  static at::Tensor forward(AutogradContext *ctx, c10::string_view expr, at::TensorList inputs,
                            std::optional<c10::ScalarType> outDtype) {
    at::AutoDispatchBelowADInplaceOrView below;
    ctx->saved_data["expr"] = std::string(expr);
    ctx->save_for_backward(inputs.vec());
    return pointwiseOp().call(expr, inputs, outDtype);
  }

  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    const std::string expr = ctx->saved_data["expr"].toStringRef();
    variable_list inputs = ctx->get_saved_variables();
    const size_t n = inputs.size();
    variable_list operands = inputs;
    operands.push_back(grads[0]);
    variable_list result(n + 2); // expr, each input, out_dtype
    for (size_t i = 0; i < n; ++i) {
      if (!ctx->needs_input_grad(i))
        continue;
      const at::Tensor &input = inputs[i];
      const std::string gradExpr = gradExpression(expr, n, i);
      if (gradExpr.empty()) {
        result[i + 1] = at::zeros_like(input);
        continue;
      }
      // A broadcast input sums its gradient: accumulate in float32 for half types.
      const bool reduces = input.sym_sizes() != grads[0].sym_sizes();
      const c10::ScalarType type = input.scalar_type();
      const bool half = type == c10::kHalf || type == c10::kBFloat16;
      at::Tensor grad =
          pointwiseOp().call(gradExpr, operands, reduces && half ? c10::kFloat : type);
      if (reduces)
        grad = at::sum_to(grad, input.sym_sizes()).to(type);
      result[i + 1] = grad;
    }
    return result;
  }
};

} // namespace

at::Tensor pointwiseAutograd(c10::string_view expr, at::TensorList inputs,
                             std::optional<c10::ScalarType> outDtype) {
  if (needsGradNode(inputs)) {
    c10::ArrayRef<c10::ScalarType> outDtypes;
    if (outDtype)
      outDtypes = *outDtype;
    const c10::ScalarType type = exprInfo(expr, 1, inputs, outDtypes).outDtypes[0];
    if (c10::isFloatingType(type))
      return PointwiseFunction::apply(expr, inputs, outDtype);
  }
  at::AutoDispatchBelowADInplaceOrView below;
  return pointwiseOp().call(expr, inputs, outDtype);
}

} // namespace cute_torch::ops
