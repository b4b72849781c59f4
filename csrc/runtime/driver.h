//===- driver.h - the CUDA driver API through dlopen --------------*- C++ -*-===//

#ifndef CUTE_TORCH_RUNTIME_DRIVER_H
#define CUTE_TORCH_RUNTIME_DRIVER_H

#include <cuda.h>

#include <string>

namespace cute_torch::runtime {

/// The driver entry points we use, resolved once from libcuda.so.1.
struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int *);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuCtxGetCurrent)(CUcontext *);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuFuncSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*cuFuncGetAttribute)(int *, CUfunction_attribute, CUfunction);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);
  CUresult (*cuOccupancyMaxActiveClusters)(int *, CUfunction, const CUlaunchConfig *);
  CUresult (*cuTensorMapEncodeTiled)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                     const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                     const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                     CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  CUresult (*cuGetErrorName)(CUresult, const char **);
  CUresult (*cuGetErrorString)(CUresult, const char **);

  /// The driver, or throws CudaError saying why it cannot be used.
  static const Driver &get();
  /// "CUDA_ERROR_X: description".
  std::string describe(CUresult result) const;
  /// Throws CudaError("<what>: CUDA_ERROR_X: description") unless result is CUDA_SUCCESS.
  void check(CUresult result, const std::string &what) const;
  /// check() whose message is built only on failure (`what` returns a std::string).
  template <typename What> void checkLazy(CUresult result, What &&what) const {
    if (result != CUDA_SUCCESS)
      check(result, what());
  }
};

} // namespace cute_torch::runtime

#endif // CUTE_TORCH_RUNTIME_DRIVER_H
