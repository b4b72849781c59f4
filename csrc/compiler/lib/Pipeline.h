//===- Pipeline.h - dialects, passes and the pass order -----------*- C++ -*-===//
//
// Internal to the compiler (it exposes MLIR types); cute-opt uses it too, so lit tests run
// exactly the pipelines the compiler runs.
//
//===----------------------------------------------------------------------===//

#ifndef CUTE_TORCH_PIPELINE_H
#define CUTE_TORCH_PIPELINE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"

#include <memory>
#include <string>
#include <vector>

namespace cute_torch {

/// cute + the upstream dialects a module may contain, with their LLVM IR translations.
void registerDialects(mlir::DialectRegistry &registry);
/// Our passes, the upstream ones cute-opt offers, and the named pipelines below.
void registerPasses();

/// One kernel of the artifact; its index is what host code passes to the runtime.
struct KernelRef {
  std::string module, name;
};

/// Stage 1, on the whole module: cute ops to arith, structured control flow to CFG.
void buildCommonPipeline(mlir::OpPassManager &pm);
/// Stage 2, on each gpu.module: everything to the NVVM/LLVM dialects. With `lineInfo` the ops
/// keep their (Python) locations and each kernel gets a debug scope, so the PTX carries `.loc`
/// lines; without it locations are stripped.
void buildDevicePipeline(mlir::OpPassManager &pm, bool lineInfo);
/// Stage 3, on the host part: launches to runtime calls, then everything to the LLVM dialect.
void buildHostPipeline(mlir::OpPassManager &pm);

/// The kernels of a module in artifact order: gpu.modules in order, kernels in order.
std::vector<KernelRef> collectKernels(mlir::ModuleOp module);

/// gpu.launch_func -> call @cute_rt_launch(kernel index, grid, block, cluster, smem, params),
/// with kernel indices from collectKernels; then the gpu.modules are dropped.
std::unique_ptr<mlir::Pass> createLowerLaunchesPass();
/// The first file:line:col inside a location (through names, call sites and fusions), or null.
mlir::FileLineColLoc fileLocation(mlir::Location loc);
/// A DISubprogram per llvm.func of a gpu.module, from the ops' locations (see LineInfo.cpp).
std::unique_ptr<mlir::Pass> createLineInfoPass();
/// `cute.grid_constant` kernel arguments -> `nvvm.grid_constant` (see GridConstant.cpp).
std::unique_ptr<mlir::Pass> createGridConstantPass();
/// Name of the runtime entry host code calls; see csrc/runtime.
inline constexpr const char *kRuntimeLaunchSymbol = "cute_rt_launch";

} // namespace cute_torch

#endif // CUTE_TORCH_PIPELINE_H
