//===- Pipeline.cpp - THE pass order --------------------------------------===//
//
// The only place that says which passes run, and in which order. Compiler.cpp drives the
// stages (and dumps between them); cute-opt registers the same stages as named pipelines
// (`cute-common-pipeline`, `cute-device-pipeline`, `cute-host-pipeline`) for lit tests.
//
//   stage 1  common   (module)      cute -> arith, scf -> cf, canonicalize, cse
//   stage 2  device   (gpu.module)  nvgpu/gpu/arith/math/cf/func -> NVVM + LLVM dialects,
//                                   debug scopes from the Python locations with line info
//            then, per gpu.module (DeviceCodegen.cpp): LLVM IR, libdevice, O<opt_level>,
//            bf16 lane widening (widenBf16Lanes), PTX, CUBIN
//   stage 3  host     (module)      gpu.launch_func -> runtime calls, drop gpu.modules,
//                                   everything -> LLVM dialect; then JIT (HostJit.cpp)
//
//===----------------------------------------------------------------------===//

#include "Pipeline.h"

#include "cute/Dialect/CuteDialect.h"
#include "cute/Transforms/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/NVGPUToNVVM/NVGPUToNVVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace cute_torch {

void registerDialects(DialectRegistry &registry) {
  registry.insert<mlir::cute::CuteDialect, arith::ArithDialect, cf::ControlFlowDialect,
                  func::FuncDialect, gpu::GPUDialect, index::IndexDialect, LLVM::LLVMDialect,
                  math::MathDialect, memref::MemRefDialect, nvgpu::NVGPUDialect, NVVM::NVVMDialect,
                  scf::SCFDialect, vector::VectorDialect>();
  // gpu.module is translated as the top-level op of each device module (DeviceCodegen.cpp).
  registerBuiltinDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
}

void buildCommonPipeline(OpPassManager &pm) {
  pm.addPass(mlir::cute::createLowerToArithPass());
  pm.addPass(createConvertSCFToCFPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void buildDevicePipeline(OpPassManager &pm, bool lineInfo) {
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  if (!lineInfo)
    kernels.addPass(createStripDebugInfoPass());
  // NVGPU's TMA / warpgroup / mbarrier abstractions -> NVVM ops, before the rest lowers.
  kernels.addPass(createConvertNVGPUToNVVMPass());
  kernels.addPass(createConvertGpuOpsToNVVMOps({/*indexBitwidth=*/64}));
  // By-value parameters TMA reads in place (descriptors) become __grid_constant__.
  kernels.addPass(createGridConstantPass());
  // What the NVVM conversion leaves of math (math.fma) becomes LLVM intrinsics.
  kernels.addPass(createConvertMathToLLVMPass());
  // NVVM ops without an LLVM intrinsic in LLVM 19 (wgmma.mma_async, mbarrier.try_wait.parity,
  // cp.async.bulk.tensor, ...) become verified inline PTX.
  kernels.addPass(createConvertNVVMToLLVMPass());
  if (lineInfo)
    kernels.addPass(createLineInfoPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
  kernels.addPass(createCanonicalizerPass());
}

void buildHostPipeline(OpPassManager &pm) {
  pm.addPass(createLowerLaunchesPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

std::vector<KernelRef> collectKernels(ModuleOp module) {
  std::vector<KernelRef> kernels;
  for (auto gpuModule : module.getOps<gpu::GPUModuleOp>()) {
    for (auto func : gpuModule.getOps<gpu::GPUFuncOp>())
      if (func.isKernel())
        kernels.push_back({gpuModule.getName().str(), func.getName().str()});
    // Kernels already lowered to the LLVM dialect (hand-written NVVM) count too.
    for (auto func : gpuModule.getOps<LLVM::LLVMFuncOp>())
      if (func->hasAttr(NVVM::NVVMDialect::getKernelFuncAttrName()))
        kernels.push_back({gpuModule.getName().str(), func.getName().str()});
  }
  return kernels;
}

} // namespace cute_torch
