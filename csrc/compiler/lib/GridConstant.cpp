//===- GridConstant.cpp - by-value kernel parameters the kernel reads in place ----===//
//
// A TMA descriptor is a 128-byte kernel parameter that TMA instructions must read where the
// launch put it (param space), not from a local copy. The DSL passes it as a pointer argument
// and lists those arguments on the gpu.func as `cute.grid_constant = array<i32: ...>` (the
// gpu.func -> llvm.func conversion keeps function attributes but drops `llvm.byval` argument
// attributes). Once the kernel is an llvm.func carrying `nvvm.kernel` (the NVVM dialect only
// accepts grid constants there), this pass makes each listed argument
// `{llvm.byval = !llvm.array<16 x i64>, llvm.align = 64, nvvm.grid_constant}`: a 128-byte,
// 64-byte aligned by-value parameter with CUDA's __grid_constant__, which the NVPTX backend
// lets the kernel address in place. LowerLaunches passes the host's pointer to those bytes.
//
//===----------------------------------------------------------------------===//

#include "Pipeline.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;

namespace cute_torch {
namespace {

struct GridConstantPass : PassWrapper<GridConstantPass, OperationPass<gpu::GPUModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(GridConstantPass)

  StringRef getArgument() const final { return "cute-grid-constant"; }
  StringRef getDescription() const final {
    return "Mark kernel arguments tagged cute.grid_constant as nvvm.grid_constant";
  }

  void runOnOperation() override {
    for (auto func : getOperation().getOps<LLVM::LLVMFuncOp>()) {
      auto listed = func->getAttrOfType<DenseI32ArrayAttr>("cute.grid_constant");
      if (!listed)
        continue;
      func->removeAttr("cute.grid_constant");
      if (!func->hasAttr(NVVM::NVVMDialect::getKernelFuncAttrName())) {
        func.emitError() << "@" << func.getName()
                         << " lists cute.grid_constant arguments but is not a kernel";
        return signalPassFailure();
      }
      MLIRContext *ctx = func.getContext();
      Builder builder(ctx);
      Type bytes = LLVM::LLVMArrayType::get(builder.getI64Type(), 16);
      for (int32_t i : listed.asArrayRef()) {
        if (i < 0 || unsigned(i) >= func.getNumArguments() ||
            !isa<LLVM::LLVMPointerType>(func.getArgument(i).getType())) {
          func.emitError() << "cute.grid_constant lists argument #" << i
                           << ", which is not a pointer argument";
          return signalPassFailure();
        }
        func.setArgAttr(i, LLVM::LLVMDialect::getByValAttrName(), TypeAttr::get(bytes));
        func.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(), builder.getI64IntegerAttr(64));
        func.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(), UnitAttr::get(ctx));
      }
    }
  }
};

} // namespace

std::unique_ptr<Pass> createGridConstantPass() { return std::make_unique<GridConstantPass>(); }

} // namespace cute_torch
