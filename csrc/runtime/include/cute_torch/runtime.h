//===- runtime.h - loads CUBINs and launches kernels --------------*- C++ -*-===//
//
// The CUDA driver is loaded with dlopen on first use, so importing the package works on a
// machine without a GPU or a driver. Launches go to the stream the caller names, in the
// caller's device's primary context (the one torch uses).
//
//===----------------------------------------------------------------------===//

#ifndef CUTE_TORCH_RUNTIME_H
#define CUTE_TORCH_RUNTIME_H

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace cute_torch::runtime {

/// A CUDA driver call failed, or there is no driver; the message says which call and why.
struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Whether libcuda loads and initializes; if not, `why` says what failed.
bool driverAvailable(std::string *why = nullptr);
/// "sm_80", "sm_86", "sm_89", "sm_90a" (Hopper gets its architecture-specific target).
std::string deviceArch(int device);
int deviceCount();

struct KernelDesc {
  std::string module, name;
};

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
};

/// The CUBINs of one artifact, loaded lazily into each context that launches them.
class LoadedArtifact {
public:
  LoadedArtifact(std::map<std::string, std::string> cubins, std::vector<KernelDesc> kernels);
  ~LoadedArtifact();
  LoadedArtifact(const LoadedArtifact &) = delete;
  LoadedArtifact &operator=(const LoadedArtifact &) = delete;

  /// Runs a packed host entry (`void entry(void **args)`) whose launches go to `stream` on
  /// `device`. Throws CudaError naming the kernel if a launch failed.
  void call(void (*entry)(void **), void **args, int device, uintptr_t stream);

  /// Launches one kernel directly. Throws CudaError naming the kernel.
  void launch(int kernel, Dim3 grid, Dim3 block, Dim3 cluster, uint32_t smem, void **params,
              int device, uintptr_t stream);

  /// How many clusters of `cluster` CTAs (of `block` threads and `smem` bytes of dynamic shared
  /// memory) of one kernel can run at once on `device` (cuOccupancyMaxActiveClusters): the
  /// largest persistent grid whose clusters all run concurrently. Throws CudaError.
  int maxActiveClusters(int kernel, Dim3 block, Dim3 cluster, uint32_t smem, int device);

  const std::vector<KernelDesc> &kernels() const { return kernelList; }

  /// Used by the launch entry that host code calls; see runtime.cpp.
  void launchInCurrentContext(int kernel, Dim3 grid, Dim3 block, Dim3 cluster, uint32_t smem,
                              void **params, uintptr_t stream);

private:
  struct PerContext;
  PerContext &loadedIn(void *context);
  /// The kernel's function in the current context, opted in to `smem` bytes of dynamic shared
  /// memory (beyond 48 KB a kernel must be) and to clusters of `clusterSize` CTAs (beyond 8
  /// a kernel must be).
  void *functionFor(int kernel, uint32_t smem, const std::string &what, uint32_t clusterSize = 1);

  std::map<std::string, std::string> cubins;
  std::vector<KernelDesc> kernelList;
  std::mutex mutex;
  std::map<void *, std::unique_ptr<PerContext>> contexts;
};

} // namespace cute_torch::runtime

/// What JIT-compiled host code calls for each gpu.launch_func (see LowerLaunches.cpp).
/// Returns 0 on success; a failure is recorded for LoadedArtifact::call to raise.
extern "C" int cute_rt_launch(int32_t kernel, int64_t gx, int64_t gy, int64_t gz, int64_t bx,
                              int64_t by, int64_t bz, int32_t cx, int32_t cy, int32_t cz,
                              int32_t smem, void **params);

/// What JIT-compiled host code calls to build a TMA descriptor (a CUtensorMap, 128 bytes at
/// `out`, 64-byte aligned) for a tiled copy: `rank` dims innermost first with their extents,
/// the byte strides of dims 1..rank-1, the box (the shared-memory tile) and the swizzle
/// (CUtensorMapSwizzle). Out-of-bounds elements read as zero. Returns 0 on success; a
/// failure is recorded, like a launch's, for LoadedArtifact::call to raise.
extern "C" int cute_rt_encode_tma(void *out, int32_t dtype, int32_t rank, void *global,
                                  const int64_t *dims, const int64_t *strides, const int32_t *box,
                                  int32_t swizzle);

#endif // CUTE_TORCH_RUNTIME_H
