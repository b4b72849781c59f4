//===- Gemm.cpp - cute::gemm: views, key, cache, launch --------------------===//
//
// The hot path of a call, all in C++: check shapes and dtypes, allocate the outputs, describe
// every operand as the (rows, cols[, L]) view the kernel reads (the same views as
// kernels/gemm_sm90.py's host_arguments), pick the compiled kernel from a C++ cache by the
// views' static pattern, and run its host entry on the current stream. A miss asks the Python
// builder (cute_torch/ops/gemm_build.py), which compiles the kernel for the views and returns
// its host entry and its argument recipe: which view's pointer, extent or stride goes into
// each argument slot.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include "OpCommon.h"
#include "Pointwise.h"
#include "PythonBuilder.h"
#include "cute_torch/runtime.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <mutex>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace cute_torch::ops {
namespace {

constexpr size_t kMaxOutputs = 4;

/// One operand as the kernel reads it: (rows, cols) or (rows, cols, L) extents and strides in
/// elements (a: (M, K), b: (N, K), outputs and inputs: (M, N)).
struct View {
  at::Tensor tensor;
  int rank = 2;
  std::array<int64_t, 3> sizes{1, 1, 1};
  std::array<int64_t, 3> strides{0, 0, 0};
};

/// The compiled kernel of one key: its host entry, the runtime that runs it, and the slot
/// recipe (kind * 1000 + view * 10 + dim; kinds: 0 pointer, 1 extent, 2 stride, 3 SM count).
struct GemmKernel {
  void (*entry)(void **) = nullptr;
  runtime::LoadedArtifact *runtime = nullptr;
  std::vector<int64_t> recipe;
};

std::mutex cacheMutex;
std::unordered_map<std::string, GemmKernel> kernelCache;

/// The view of a matrix operand: `rowDim` and `colDim` of `t`, its batch dim (or none: the
/// batch broadcast with stride 0 when the GEMM is batched).
View matrixView(const at::Tensor &t, int rowDim, int colDim, int batchDim, int64_t batches,
                bool batched) {
  View v;
  v.tensor = t;
  v.rank = batched ? 3 : 2;
  v.sizes = {t.size(rowDim), t.size(colDim), batches};
  v.strides = {t.stride(rowDim), t.stride(colDim), batchDim >= 0 ? t.stride(batchDim) : 0};
  return v;
}

/// An epilogue input broadcast to the output's (rows, cols[, L]) view.
View inputView(const at::Tensor &x, size_t index, c10::IntArrayRef outShape, bool batched,
               bool rows) {
  // The output's dims, outermost first, as (L, M, N), (M, N), or the rows path's (L * M, N).
  std::vector<int64_t> shape(outShape.begin(), outShape.end());
  if (rows)
    shape = {outShape[0] * outShape[1], outShape[2]};
  const int64_t outRank = static_cast<int64_t>(shape.size());
  // (The rows path takes only inputs whose sizes but the last are 1: they may have more dims.)
  TORCH_CHECK_VALUE(x.dim() <= outRank || rows, "cute::gemm: input x", std::to_string(index),
                    " of shape ", shapeText(x.sizes()), " does not broadcast to the output's ",
                    shapeText(outShape));
  std::vector<int64_t> strides(outRank, 0);
  for (int64_t i = 0; i < outRank; ++i) {
    const int64_t j = i - (outRank - x.dim());
    if (j < 0 || x.size(j) == 1)
      continue;
    TORCH_CHECK_VALUE(x.size(j) == shape[i], "cute::gemm: input x", std::to_string(index),
                      " of shape ", shapeText(x.sizes()), " does not broadcast to the output's ",
                      shapeText(outShape));
    strides[i] = x.stride(j);
  }
  View v;
  v.tensor = x;
  v.rank = outRank;
  if (outRank == 3) {
    v.sizes = {shape[1], shape[2], shape[0]};
    v.strides = {strides[1], strides[2], strides[0]};
  } else {
    v.sizes = {shape[0], shape[1], 1};
    v.strides = {strides[0], strides[1], 0};
  }
  return v;
}

/// Whether TMA can read `v` in place: a 16-byte aligned address and strides, and rows or
/// columns contiguous.
bool tmaAddressable(const View &v) {
  const int64_t size = v.tensor.element_size();
  if (reinterpret_cast<uintptr_t>(v.tensor.data_ptr()) % 16)
    return false;
  if (v.strides[0] != 1 && v.strides[1] != 1)
    return false;
  for (int d = 0; d < v.rank; ++d)
    if (v.strides[d] != 1 && v.sizes[d] > 1 && (v.strides[d] * size) % 16)
      return false;
  return true;
}

/// A row-major copy of `t` whose rows start 16 bytes apart, which TMA and cp.async can always
/// read. TMA never reads the padding (its extent is the real row length); the Ampere kernels'
/// last 16-byte piece of a K-major row does, so they ask for `zeros` there.
at::Tensor pitchedCopy(const at::Tensor &t, bool zeros = false) {
  const int64_t cols = t.size(-1), perChunk = 16 / t.element_size();
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  shape.back() = (cols + perChunk - 1) / perChunk * perChunk;
  at::Tensor copy =
      (zeros ? at::zeros(shape, t.options()) : at::empty(shape, t.options())).narrow(-1, 0, cols);
  copy.copy_(t);
  return copy;
}

/// The pitched copy of an operand with K contiguous: a (.., M, K) as is, b (.., K, N) (`isB`)
/// through its transpose.
at::Tensor kMajorCopy(const at::Tensor &t, bool isB, bool zeros = false) {
  return isB ? pitchedCopy(t.transpose(-1, -2), zeros).transpose(-1, -2) : pitchedCopy(t, zeros);
}

/// Whether the Ampere kernels read an operand view ((M or N, K[, L])) in place: K-major with K a
/// multiple of 8, or MN-major with its last 16-byte piece inside the storage
/// (kernels/gemm_sm80.py).
bool ampereReadable(const View &v) {
  if (v.strides[1] == 1 && v.sizes[1] != 1)
    return v.sizes[0] == 1 || v.sizes[1] % 8 == 0;
  if (v.sizes[0] % 8 == 0)
    return true;
  int64_t last = v.tensor.storage_offset() + (v.sizes[0] + 7) / 8 * 8;
  for (int d = 1; d < v.rank; ++d)
    last += (v.sizes[d] - 1) * v.strides[d];
  return last * v.tensor.element_size() <= static_cast<int64_t>(v.tensor.storage().nbytes());
}

/// 16 if the view's data is 16-byte aligned, else its element size.
int64_t alignment(const View &v) {
  return reinterpret_cast<uintptr_t>(v.tensor.data_ptr()) % 16 ? v.tensor.element_size() : 16;
}

/// Whether offsets into `v` can reach 2**31 elements (TensorArg's `wide`, _needs_64bit).
bool wide(const View &v) {
  int64_t extent = 1;
  bool huge = false;
  for (int d = 0; d < v.rank; ++d) {
    if (v.sizes[d] > 0)
      extent += (v.sizes[d] - 1) * std::abs(v.strides[d]);
    huge |= v.sizes[d] >= (int64_t(1) << 31);
  }
  return huge || extent >= (int64_t(1) << 31);
}

/// The static pattern of a view that the compiled kernel depends on: dtype, rank, per dim
/// whether the stride is 1 (and the extent not), 0, even or odd; whether offsets need 64 bits.
void appendPattern(std::string &key, const View &v) {
  key += static_cast<char>('A' + static_cast<int>(v.tensor.scalar_type()));
  for (int d = 0; d < v.rank; ++d)
    key += v.strides[d] == 0                      ? '0'
           : v.strides[d] == 1 && v.sizes[d] != 1 ? '1'
           : v.strides[d] % 2                     ? 's'
                                                  : 'e'; // even: gemm_sm90.reads_pairs
  key += wide(v) ? 'w' : 'n';
  key += alignment(v) == 16 ? 'a' : 'u';
}

bool isFp8(c10::ScalarType t) { return t == c10::kFloat8_e4m3fn || t == c10::kFloat8_e5m2; }

/// "dtype;sizes;strides;alignment", what the builder describes the view's TensorArg from.
std::string viewText(const View &v) {
  const c10::ScalarType type = v.tensor.scalar_type();
  std::string text = type == c10::kFloat8_e4m3fn ? "float8_e4m3fn"
                     : type == c10::kFloat8_e5m2 ? "float8_e5m2"
                                                 : dtypeName(type, "cute::gemm", "an operand");
  for (int d = 0; d < v.rank; ++d)
    text += (d ? "," : ";") + std::to_string(v.sizes[d]);
  for (int d = 0; d < v.rank; ++d)
    text += (d ? "," : ";") + std::to_string(v.strides[d]);
  return text + ";" + std::to_string(alignment(v));
}

/// Whether an operand's (rows, K) view has K contiguous (the wgmma's K-major mode).
bool isKMajor(const View &v) { return v.strides[1] == 1 || v.sizes[1] == 1; }

/// A tile's cost per k-tile in columns beyond its own (kernels/gemm_sm90.py's
/// TILE_OVERHEAD_COLUMNS, with the measurements behind it).
constexpr int64_t kTileOverheadColumns = 35;

/// What ping-pong's hidden epilogues save, in percent of a plain tile's time
/// (kernels/gemm_sm90.py's PINGPONG_SAVES).
constexpr int64_t kPingpongSaves = 7;

/// The time of an M x N output in 128-row tiles of `width` columns: its waves (rounded up) times
/// a tile's cost, its columns plus kTileOverheadColumns (kernels/gemm_sm90.py's wave_cost).
int64_t waveCost(int64_t m, int64_t n, int64_t batches, int64_t sms, int64_t width) {
  const int64_t tiles = (m + 127) / 128 * ((n + width - 1) / width) * batches;
  return (tiles + sms - 1) / sms * (width + kTileOverheadColumns);
}

/// 256-column tiles unless 128 x 256 tiles would leave more than half the SMs idle or N is
/// narrow, then 128, and 64 where 128 x 128 tiles would; otherwise the width whose waves times
/// its columns plus kTileOverheadColumns is least, where that is at least 10 % under 256's:
/// 128, 192 or 256, or with `anyWidth` (16-bit operands, B K-major, no gate) any multiple of 16
/// from 128 (kernels/gemm_sm90.py's choose_tile_n).
int64_t chooseTileN(int64_t m, int64_t n, int64_t batches, int64_t sms, bool gated, bool anyWidth) {
  auto tiles = [&](int64_t width) { return (m + 127) / 128 * ((n + width - 1) / width) * batches; };
  if (n <= 64 || 2 * tiles(128) <= sms)
    return 64;
  if (n <= 128 || 2 * tiles(256) <= sms)
    return 128;
  if (gated)
    return 256;
  auto cost = [&](int64_t width) { return waveCost(m, n, batches, sms, width); };
  int64_t best = 256;
  for (int64_t width = 256; width >= 128; width -= anyWidth ? 16 : 64)
    if (cost(width) < cost(best))
      best = width;
  return 10 * cost(best) <= 9 * cost(256) ? best : 256;
}

/// Columns of 64-row ping-pong tiles where their waves cost less than those of the 128-row
/// tiles of `tileN` columns, else 0: considered where M <= 64, where 128 x 128 tiles would leave
/// half the SMs idle, or where 128 x 256 tiles make at most two waves and K is at most 2048; a
/// 64-row tile of `width` columns costs 0.3 * width + 48 (kernels/gemm_sm90.py's short_tile_n and
/// short_tile_cost, with the measurements). In tenths, to stay in integers.
int64_t chooseShortTileN(int64_t m, int64_t n, int64_t k, int64_t batches, int64_t sms,
                         int64_t tileN) {
  auto tiles = [&](int64_t rows, int64_t width) {
    return (m + rows - 1) / rows * ((n + width - 1) / width) * batches;
  };
  auto waves = [&](int64_t rows, int64_t width) { return (tiles(rows, width) + sms - 1) / sms; };
  if (!(m <= 64 || 2 * tiles(128, 128) <= sms || (k <= 2048 && tiles(128, 256) <= 2 * sms)))
    return 0;
  auto shortCost = [&](int64_t width) { return waves(64, width) * (3 * width + 480); };
  int64_t best = 128;
  for (int64_t width : {192, 256})
    if (shortCost(width) < shortCost(best))
      best = width;
  return shortCost(best) < 10 * waves(128, tileN) * (tileN + kTileOverheadColumns) ? best : 0;
}

/// Whether ping-pong reads epilogue input `v` by TMA through shared memory: a whole 16-bit
/// (M, N[, L]) tensor, N contiguous, no broadcast mode, that TMA can address
/// (kernels/gemm_sm90.py's staged_inputs).
bool stagedInput(const View &v) {
  const c10::ScalarType type = v.tensor.scalar_type();
  if ((type != c10::kBFloat16 && type != c10::kHalf) || v.strides[1] != 1 ||
      reinterpret_cast<uintptr_t>(v.tensor.data_ptr()) % 16)
    return false;
  for (int d = 0; d < v.rank; ++d)
    if (v.strides[d] == 0 || (d != 1 && (v.strides[d] * 2) % 16))
      return false;
  return true;
}

/// Whether the cooperative schedule's `tileN`-wide tiles keep 3 operand stages beside
/// `staged` whole input tiles and the outputs' 32-column boxes (kernels/gemm_sm90.py's
/// _stages and host_arguments).
bool cooperativeStages(const std::vector<View> &views, size_t outputs, int64_t tileN,
                       size_t staged) {
  constexpr int64_t kSmemBytes = 227 * 1024, kRows = 128, kDepth = 64, kBox = 32;
  int64_t epilogue = static_cast<int64_t>(staged) * kRows * tileN * 2;
  for (size_t i = 2; i < 2 + outputs; ++i)
    epilogue += 2 * kRows * kBox * views[i].tensor.element_size();
  return (tileN == 128 || tileN == 256) &&
         (kSmemBytes - epilogue - 1024) / ((kRows + tileN) * kDepth * 2) >= 3;
}

/// "" for the cooperative schedule, else "h" (ping-pong over 64-row tiles: `short_`), "p"
/// (ping-pong) or "c" (cooperative, staging a whole input) and a 0/1 per epilogue input (staged
/// or not): ping-pong where the epilogue has work to hide (a second output, a staged input, a
/// broadcast input such as a bias, or a function call: `calls`), K is at most 2048 and
/// 256-wide tiles were chosen (kernels/gemm_sm90.py's choose_schedule, with the measurements).
std::string chooseSchedule(const std::vector<View> &views, size_t outputs, int64_t tileN,
                           bool calls, bool gated, bool fp8, bool short_) {
  std::string flags;
  bool broadcast = false;
  for (size_t i = 2 + outputs; i < views.size(); ++i) {
    flags += stagedInput(views[i]) ? '1' : '0';
    for (int d = 0; d < views[i].rank; ++d)
      broadcast = broadcast || views[i].strides[d] == 0;
  }
  if (short_)
    return "h" + flags;
  const bool heavy = outputs >= 2 || calls || broadcast || flags.find('1') != std::string::npos;
  const int64_t k = views[0].sizes[1];
  if (heavy && k <= 2048 && tileN == 256 && !gated && !fp8)
    return "p" + flags;
  const size_t staged = std::count(flags.begin(), flags.end(), '1');
  return staged && !gated && !fp8 && cooperativeStages(views, outputs, tileN, staged) ? "c" + flags
                                                                                      : "";
}

/// The Ampere kernels' tile columns: 256 unless 128 x 256 tiles would leave more than half the
/// SMs idle or N is narrow (kernels/gemm_sm80.py's choose_config; it takes 128 where the
/// accumulators of a 256-wide tile do not fit in shared memory).
int64_t chooseAmpereTileN(int64_t m, int64_t n, int64_t batches, int64_t sms) {
  const int64_t tiles = (m + 127) / 128 * ((n + 255) / 256) * batches;
  return n <= 128 || 2 * tiles <= sms ? 128 : 256;
}

const GemmKernel &kernelFor(const std::string &key, const std::vector<View> &views,
                            const std::string &epilogues, size_t outputs, int64_t tileN,
                            const std::string &schedule, int device, int64_t family) {
  {
    std::lock_guard<std::mutex> lock(cacheMutex);
    auto found = kernelCache.find(key);
    if (found != kernelCache.end())
      return found->second;
  }
  std::string described;
  for (const View &v : views)
    described += (described.empty() ? "" : "|") + viewText(v);
  BuilderResult built =
      callBuilder("gemm", {BuilderArg(epilogues), BuilderArg(static_cast<int64_t>(outputs)),
                           BuilderArg(described), BuilderArg(tileN), BuilderArg(device),
                           BuilderArg(family), BuilderArg(schedule)});
  TORCH_CHECK(built.ints.size() >= 2, "cute::gemm: the builder returned no kernel");
  GemmKernel kernel{reinterpret_cast<void (*)(void **)>(built.ints[0]),
                    reinterpret_cast<runtime::LoadedArtifact *>(built.ints[1]),
                    {built.ints.begin() + 2, built.ints.end()}};
  std::lock_guard<std::mutex> lock(cacheMutex);
  return kernelCache.emplace(key, std::move(kernel)).first->second;
}

void run(const GemmKernel &kernel, const std::vector<View> &views, int64_t sms) {
  c10::SmallVector<int64_t, 48> slots;
  for (int64_t code : kernel.recipe) {
    const int64_t kind = code / 1000, view = code / 10 % 100, dim = code % 10;
    TORCH_INTERNAL_ASSERT(kind == 3 || static_cast<size_t>(view) < views.size());
    switch (kind) {
    case 0:
      slots.push_back(
          static_cast<int64_t>(reinterpret_cast<uintptr_t>(views[view].tensor.data_ptr())));
      break;
    case 1:
      slots.push_back(views[view].sizes[dim]);
      break;
    case 2:
      slots.push_back(views[view].strides[dim]);
      break;
    default:
      slots.push_back(sms);
    }
  }
  runOnCurrentStream(kernel.entry, kernel.runtime, slots, views[0].tensor.device(), "cute::gemm");
}

void checkOperands(const at::Tensor &a, const at::Tensor &b, at::TensorList inputs) {
  TORCH_CHECK_VALUE((a.dim() == 2 || a.dim() == 3) && (b.dim() == 2 || b.dim() == 3),
                    "cute::gemm: a and b are (M, K) / (L, M, K) and (K, N) / (L, K, N), got a ",
                    shapeText(a.sizes()), " and b ", shapeText(b.sizes()));
  TORCH_CHECK_VALUE(a.size(-1) == b.size(-2), "cute::gemm: a ", shapeText(a.sizes()), " and b ",
                    shapeText(b.sizes()), " disagree on K (", std::to_string(a.size(-1)), " vs ",
                    std::to_string(b.size(-2)), ")");
  TORCH_CHECK_VALUE(a.dim() == 2 || b.dim() == 2 || a.size(0) == b.size(0), "cute::gemm: a ",
                    shapeText(a.sizes()), " and b ", shapeText(b.sizes()),
                    " have different batch sizes");
  TORCH_CHECK_VALUE((a.scalar_type() == b.scalar_type() &&
                     (a.scalar_type() == c10::kBFloat16 || a.scalar_type() == c10::kHalf)) ||
                        (isFp8(a.scalar_type()) && isFp8(b.scalar_type())),
                    "cute::gemm: a and b are both bfloat16, both float16, or float8 (e4m3fn / "
                    "e5m2), got ",
                    c10::toString(a.scalar_type()), " and ", c10::toString(b.scalar_type()));
  for (const at::Tensor &t : inputs)
    TORCH_CHECK(t.device() == a.device(), "cute::gemm: every tensor must be on ",
                deviceName(a.device()), ", got one on ", deviceName(t.device()));
  TORCH_CHECK(b.device() == a.device(), "cute::gemm: a is on ", deviceName(a.device()),
              " and b on ", deviceName(b.device()));
}

void checkCuda(const at::Tensor &a) {
  TORCH_CHECK(a.device().is_cuda(), "cute::gemm runs on CUDA tensors; a is on ",
              deviceName(a.device()));
}

/// The outputs and every operand's view for one call; `views` is empty when there is nothing
/// to compute (an empty output).
struct Plan {
  std::vector<at::Tensor> outs;
  std::vector<View> views;
  int64_t batches = 1; // tiles of a batched GEMM (1 on the rows path)
};

/// The names of an expression in the pointwise language, as [begin, end) offsets: the runs of
/// letters, digits and '_' (a number such as 1e5 is one run too; the callers tell them apart).
std::vector<std::pair<size_t, size_t>> nameSpans(const std::string &expr) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::vector<std::pair<size_t, size_t>> spans;
  for (size_t i = 0; i < expr.size();) {
    if (!word(expr[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < expr.size() && word(expr[j]))
      ++j;
    spans.emplace_back(i, j);
    i = j;
  }
  return spans;
}

/// Whether an expression names `gate` or `up`, the two accumulators of a gated GEMM's column
/// pair (kernels/gemm_common.py's is_gated): its identifiers, as the pointwise language reads them.
bool namesGateOrUp(const std::string &expr) {
  for (const auto &[begin, end] : nameSpans(expr)) {
    const std::string_view name(expr.data() + begin, end - begin);
    if (name == "gate" || name == "up")
      return true;
  }
  return false;
}

/// Whether an expression calls a function (an identifier followed by "("): gelu_tanh(acc + x0)
/// does, acc * 0.5 does not (kernels/gemm_common.py's calls_function).
bool callsFunction(const std::string &expr) {
  for (const auto &[begin, end] : nameSpans(expr)) {
    const size_t next = expr.find_first_not_of(' ', end);
    if (!std::isdigit(static_cast<unsigned char>(expr[begin])) && next != std::string::npos &&
        expr[next] == '(')
      return true;
  }
  return false;
}

bool isGated(const std::vector<std::string> &epilogues) {
  const auto gated = std::count_if(epilogues.begin(), epilogues.end(), namesGateOrUp);
  TORCH_CHECK_VALUE(gated == 0 || gated == static_cast<std::ptrdiff_t>(epilogues.size()),
                    "cute::gemm: a gated GEMM's epilogues are all expressions over gate and up");
  return gated > 0;
}

Plan makePlan(const at::Tensor &aIn, const at::Tensor &bIn, size_t outputs, at::TensorList inputs,
              c10::ArrayRef<c10::ScalarType> outDtypes, bool gated, bool ampere) {
  checkOperands(aIn, bIn, inputs);
  TORCH_CHECK_VALUE(outputs >= 1 && outputs <= kMaxOutputs, "cute::gemm.multi takes 1 to ",
                    std::to_string(kMaxOutputs), " epilogues, got ", std::to_string(outputs));
  TORCH_CHECK_VALUE(outDtypes.empty() || outDtypes.size() == outputs,
                    "cute::gemm: ", std::to_string(outputs), " epilogues but ",
                    std::to_string(outDtypes.size()), " out_dtypes");
  for (c10::ScalarType t : outDtypes)
    TORCH_CHECK_VALUE(t == c10::kBFloat16 || t == c10::kHalf || t == c10::kFloat,
                      "cute::gemm writes bfloat16, float16 or float32 outputs, got ",
                      c10::toString(t));
  // Operands TMA cannot read in place (unaligned, or neither rows nor columns contiguous) are
  // copied once: the documented slower path.
  at::Tensor a = aIn, b = bIn;
  const bool batched = a.dim() == 3 || b.dim() == 3;
  const int64_t batches = a.dim() == 3 ? a.size(0) : (b.dim() == 3 ? b.size(0) : 1);
  const int64_t m = a.size(-2), k = a.size(-1);
  // A gated GEMM writes one column per pair of accumulator columns (groups of 8 gate, 8 up).
  TORCH_CHECK_VALUE(!gated || b.size(-1) % 16 == 0, "cute::gemm: a gated GEMM's b has ",
                    std::to_string(b.size(-1)),
                    " columns, not a multiple of 16 (groups of 8 gate and 8 up columns)");
  const int64_t n = gated ? b.size(-1) / 2 : b.size(-1);
  std::vector<int64_t> outShape =
      batched ? std::vector<int64_t>{batches, m, n} : std::vector<int64_t>{m, n};
  Plan plan;
  std::vector<at::Tensor> &outs = plan.outs;
  const bool fp8 = isFp8(a.scalar_type());
  const c10::ScalarType defaultOut = fp8 ? c10::kBFloat16 : a.scalar_type();
  for (size_t i = 0; i < outputs; ++i)
    outs.push_back(
        at::empty(outShape, a.options().dtype(outDtypes.empty() ? defaultOut : outDtypes[i])));
  if (m == 0 || n == 0 || batches == 0)
    return plan;
  TORCH_CHECK_VALUE(k > 0, "cute::gemm: K is 0 (a ", shapeText(a.sizes()), ")");

  // One weight for a batch of rows: a single GEMM over L * M rows when a and the inputs allow.
  bool rows = a.dim() == 3 && b.dim() == 2 && a.stride(0) == a.size(1) * a.stride(1);
  for (const at::Tensor &x : inputs)
    for (int64_t d = 0; rows && d + 1 < x.dim(); ++d)
      rows = x.size(d) == 1 && x.dim() <= 3;
  // A batched GEMM's coordinate tensor packs each of M, N and K in 20 bits (kernels/gemm_sm90.py).
  constexpr int64_t kBatchedLimit = int64_t(1) << 19;
  TORCH_CHECK_VALUE(!batched || rows || std::max({m, b.size(-1), k}) < kBatchedLimit,
                    "cute::gemm: a batched GEMM needs M, N and K below ",
                    std::to_string(kBatchedLimit), ", got a ", shapeText(a.sizes()), " and b ",
                    shapeText(b.sizes()));
  std::vector<View> &views = plan.views;
  auto addOperands = [&]() {
    views.clear();
    if (rows) {
      View va;
      va.tensor = a;
      va.sizes = {batches * m, k, 1};
      va.strides = {a.stride(1), a.stride(2), 0};
      views.push_back(va);
      views.push_back(matrixView(b, 1, 0, -1, 1, false));
    } else {
      views.push_back(
          matrixView(a, a.dim() - 2, a.dim() - 1, a.dim() == 3 ? 0 : -1, batches, batched));
      views.push_back(
          matrixView(b, b.dim() - 1, b.dim() - 2, b.dim() == 3 ? 0 : -1, batches, batched));
    }
  };
  addOperands();
  if (!tmaAddressable(views[0]) || !tmaAddressable(views[1])) {
    if (!tmaAddressable(views[0]))
      a = pitchedCopy(a);
    if (!tmaAddressable(views[1]))
      b = pitchedCopy(b);
    rows = rows && a.stride(0) == a.size(1) * a.stride(1);
    addOperands();
    TORCH_INTERNAL_ASSERT(tmaAddressable(views[0]) && tmaAddressable(views[1]));
  }
  // wgmma reads 8-bit operands K-major only: an MN-major fp8 operand is copied K-major once.
  if (fp8 && (!isKMajor(views[0]) || !isKMajor(views[1]))) {
    if (!isKMajor(views[0]))
      a = pitchedCopy(a);
    if (!isKMajor(views[1]))
      b = kMajorCopy(b, true);
    rows = rows && a.stride(0) == a.size(1) * a.stride(1);
    addOperands();
  }
  if (ampere && (!ampereReadable(views[0]) || !ampereReadable(views[1]))) {
    // (The copies' K stays as it was: their padding is zeros, which the view cannot show.)
    if (!ampereReadable(views[0]))
      a = kMajorCopy(a, false, true);
    if (!ampereReadable(views[1]))
      b = kMajorCopy(b, true, true);
    rows = rows && a.stride(0) == a.size(1) * a.stride(1);
    addOperands();
  }
  for (const at::Tensor &out : outs) {
    View v = rows ? matrixView(out.view({batches * m, n}), 0, 1, -1, 1, false)
                  : matrixView(out, out.dim() - 2, out.dim() - 1, out.dim() == 3 ? 0 : -1, batches,
                               batched);
    TORCH_CHECK_VALUE(tmaAddressable(v) && (n * out.element_size()) % 16 == 0,
                      "cute::gemm: an output row of ", std::to_string(n),
                      " elements is not a multiple of 16 bytes (TMA stores it); pad N");
    views.push_back(v);
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    views.push_back(inputView(inputs[i], i, outShape, batched, rows));
  plan.batches = batched && !rows ? batches : 1;
  return plan;
}

/// The tile columns and the schedule ("" cooperative, or chooseSchedule's "c...", "h..." or
/// "p...", the last with 128 columns or wide_pingpong's 192) of a planned call.
std::pair<int64_t, std::string> chooseVariant(const Plan &plan, size_t outputs, bool calls,
                                              bool gated, bool ampere, int64_t sms,
                                              bool fastMemory) {
  const std::vector<View> &views = plan.views;
  const int64_t accColumns = gated ? 2 * views[2].sizes[1] : views[2].sizes[1];
  if (ampere)
    return {chooseAmpereTileN(views[2].sizes[0], accColumns, plan.batches, sms), ""};
  const bool fp8 = isFp8(views[0].tensor.scalar_type());
  const int64_t tileN = chooseTileN(views[2].sizes[0], accColumns, plan.batches, sms, gated,
                                    isKMajor(views[1]) && !fp8);
  const std::string schedule = chooseSchedule(views, outputs, tileN, calls, gated, fp8, false);
  const bool pingpong = !schedule.empty() && schedule[0] == 'p';
  // 64-row tiles where 128-row ones would be cooperative, or M <= 64 (kernels/gemm_sm90.py's
  // host_arguments).
  if ((!pingpong || views[2].sizes[0] <= 64) && !gated && !fp8)
    if (const int64_t shortN = chooseShortTileN(views[2].sizes[0], accColumns, views[0].sizes[1],
                                                plan.batches, sms, tileN))
      return {shortN, chooseSchedule(views, outputs, tileN, calls, gated, fp8, true)};
  // A plain GEMM (one output, no inputs): ping-pong over 128 x 192 tiles where 128 x 256 ones make
  // more than two waves, M and N past 2048, at K <= 2048 or N >= 8192 with K <= 8192, for a 16-bit
  // output without calls, where the 192-wide tiles' waves less what their hidden epilogues save
  // end first (kernels/gemm_sm90.py's wide_pingpong, with the measurements); else at K <= 1024 on
  // fast memory over 128 x 128 tiles (plain_pingpong).
  const int64_t m = views[2].sizes[0], n = views[2].sizes[1], k = views[0].sizes[1];
  const bool plain =
      schedule.empty() && tileN == 256 && outputs == 1 && views.size() == 3 && !gated && !fp8;
  if (plain && !calls && plan.outs[0].element_size() == 2 &&
      (m + 127) / 128 * ((n + 255) / 256) * plan.batches > 2 * sms && std::min(m, n) > 2048 &&
      (k <= 2048 || (n >= 8192 && k <= 8192)) &&
      (100 - kPingpongSaves) * waveCost(m, n, plan.batches, sms, 192) <
          100 * waveCost(m, n, plan.batches, sms, 256))
    return {192, "p"};
  if (plain && fastMemory && k <= 1024)
    return {128, "p"};
  return {pingpong ? 128 : tileN, schedule}; // ping-pong: one warpgroup's 128 x 128 tile
}

/// Whether an M x N output's 128-row tiles end their last wave sooner as the swapped problem's
/// (C^T = B^T A^T, written back with M contiguous), by chooseTileN's width and cost each way:
/// 3072 x 1024 takes 96 tiles of 128 x 256, 1024 x 3072 128 of 128 x 192 (kernels/gemm_sm90.py's
/// transpose_pays). `anyWidth`: chooseTileN's, for B and for the swapped B (A^T).
bool transposePays(int64_t m, int64_t n, int64_t sms, bool anyWidth, bool anyWidthSwapped) {
  auto cost = [&](int64_t rows, int64_t cols, bool widths) {
    return waveCost(rows, cols, 1, sms, chooseTileN(rows, cols, 1, sms, false, widths));
  };
  return cost(n, m, anyWidthSwapped) < cost(m, n, anyWidth);
}

/// Whether a planned call runs as C^T = B^T A^T (kernels/gemm_sm90.py's transposes): two
/// dimensions, M and N past 64, 16-bit operands, no gate, 16-bit outputs, the Hopper kernel, where
/// transposePays. Epilogue inputs go as transposed views (transposePlan), except beside a 3-D
/// `a` flattened to rows (`rowsWithInputs`), which the Python gemm runs batched.
bool transposes(const Plan &plan, size_t outputs, bool gated, bool ampere, bool rowsWithInputs,
                int64_t sms) {
  const std::vector<View> &views = plan.views;
  if (ampere || gated || rowsWithInputs || views[0].rank != 2 || views[2].rank != 2 ||
      std::min(views[2].sizes[0], views[2].sizes[1]) <= 64)
    return false;
  for (size_t i = 0; i < outputs; ++i)
    if (plan.outs[i].element_size() != 2)
      return false;
  if (isFp8(views[0].tensor.scalar_type())) // 8-bit operands, M-contiguous outputs: not run yet
    return false;
  return transposePays(views[2].sizes[0], views[2].sizes[1], sms, isKMajor(views[1]),
                       isKMajor(views[0]));
}

/// The swapped problem of a plan: a and b exchange places (both are (rows, K) views) and each
/// output and input view (M, N) becomes (N, M): outputs with M contiguous, a bias (stride 0
/// along M) a per-row input. The tensors themselves stay as they are.
void transposePlan(Plan &plan) {
  std::swap(plan.views[0], plan.views[1]);
  for (size_t i = 2; i < plan.views.size(); ++i) {
    std::swap(plan.views[i].sizes[0], plan.views[i].sizes[1]);
    std::swap(plan.views[i].strides[0], plan.views[i].strides[1]);
  }
}

/// Split-K: a GEMM whose 64 x 128 tiles would keep at most a quarter of the SMs busy, with a long K
/// (16 x 1024 x 8192: 8 tiles; cuBLAS splits K there), runs its K slices as one batched GEMM into
/// Float32 partial sums, which one cute::pointwise adds up and passes through the epilogue. K of
/// at least kSplitMinK (H200, cuBLAS / ours unsplit -> split: 16 x 1024 x 8192 0.32 -> 0.70,
/// 128 x 2048 x 8192 0.71 -> 1.30, 256 x 1024 x 4096 0.74 -> 1.14; at K = 2048 the second
/// kernel cost more than it saved, 16 x 4096 x 2048 0.63 -> 0.59), slices of whole 64-deep
/// k-tiles, at least kSplitMinSlice each, at most kMaxSplits of them. Two slices (half the SMs
/// busy) were within 3 % either way on the H100 and H200 (32 x 8192 x 8192, 128 x 4096 x 4096).
constexpr int64_t kSplitMinK = 4096, kSplitMinSlice = 512, kMaxSplits = 16;

/// How many K slices an M x N x K GEMM runs as (1: not split).
int64_t chooseSplits(int64_t m, int64_t n, int64_t k, int64_t sms) {
  const int64_t tiles = (m + 63) / 64 * ((n + 127) / 128);
  if (k < kSplitMinK || 4 * tiles > sms)
    return 1;
  int64_t splits = std::min({sms / tiles, k / kSplitMinSlice, kMaxSplits});
  while (splits > 1 && k % (splits * 64))
    --splits;
  return splits;
}

/// `expr` (over acc and x0..xN) as an expression over the partial sums x0..x{splits - 1} and the
/// inputs, renumbered from x{splits}: acc becomes the partials' sum, in slice order.
std::string splitExpression(const std::string &expr, int64_t splits) {
  std::string sum = "(";
  for (int64_t i = 0; i < splits; ++i)
    sum += (i ? " + x" : "x") + std::to_string(i);
  sum += ")";
  std::string out;
  size_t copied = 0;
  for (const auto &[begin, end] : nameSpans(expr)) {
    out.append(expr, copied, begin - copied);
    const std::string name = expr.substr(begin, end - begin);
    const bool input =
        name.size() > 1 && name[0] == 'x' && std::all_of(name.begin() + 1, name.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c));
        });
    if (name == "acc")
      out += sum;
    else if (input)
      out += "x" + std::to_string(std::stoll(name.substr(1)) + splits);
    else
      out += name;
    copied = end;
  }
  return out + expr.substr(copied);
}
/// The K slices of a planned call (1 where it is not split): one output over 2-D 16-bit
/// operands and inputs of at most two dimensions (cute::pointwise broadcasts them to (M, N)), no
/// gate, on the Hopper kernels.
int64_t planSplits(const Plan &plan, size_t outputs, at::TensorList inputs, bool gated, bool ampere,
                   int64_t sms) {
  const std::vector<View> &views = plan.views;
  const at::Tensor &a = views[0].tensor, &b = views[1].tensor;
  if (ampere || gated || outputs != 1 || a.dim() != 2 || b.dim() != 2 || isFp8(a.scalar_type()) ||
      std::any_of(inputs.begin(), inputs.end(), [](const at::Tensor &x) { return x.dim() > 2; }))
    return 1;
  return chooseSplits(a.size(0), b.size(1), a.size(1), sms);
}

/// What a planned call runs, decided in one place for gemmImpl and gemmChoice: K slices
/// (planSplits; past 1 nothing else is decided), else whether the problem is swapped
/// (transposes: the plan's views are then the swapped ones) and the variant (chooseVariant).
struct Decision {
  int64_t splits = 1;
  bool swapped = false;
  int64_t tileN = 0;
  std::string schedule;
};

Decision decide(Plan &plan, size_t outputs, at::TensorList inputs, bool calls, bool gated,
                bool ampere, bool rowsWithInputs, int64_t sms, bool fastMemory) {
  Decision decision;
  decision.splits = planSplits(plan, outputs, inputs, gated, ampere, sms);
  if (decision.splits > 1)
    return decision;
  decision.swapped = transposes(plan, outputs, gated, ampere, rowsWithInputs, sms);
  if (decision.swapped)
    transposePlan(plan);
  std::tie(decision.tileN, decision.schedule) =
      chooseVariant(plan, outputs, calls, gated, ampere, sms, fastMemory);
  return decision;
}

std::vector<at::Tensor> gemmImpl(const at::Tensor &a, const at::Tensor &b,
                                 const std::vector<std::string> &epilogues, at::TensorList inputs,
                                 c10::ArrayRef<c10::ScalarType> outDtypes);

/// a (M, K) and b (K, N) as `splits` slices along K: (splits, M, K / splits) and (splits,
/// K / splits, N) views, a batched GEMM's operands.
std::pair<at::Tensor, at::Tensor> kSlices(const at::Tensor &a, const at::Tensor &b,
                                          int64_t splits) {
  const int64_t slice = a.size(1) / splits;
  return {
      a.as_strided({splits, a.size(0), slice}, {slice * a.stride(1), a.stride(0), a.stride(1)}),
      b.as_strided({splits, slice, b.size(1)}, {slice * b.stride(0), b.stride(0), b.stride(1)})};
}

/// A split GEMM (planSplits): the slices' partial sums by one batched GEMM of Float32 outputs,
/// then `epilogue` over their sum and the inputs by cute::pointwise, into an `outDtype` tensor.
at::Tensor splitGemm(const at::Tensor &a, const at::Tensor &b, const std::string &epilogue,
                     at::TensorList inputs, c10::ScalarType outDtype, int64_t splits) {
  const auto [slicesA, slicesB] = kSlices(a, b, splits);
  const at::Tensor partials = gemmImpl(slicesA, slicesB, {"acc"}, {}, {c10::kFloat})[0];
  std::vector<at::Tensor> operands;
  for (int64_t s = 0; s < splits; ++s)
    operands.push_back(partials.select(0, s));
  operands.insert(operands.end(), inputs.begin(), inputs.end());
  return pointwiseCuda(splitExpression(epilogue, splits), operands, outDtype);
}

std::vector<at::Tensor> gemmImpl(const at::Tensor &a, const at::Tensor &b,
                                 const std::vector<std::string> &epilogues, at::TensorList inputs,
                                 c10::ArrayRef<c10::ScalarType> outDtypes) {
  checkCuda(a);
  const bool gated = isGated(epilogues);
  const int device = a.device().index();
  const DeviceFacts &facts = deviceFacts(device);
  const bool ampere = facts.gemmFamily == 80;
  TORCH_CHECK_VALUE(!ampere || !isFp8(a.scalar_type()),
                    "cute::gemm: float8 operands need the Hopper kernel (wgmma); this device runs "
                    "the Ampere one");
  Plan plan = makePlan(a, b, epilogues.size(), inputs, outDtypes, gated, ampere);
  if (plan.views.empty())
    return plan.outs;
  const bool calls = std::any_of(epilogues.begin(), epilogues.end(), callsFunction);
  const Decision decision = decide(plan, epilogues.size(), inputs, calls, gated, ampere,
                                   a.dim() == 3 && !inputs.empty(), facts.sms, facts.fastMemory);
  if (decision.splits > 1)
    return {splitGemm(plan.views[0].tensor, plan.views[1].tensor, epilogues[0], inputs,
                      plan.outs[0].scalar_type(), decision.splits)};
  const std::vector<View> &views = plan.views;
  const int64_t tileN = decision.tileN;
  const std::string &schedule = decision.schedule;
  const std::string joined = joinExprs(epilogues);
  // (tileN / 16: every width its own key; the output views' patterns tell a transposed call's)
  std::string key = joined + '\x1f' + static_cast<char>('0' + device) +
                    static_cast<char>('0' + tileN / 16) + static_cast<char>('0' + epilogues.size());
  for (const View &v : views)
    appendPattern(key, v);
  key += schedule.empty() ? "c" : schedule;
  if (ampere) { // the Ampere epilogue reads 8 columns per load where strides and N allow
    key += views[2].sizes[1] % 8 ? 'o' : 'v';
    for (const View &v : views)
      for (int d = 0; d < v.rank; ++d)
        key += v.strides[d] % 8 ? '-' : '8';
  }
  const GemmKernel &kernel =
      kernelFor(key, views, joined, epilogues.size(), tileN, schedule, device, facts.gemmFamily);
  run(kernel, views, facts.sms);
  return plan.outs;
}

} // namespace

at::Tensor gemmCuda(const at::Tensor &a, const at::Tensor &b, c10::string_view epilogue,
                    at::TensorList inputs, std::optional<c10::ScalarType> outDtype) {
  std::vector<c10::ScalarType> dtypes;
  if (outDtype)
    dtypes.push_back(*outDtype);
  return gemmImpl(a, b, {std::string(epilogue)}, inputs, dtypes)[0];
}

std::vector<at::Tensor> gemmMultiCuda(const at::Tensor &a, const at::Tensor &b,
                                      std::vector<std::string> epilogues, at::TensorList inputs,
                                      std::optional<std::vector<c10::ScalarType>> outDtypes) {
  return gemmImpl(a, b, epilogues, inputs,
                  outDtypes ? c10::ArrayRef<c10::ScalarType>(*outDtypes)
                            : c10::ArrayRef<c10::ScalarType>());
}

at::Tensor gemmCpu(const at::Tensor &a, const at::Tensor &b, c10::string_view,
                   at::TensorList inputs, std::optional<c10::ScalarType>) {
  checkOperands(a, b, inputs);
  checkCuda(a);
  return {};
}

std::vector<at::Tensor> gemmMultiCpu(const at::Tensor &a, const at::Tensor &b,
                                     std::vector<std::string>, at::TensorList inputs,
                                     std::optional<std::vector<c10::ScalarType>>) {
  checkOperands(a, b, inputs);
  checkCuda(a);
  return {};
}

std::string gemmChoice(const at::Tensor &a, const at::Tensor &b, at::TensorList inputs,
                       int64_t outputs, int64_t sms, bool fastMemory,
                       std::optional<std::vector<c10::ScalarType>> outDtypes, bool calls) {
  const std::vector<c10::ScalarType> dtypes = outDtypes.value_or(std::vector<c10::ScalarType>{});
  Plan plan = makePlan(a, b, static_cast<size_t>(outputs), inputs, dtypes, false, false);
  if (plan.views.empty())
    return "";
  const Decision decision = decide(plan, static_cast<size_t>(outputs), inputs, calls, false, false,
                                   a.dim() == 3 && !inputs.empty(), sms, fastMemory);
  if (decision.splits > 1) { // "k4:" and the choice of the batched GEMM of the slices' partials
    const auto [slicesA, slicesB] =
        kSlices(plan.views[0].tensor, plan.views[1].tensor, decision.splits);
    return "k" + std::to_string(decision.splits) + ":" +
           gemmChoice(slicesA, slicesB, {}, 1, sms, fastMemory, std::nullopt, calls);
  }
  // "t:" and the choice of the swapped problem (transposes).
  return (decision.swapped ? "t:" : "") + std::to_string(decision.tileN) + decision.schedule;
}

std::string gemmPlan(const at::Tensor &a, const at::Tensor &b, at::TensorList inputs,
                     int64_t outputs) {
  Plan plan = makePlan(a, b, static_cast<size_t>(outputs), inputs, {}, false, false);
  std::string text;
  for (const View &v : plan.views) {
    text += (text.empty() ? "" : "|") + viewText(v) + ";";
    appendPattern(text, v);
  }
  return text;
}

} // namespace cute_torch::ops
