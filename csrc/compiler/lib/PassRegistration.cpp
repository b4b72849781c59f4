//===- PassRegistration.cpp - what cute-opt offers ------------------------===//
//
// Kept out of Pipeline.cpp so the compiler library does not link every upstream pass.
//
//===----------------------------------------------------------------------===//

#include "Pipeline.h"

#include "cute/Transforms/Passes.h"

#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace cute_torch {
namespace {
struct DevicePipelineOptions : PassPipelineOptions<DevicePipelineOptions> {
  Option<bool> lineInfo{*this, "line-info",
                        llvm::cl::desc("Keep locations and give kernels debug scopes (PTX .loc)"),
                        llvm::cl::init(false)};
};
} // namespace

void registerPasses() {
  registerAllPasses();
  mlir::cute::registerCutePasses();
  registerPass(createLowerLaunchesPass);
  registerPass(createLineInfoPass);
  registerPass(createGridConstantPass);
  PassPipelineRegistration<>("cute-common-pipeline", "Stage 1 of the compiler: cute, scf -> cf",
                             buildCommonPipeline);
  PassPipelineRegistration<DevicePipelineOptions>(
      "cute-device-pipeline", "Stage 2 of the compiler: gpu.modules -> NVVM/LLVM dialects",
      [](OpPassManager &pm, const DevicePipelineOptions &options) {
        buildDevicePipeline(pm, options.lineInfo);
      });
  PassPipelineRegistration<>("cute-host-pipeline",
                             "Stage 3 of the compiler: launches -> runtime calls, host -> LLVM",
                             buildHostPipeline);
}

} // namespace cute_torch
