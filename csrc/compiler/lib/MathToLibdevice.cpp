//===- MathToLibdevice.cpp - math ops NVVM lowering misses, as libdevice -===//
//
// MLIR 16's GPU-to-NVVM conversion turns most math ops into libdevice calls (__nv_expf, ...)
// but not all; this pass does the rest, in each gpu.module, before that conversion:
//
//   %y = math.erf %x : f32   ->   %y = llvm.call @__nv_erff(%x) : (f32) -> f32
//
// DeviceCodegen links the libdevice functions a module calls.
//
//===----------------------------------------------------------------------===//

#include "Pipeline.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;

namespace cute_torch {
namespace {

struct Libdevice {
  StringRef op, f32, f64;
};
// Math ops the upstream conversion leaves alone, with their libdevice names.
constexpr Libdevice kFunctions[] = {{"math.erf", "__nv_erff", "__nv_erf"}};

struct MathToLibdevicePass : PassWrapper<MathToLibdevicePass, OperationPass<gpu::GPUModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(MathToLibdevicePass)

  StringRef getArgument() const final { return "cute-math-to-libdevice"; }
  StringRef getDescription() const final {
    return "Lower math ops that the NVVM conversion does not handle to libdevice calls";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<LLVM::LLVMDialect>();
  }

  void runOnOperation() override {
    gpu::GPUModuleOp module = getOperation();
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      for (const Libdevice &fn : kFunctions)
        if (op->getName().getStringRef() == fn.op)
          ops.push_back(op);
    });
    for (Operation *op : ops) {
      const Libdevice *fn = std::find_if(std::begin(kFunctions), std::end(kFunctions),
                                         [&](const Libdevice &f) {
                                           return op->getName().getStringRef() == f.op;
                                         });
      Type type = op->getResult(0).getType();
      StringRef name = type.isF32() ? fn->f32 : type.isF64() ? fn->f64 : StringRef();
      if (name.empty()) {
        op->emitOpError() << "has no libdevice function for " << type << "; use f32 or f64";
        return signalPassFailure();
      }
      auto callee = module.lookupSymbol<LLVM::LLVMFuncOp>(name);
      if (!callee) {
        OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
        callee = builder.create<LLVM::LLVMFuncOp>(op->getLoc(), name,
                                                  LLVM::LLVMFunctionType::get(type, {type}));
      }
      OpBuilder builder(op);
      auto call = builder.create<LLVM::CallOp>(op->getLoc(), callee, op->getOperands());
      op->replaceAllUsesWith(call.getResults());
      op->erase();
    }
  }
};

} // namespace

std::unique_ptr<Pass> createMathToLibdevicePass() { return std::make_unique<MathToLibdevicePass>(); }

} // namespace cute_torch
