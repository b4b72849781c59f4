//===- runtime.cpp - module loading and launches --------------------------===//

#include "cute_torch/runtime.h"

#include "driver.h"

namespace cute_torch::runtime {

namespace {

CUcontext primaryContext(const Driver &d, int device) {
  // Retained once per device and never released: torch holds the same primary context.
  // This runs on every launch: no driver call and no string on a hit.
  static std::mutex mutex;
  static std::map<int, CUcontext> retained;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = retained.find(device);
  if (found != retained.end())
    return found->second;
  CUdevice handle;
  d.check(d.cuDeviceGet(&handle, device), "cuDeviceGet(" + std::to_string(device) + ")");
  CUcontext context;
  d.check(d.cuDevicePrimaryCtxRetain(&context, handle), "cuDevicePrimaryCtxRetain");
  retained[device] = context;
  return context;
}

/// Makes the device's primary context current on this thread; returns it.
CUcontext enterDevice(const Driver &d, int device) {
  CUcontext wanted = primaryContext(d, device), current = nullptr;
  d.check(d.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current != wanted)
    d.check(d.cuCtxSetCurrent(wanted), "cuCtxSetCurrent");
  return wanted;
}

std::string dims(Dim3 d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
}

/// What host code launching through cute_rt_launch works against, for one call.
struct LaunchScope {
  LoadedArtifact *artifact = nullptr;
  uintptr_t stream = 0;
  std::string error;
};
thread_local LaunchScope *currentScope = nullptr;

constexpr int kDefaultSmemLimit = 48 * 1024;

} // namespace

std::string deviceArch(int device) {
  const Driver &d = Driver::get();
  CUdevice handle;
  d.check(d.cuDeviceGet(&handle, device), "cuDeviceGet(" + std::to_string(device) + ")");
  int major = 0, minor = 0;
  d.check(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle),
          "cuDeviceGetAttribute");
  d.check(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, handle),
          "cuDeviceGetAttribute");
  std::string arch = "sm_" + std::to_string(major) + std::to_string(minor);
  return major == 9 && minor == 0 ? arch + "a" : arch;
}

int deviceCount() {
  const Driver &d = Driver::get();
  int count = 0;
  d.check(d.cuDeviceGetCount(&count), "cuDeviceGetCount");
  return count;
}

struct LoadedArtifact::PerContext {
  std::vector<CUmodule> modules;
  std::vector<CUfunction> functions; // by kernel index
  std::vector<int> smemLimit;        // dynamic smem the function is allowed, by kernel index
  std::vector<char> nonPortable;     // whether clusters over 8 CTAs are allowed, by kernel index
};

LoadedArtifact::LoadedArtifact(std::map<std::string, std::string> cubins,
                               std::vector<KernelDesc> kernels)
    : cubins(std::move(cubins)), kernelList(std::move(kernels)) {}

LoadedArtifact::~LoadedArtifact() {
  if (!driverAvailable())
    return;
  const Driver &d = Driver::get();
  for (auto &[context, loaded] : contexts)
    for (CUmodule module : loaded->modules)
      d.cuModuleUnload(module); // Best effort: the context may be gone at exit.
}

LoadedArtifact::PerContext &LoadedArtifact::loadedIn(void *context) {
  std::lock_guard<std::mutex> lock(mutex);
  auto found = contexts.find(context);
  if (found != contexts.end())
    return *found->second;
  const Driver &d = Driver::get();
  auto loaded = std::make_unique<PerContext>();
  std::map<std::string, CUmodule> byName;
  for (const auto &[name, cubin] : cubins) {
    CUmodule module;
    d.check(d.cuModuleLoadData(&module, cubin.data()), "loading the CUBIN of gpu.module @" + name);
    loaded->modules.push_back(module);
    byName[name] = module;
  }
  for (const KernelDesc &kernel : kernelList) {
    CUfunction function;
    d.check(d.cuModuleGetFunction(&function, byName.at(kernel.module), kernel.name.c_str()),
            "finding kernel '" + kernel.name + "' in gpu.module @" + kernel.module);
    loaded->functions.push_back(function);
    // Static and dynamic shared memory share the default 48 KB: past what the static part
    // leaves, the dynamic part needs the attribute raised (49152 dynamic bytes beside a few
    // static ones failed to launch).
    int staticSmem = 0;
    d.check(d.cuFuncGetAttribute(&staticSmem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function),
            "reading the static shared memory of kernel '" + kernel.name + "'");
    loaded->smemLimit.push_back(kDefaultSmemLimit - staticSmem);
    loaded->nonPortable.push_back(false);
  }
  return *contexts.emplace(context, std::move(loaded)).first->second;
}

void *LoadedArtifact::functionFor(int kernel, uint32_t smem, const std::string &what,
                                  uint32_t clusterSize) {
  const Driver &d = Driver::get();
  CUcontext context;
  d.check(d.cuCtxGetCurrent(&context), "cuCtxGetCurrent");
  PerContext &loaded = loadedIn(context);
  CUfunction function = loaded.functions[kernel];
  if (int(smem) > loaded.smemLimit[kernel]) {
    d.check(
        d.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(smem)),
        what + " (raising the dynamic shared memory limit)");
    loaded.smemLimit[kernel] = int(smem);
  }
  // Clusters over 8 CTAs (the portable size; Hopper runs up to 16) launch, and count in
  // cuOccupancyMaxActiveClusters, only once the function allows them.
  if (clusterSize > 8 && !loaded.nonPortable[kernel]) {
    d.check(d.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
            what + " (allowing a cluster of " + std::to_string(clusterSize) + " CTAs)");
    loaded.nonPortable[kernel] = true;
  }
  return function;
}

namespace {

/// A cuLaunchKernelEx configuration; `attribute` (its storage) holds the cluster shape.
CUlaunchConfig launchConfig(Dim3 grid, Dim3 block, Dim3 cluster, uint32_t smem, CUstream stream,
                            CUlaunchAttribute &attribute) {
  attribute = CUlaunchAttribute{};
  attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attribute.value.clusterDim.x = cluster.x;
  attribute.value.clusterDim.y = cluster.y;
  attribute.value.clusterDim.z = cluster.z;
  CUlaunchConfig config{};
  config.gridDimX = grid.x;
  config.gridDimY = grid.y;
  config.gridDimZ = grid.z;
  config.blockDimX = block.x;
  config.blockDimY = block.y;
  config.blockDimZ = block.z;
  config.sharedMemBytes = smem;
  config.hStream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return config;
}

} // namespace

void LoadedArtifact::launchInCurrentContext(int kernel, Dim3 grid, Dim3 block, Dim3 cluster,
                                            uint32_t smem, void **params, uintptr_t stream) {
  const Driver &d = Driver::get();
  if (kernel < 0 || size_t(kernel) >= kernelList.size())
    throw CudaError("launch of kernel #" + std::to_string(kernel) + ", which does not exist");
  const KernelDesc &desc = kernelList[kernel];
  // Spelled only when a call fails: building it costs as much as the launch itself.
  auto what = [&] {
    return "launching kernel '" + desc.name + "' (gpu.module @" + desc.module + ") with grid " +
           dims(grid) + ", block " + dims(block) + ", cluster " + dims(cluster) + ", " +
           std::to_string(smem) + " bytes of dynamic smem";
  };
  CUfunction function = static_cast<CUfunction>(
      functionFor(kernel, smem, desc.name, cluster.x * cluster.y * cluster.z));
  CUstream cuStream = reinterpret_cast<CUstream>(stream);
  if (cluster.x * cluster.y * cluster.z == 1) {
    d.checkLazy(d.cuLaunchKernel(function, grid.x, grid.y, grid.z, block.x, block.y, block.z, smem,
                                 cuStream, params, nullptr),
                what);
    return;
  }
  CUlaunchAttribute attribute;
  CUlaunchConfig config = launchConfig(grid, block, cluster, smem, cuStream, attribute);
  d.checkLazy(d.cuLaunchKernelEx(&config, function, params, nullptr), what);
}

int LoadedArtifact::maxActiveClusters(int kernel, Dim3 block, Dim3 cluster, uint32_t smem,
                                      int device) {
  const Driver &d = Driver::get();
  if (kernel < 0 || size_t(kernel) >= kernelList.size())
    throw CudaError("occupancy of kernel #" + std::to_string(kernel) + ", which does not exist");
  enterDevice(d, device);
  const std::string what = "the occupancy of kernel '" + kernelList[kernel].name + "' (block " +
                           dims(block) + ", cluster " + dims(cluster) + ", " +
                           std::to_string(smem) + " bytes of dynamic smem)";
  CUfunction function =
      static_cast<CUfunction>(functionFor(kernel, smem, what, cluster.x * cluster.y * cluster.z));
  CUlaunchAttribute attribute;
  // The grid is not part of the question, but must be a whole number of clusters.
  CUlaunchConfig config = launchConfig(cluster, block, cluster, smem, nullptr, attribute);
  int count = 0;
  d.check(d.cuOccupancyMaxActiveClusters(&count, function, &config), what);
  return count;
}

void LoadedArtifact::launch(int kernel, Dim3 grid, Dim3 block, Dim3 cluster, uint32_t smem,
                            void **params, int device, uintptr_t stream) {
  enterDevice(Driver::get(), device);
  launchInCurrentContext(kernel, grid, block, cluster, smem, params, stream);
}

void LoadedArtifact::call(void (*entry)(void **), void **args, int device, uintptr_t stream) {
  enterDevice(Driver::get(), device);
  LaunchScope scope{this, stream, {}};
  LaunchScope *outer = currentScope;
  currentScope = &scope;
  entry(args);
  currentScope = outer;
  if (!scope.error.empty())
    throw CudaError(scope.error);
}

} // namespace cute_torch::runtime

using namespace cute_torch::runtime;

extern "C" int cute_rt_launch(int32_t kernel, int64_t gx, int64_t gy, int64_t gz, int64_t bx,
                              int64_t by, int64_t bz, int32_t cx, int32_t cy, int32_t cz,
                              int32_t smem, void **params) {
  LaunchScope *scope = currentScope;
  if (!scope)
    return 1; // Host code called outside LoadedArtifact::call: nothing to launch on.
  if (!scope->error.empty())
    return 1; // An earlier launch of this call failed; later ones would only add noise.
  auto u32 = [](int64_t v) { return uint32_t(v); };
  for (int64_t v : {gx, gy, gz, bx, by, bz})
    if (v <= 0 || v > INT32_MAX) {
      const auto &kernels = scope->artifact->kernels();
      scope->error = "kernel #" + std::to_string(kernel) + " (" +
                     (size_t(kernel) < kernels.size() ? kernels[kernel].name : "?") +
                     "): grid and block dims must be in 1..2^31-1, got grid (" +
                     std::to_string(gx) + ", " + std::to_string(gy) + ", " + std::to_string(gz) +
                     "), block (" + std::to_string(bx) + ", " + std::to_string(by) + ", " +
                     std::to_string(bz) + ")";
      return 1;
    }
  try {
    scope->artifact->launchInCurrentContext(
        kernel, {u32(gx), u32(gy), u32(gz)}, {u32(bx), u32(by), u32(bz)},
        {u32(cx), u32(cy), u32(cz)}, uint32_t(smem), params, scope->stream);
  } catch (const std::exception &e) {
    scope->error = e.what();
    return 1;
  }
  return 0;
}

extern "C" int cute_rt_encode_tma(void *out, int32_t dtype, int32_t rank, void *global,
                                  const int64_t *dims, const int64_t *strides, const int32_t *box,
                                  int32_t swizzle) {
  LaunchScope *scope = currentScope;
  if (!scope || !scope->error.empty())
    return 1;
  cuuint64_t extents[5], byteStrides[4];
  cuuint32_t boxDims[5], elementStrides[5];
  std::string shape;
  for (int32_t i = 0; i < rank && i < 5; ++i) {
    extents[i] = cuuint64_t(dims[i]);
    boxDims[i] = cuuint32_t(box[i]);
    elementStrides[i] = 1;
    if (i > 0)
      byteStrides[i - 1] = cuuint64_t(strides[i - 1]);
    shape += (i ? ", " : "") + std::to_string(dims[i]) +
             (i ? " (" + std::to_string(strides[i - 1]) + " B apart)" : "") + " box " +
             std::to_string(box[i]);
  }
  try {
    const Driver &d = Driver::get();
    d.checkLazy(d.cuTensorMapEncodeTiled(
                    static_cast<CUtensorMap *>(out), CUtensorMapDataType(dtype), cuuint32_t(rank),
                    global, extents, byteStrides, boxDims, elementStrides,
                    CU_TENSOR_MAP_INTERLEAVE_NONE, CUtensorMapSwizzle(swizzle),
                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                [&] {
                  return "TMA descriptor for the tensor at " +
                         std::to_string(reinterpret_cast<uintptr_t>(global)) +
                         " (dims innermost first: " + shape + ")";
                });
  } catch (const std::exception &e) {
    scope->error = e.what();
    return 1;
  }
  return 0;
}
