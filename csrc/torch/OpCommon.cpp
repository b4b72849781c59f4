//===- OpCommon.cpp - helpers shared by the torch.ops.cute families -------===//

#include "OpCommon.h"
#include "PythonBuilder.h"

#include <ATen/core/grad_mode.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <mutex>
#include <unordered_map>

namespace cute_torch::ops {
namespace {

struct DtypeName {
  c10::ScalarType type;
  const char *name;
};
constexpr DtypeName kSupported[] = {
    {c10::kFloat, "float32"},  {c10::kHalf, "float16"}, {c10::kBFloat16, "bfloat16"},
    {c10::kDouble, "float64"}, {c10::kInt, "int32"},    {c10::kLong, "int64"},
    {c10::kChar, "int8"},      {c10::kByte, "uint8"},   {c10::kBool, "bool"}};

} // namespace

std::string deviceName(const c10::Device &device) {
  const char *type = device.is_cuda()   ? "cuda"
                     : device.is_cpu()  ? "cpu"
                     : device.is_meta() ? "meta"
                                        : "other";
  return device.has_index() ? std::string(type) + ":" + std::to_string(device.index()) : type;
}

std::string shapeText(c10::IntArrayRef sizes) {
  std::string text = "[";
  for (size_t i = 0; i < sizes.size(); ++i)
    text += (i ? ", " : "") + std::to_string(sizes[i]);
  return text + "]";
}

std::string joinExprs(const std::vector<std::string> &exprs) {
  std::string joined;
  for (const std::string &e : exprs)
    joined += (joined.empty() ? "" : std::string(1, kExprSeparator)) + e;
  return joined;
}

const char *dtypeName(c10::ScalarType type, const char *op, const std::string &what) {
  for (const DtypeName &d : kSupported)
    if (d.type == type)
      return d.name;
  std::string names;
  for (const DtypeName &d : kSupported)
    names += std::string(names.empty() ? "" : ", ") + d.name;
  TORCH_CHECK_TYPE(false, op, ": ", what, " has dtype ", c10::toString(type),
                   ", which is not supported; supported dtypes: ", names);
}

c10::ScalarType dtypeFromName(const std::string &name, const char *op) {
  for (const DtypeName &d : kSupported)
    if (name == d.name)
      return d.type;
  TORCH_CHECK(false, op, ": the builder returned an unknown dtype '", name, "'");
}

const DeviceFacts &deviceFacts(int device) {
  static std::mutex mutex;
  static std::unordered_map<int, DeviceFacts> facts;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = facts.find(device);
    if (found != facts.end())
      return found->second;
  }
  BuilderResult result = callBuilder("device", {BuilderArg(device)});
  TORCH_CHECK(result.ints.size() >= 3, "the builder returned no device facts");
  std::lock_guard<std::mutex> lock(mutex);
  return facts[device] = DeviceFacts{static_cast<int64_t>(result.ints[0]),
                                     static_cast<int64_t>(result.ints[1]), result.ints[2] != 0};
}

void runOnCurrentStream(void (*entry)(void **), runtime::LoadedArtifact *artifact,
                        c10::SmallVectorImpl<int64_t> &slots, const c10::Device &device,
                        const char *op) {
  c10::SmallVector<void *, 48> pointers;
  for (int64_t &slot : slots)
    pointers.push_back(&slot);
  c10::DeviceGuard guard(device);
  const c10::Stream stream = c10::impl::getDeviceGuardImpl(device.type())->getStream(device);
  try {
    artifact->call(entry, pointers.data(), device.index(),
                   reinterpret_cast<uintptr_t>(stream.native_handle()));
  } catch (const runtime::CudaError &e) {
    TORCH_CHECK(false, op, ": ", e.what());
  }
}

bool needsGradNode(at::ArrayRef<at::Tensor> tensors) {
  if (!at::GradMode::is_enabled())
    return false;
  for (const at::Tensor &t : tensors)
    if (t.defined() && t.requires_grad())
      return true;
  return false;
}

} // namespace cute_torch::ops
