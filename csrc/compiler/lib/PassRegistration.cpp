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

void registerPasses() {
  registerAllPasses();
  mlir::cute::registerCutePasses();
  registerPass(createLowerLaunchesPass);
  PassPipelineRegistration<>("cute-common-pipeline", "Stage 1 of the compiler: cute, scf -> cf",
                             buildCommonPipeline);
  PassPipelineRegistration<>("cute-device-pipeline",
                             "Stage 2 of the compiler: gpu.modules -> NVVM/LLVM dialects",
                             buildDevicePipeline);
  PassPipelineRegistration<>(
      "cute-host-pipeline", "Stage 3 of the compiler: launches -> runtime calls, host -> LLVM",
      buildHostPipeline);
}

} // namespace cute_torch
