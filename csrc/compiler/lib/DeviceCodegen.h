//===- DeviceCodegen.h - gpu.module to PTX and CUBIN --------------*- C++ -*-===//

#ifndef CUTE_TORCH_DEVICECODEGEN_H
#define CUTE_TORCH_DEVICECODEGEN_H

#include "PtxUtils.h"

#include "mlir/Support/LogicalResult.h"

#include <map>
#include <string>
#include <vector>

namespace mlir {
class ModuleOp;
namespace gpu {
class GPUModuleOp;
}
} // namespace mlir

namespace cute_torch {

struct CodegenOptions {
  std::string arch = "sm_90a";
  int optLevel = 3;
  bool fmad = false; // a * b + c may become one fma (nvcc's --fmad)
  std::vector<std::string> ptxasOptions;
  bool lineInfo = false;
  std::string cudaHome;
  std::string cubinBackend = "auto"; // auto | ptxas | nvjitlink
  std::string nvJitLinkPath;
  std::string nvdisasmPath; // the SASS stage's disassembler, before $CUDA_HOME/bin's
  std::string name;         // for messages and dumped files
  std::string dumpDir;      // where a failing PTX is kept (a temp dir if empty)
  bool keepLLVM = false;
};

struct ParamInfo {
  std::string type;
  unsigned size = 0, align = 0;
};

struct DeviceModule {
  std::string llvmIR; // only when keepLLVM
  std::string ptx;
  std::string cubin;
  std::string cubinBackend; // which backend made it
  std::map<std::string, std::vector<ParamInfo>> params;
  std::map<std::string, KernelResources> resources;
  double llvmMs = 0, ptxMs = 0, cubinMs = 0;
};

/// Emits an error at each op in the module's gpu.modules that `arch` lacks (wgmma, setmaxnreg:
/// sm_90a; TMA, bulk copies, clusters: sm_90). Run before lowering, while ops keep the user's
/// locations: LLVM's instruction selection would abort the process on some of them.
mlir::LogicalResult checkArchSupport(mlir::ModuleOp module, const std::string &arch);

/// The archs codegen supports, comma-separated ("sm_80,...,sm_90a").
std::string supportedArchList();

/// Lowers one gpu.module (already in the NVVM/LLVM dialects) to PTX and a CUBIN.
/// Throws CompileFailure.
DeviceModule compileDeviceModule(mlir::gpu::GPUModuleOp module,
                                 const std::vector<std::string> &kernelNames,
                                 const CodegenOptions &options);

/// PTX -> CUBIN with ptxas (a subprocess) or nvJitLink (in process). Throws CompileFailure.
std::string assembleCubin(const std::string &ptx, const CodegenOptions &options,
                          std::string &backendUsed, std::string &report);

} // namespace cute_torch

#endif // CUTE_TORCH_DEVICECODEGEN_H
