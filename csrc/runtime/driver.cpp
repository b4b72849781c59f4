//===- driver.cpp - the CUDA driver API through dlopen --------------------===//

#include "driver.h"

#include "cute_torch/runtime.h"

#include <dlfcn.h>
#include <mutex>

namespace cute_torch::runtime {

namespace {

template <typename Fn> void resolve(void *library, const char *name, Fn &fn, std::string &missing) {
  fn = reinterpret_cast<Fn>(dlsym(library, name));
  if (!fn)
    missing += std::string(missing.empty() ? "" : ", ") + name;
}

struct Loaded {
  Driver driver{};
  std::string error; // empty when usable
};

const Loaded &load() {
  static Loaded loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!library) {
      const char *why = dlerror();
      loaded.error = std::string("the CUDA driver (libcuda.so.1) cannot be loaded: ") +
                     (why ? why : "unknown reason");
      return;
    }
    Driver &d = loaded.driver;
    std::string missing;
    resolve(library, "cuInit", d.cuInit, missing);
    resolve(library, "cuDriverGetVersion", d.cuDriverGetVersion, missing);
    resolve(library, "cuDeviceGet", d.cuDeviceGet, missing);
    resolve(library, "cuDeviceGetCount", d.cuDeviceGetCount, missing);
    resolve(library, "cuDeviceGetAttribute", d.cuDeviceGetAttribute, missing);
    resolve(library, "cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain, missing);
    resolve(library, "cuCtxGetCurrent", d.cuCtxGetCurrent, missing);
    resolve(library, "cuCtxSetCurrent", d.cuCtxSetCurrent, missing);
    resolve(library, "cuModuleLoadData", d.cuModuleLoadData, missing);
    resolve(library, "cuModuleUnload", d.cuModuleUnload, missing);
    resolve(library, "cuModuleGetFunction", d.cuModuleGetFunction, missing);
    resolve(library, "cuFuncSetAttribute", d.cuFuncSetAttribute, missing);
    resolve(library, "cuFuncGetAttribute", d.cuFuncGetAttribute, missing);
    resolve(library, "cuLaunchKernel", d.cuLaunchKernel, missing);
    resolve(library, "cuLaunchKernelEx", d.cuLaunchKernelEx, missing);
    resolve(library, "cuOccupancyMaxActiveClusters", d.cuOccupancyMaxActiveClusters, missing);
    resolve(library, "cuTensorMapEncodeTiled", d.cuTensorMapEncodeTiled, missing);
    resolve(library, "cuGetErrorName", d.cuGetErrorName, missing);
    resolve(library, "cuGetErrorString", d.cuGetErrorString, missing);
    if (!missing.empty()) {
      loaded.error = "the CUDA driver is too old: missing " + missing;
      return;
    }
    CUresult init = d.cuInit(0);
    if (init != CUDA_SUCCESS)
      loaded.error = "cuInit failed: " + d.describe(init);
  });
  return loaded;
}

} // namespace

const Driver &Driver::get() {
  const Loaded &loaded = load();
  if (!loaded.error.empty())
    throw CudaError(loaded.error);
  return loaded.driver;
}

std::string Driver::describe(CUresult result) const {
  const char *name = nullptr, *text = nullptr;
  cuGetErrorName(result, &name);
  cuGetErrorString(result, &text);
  return std::string(name ? name : "CUDA_ERROR_UNKNOWN") + ": " + (text ? text : "unknown");
}

void Driver::check(CUresult result, const std::string &what) const {
  if (result != CUDA_SUCCESS)
    throw CudaError(what + ": " + describe(result));
}

bool driverAvailable(std::string *why) {
  const Loaded &loaded = load();
  if (why)
    *why = loaded.error;
  return loaded.error.empty();
}

} // namespace cute_torch::runtime
