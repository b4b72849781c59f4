//===- LowerLaunches.cpp - gpu.launch_func to runtime calls ---------------===//
//
// Host code launches kernels through the runtime, on the stream and device of the caller's
// launch context (see csrc/runtime): each gpu.launch_func becomes
//
//   call @cute_rt_launch(i32 kernel, i64 gx, gy, gz, i64 bx, by, bz, i32 cx, cy, cz,
//                        i32 smem, ptr params)
//
// where `params` is an array of pointers to stack copies of the kernel's arguments, as
// cuLaunchKernel wants them (a by-value aggregate, `llvm.byval`, is already a pointer). Cluster
// dims come from an optional `cute.cluster` attribute (array<i32: x, y, z>) on the launch. The
// gpu.modules are dropped afterwards: their CUBINs travel in the artifact.
//
//===----------------------------------------------------------------------===//

#include "Pipeline.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;

namespace cute_torch {
namespace {

struct LowerLaunchesPass : PassWrapper<LowerLaunchesPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(LowerLaunchesPass)

  StringRef getArgument() const final { return "cute-lower-launches"; }
  StringRef getDescription() const final {
    return "Lower gpu.launch_func to calls of the cute runtime and drop gpu.modules";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<LLVM::LLVMDialect, arith::ArithDialect>();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::vector<KernelRef> kernels = collectKernels(module);
    LLVM::LLVMFuncOp launchFn = declareRuntimeLaunch(module);

    WalkResult result = module.walk([&](gpu::LaunchFuncOp launch) {
      auto found = std::find_if(kernels.begin(), kernels.end(), [&](const KernelRef &k) {
        return k.module == launch.getKernelModuleName().getValue() &&
               k.name == launch.getKernelName().getValue();
      });
      if (found == kernels.end()) {
        launch.emitOpError() << "launches @" << launch.getKernelModuleName().getValue() << "::@"
                             << launch.getKernelName().getValue()
                             << ", which is not a kernel of this module";
        return WalkResult::interrupt();
      }
      if (failed(lower(launch, found - kernels.begin(), launchFn)))
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return signalPassFailure();

    for (auto gpuModule : llvm::make_early_inc_range(module.getOps<gpu::GPUModuleOp>()))
      gpuModule.erase();
    module->removeAttr(gpu::GPUDialect::getContainerModuleAttrName());
  }

  static LLVM::LLVMFuncOp declareRuntimeLaunch(ModuleOp module) {
    if (auto existing = module.lookupSymbol<LLVM::LLVMFuncOp>(kRuntimeLaunchSymbol))
      return existing;
    MLIRContext *ctx = module.getContext();
    OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
    Type i32 = builder.getI32Type(), i64 = builder.getI64Type();
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    auto type = LLVM::LLVMFunctionType::get(
        i32, {i32, i64, i64, i64, i64, i64, i64, i32, i32, i32, i32, ptr});
    return builder.create<LLVM::LLVMFuncOp>(module.getLoc(), kRuntimeLaunchSymbol, type);
  }

  LogicalResult lower(gpu::LaunchFuncOp launch, int64_t kernelIndex, LLVM::LLVMFuncOp launchFn) {
    if (launch.getAsyncToken() || !launch.getAsyncDependencies().empty())
      return launch.emitOpError()
             << "async tokens are not supported: launches run on the caller's stream in "
                "program order";
    Location loc = launch.getLoc();
    MLIRContext *ctx = launch.getContext();
    Type i32 = IntegerType::get(ctx, 32), i64 = IntegerType::get(ctx, 64);
    Type ptr = LLVM::LLVMPointerType::get(ctx);

    // Stack slots go in the entry block, so launches inside loops do not grow the stack.
    auto func = launch->getParentOfType<FunctionOpInterface>();
    OpBuilder entry(ctx);
    entry.setInsertionPointToStart(&func.getFunctionBody().front());
    OpBuilder builder(launch);

    auto constI32 = [&](int64_t v) -> Value {
      return builder.create<arith::ConstantIntOp>(loc, v, 32);
    };
    auto toI64 = [&](Value v) -> Value {
      if (v.getType().isIndex())
        return builder.create<arith::IndexCastOp>(loc, i64, v);
      return v;
    };

    SmallVector<Value> args;
    args.push_back(constI32(kernelIndex));
    gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
    gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
    for (Value v : {grid.x, grid.y, grid.z, block.x, block.y, block.z})
      args.push_back(toI64(v));
    SmallVector<int32_t, 3> cluster = {1, 1, 1};
    if (Attribute attr = launch->getAttr("cute.cluster")) {
      auto dims = mlir::dyn_cast<DenseI32ArrayAttr>(attr);
      if (!dims || dims.size() != 3)
        return launch.emitOpError() << "'cute.cluster' must be array<i32: x, y, z>";
      cluster.assign(dims.asArrayRef().begin(), dims.asArrayRef().end());
    }
    for (int32_t c : cluster)
      args.push_back(constI32(c));
    Value smem = launch.getDynamicSharedMemorySize();
    args.push_back(smem ? smem : constI32(0));

    // params[i] = &copy_i, except for an argument the kernel takes by value through a pointer
    // (`llvm.byval`, a TMA descriptor): the host operand already points at its bytes.
    auto kernelFn = dyn_cast_or_null<FunctionOpInterface>(
        SymbolTable::lookupNearestSymbolFrom(launch, launch.getKernelAttr()));
    auto operands = launch.getKernelOperands();
    Value one = entry.create<LLVM::ConstantOp>(loc, i64, entry.getI64IntegerAttr(1));
    Value count = entry.create<LLVM::ConstantOp>(
        loc, i64, entry.getI64IntegerAttr(std::max<int64_t>(1, operands.size())));
    Value params = entry.create<LLVM::AllocaOp>(loc, ptr, ptr, count, 8);
    for (auto [i, operand] : llvm::enumerate(operands)) {
      Value value = toI64(operand);
      Type type = value.getType();
      if (!LLVM::isCompatibleType(type))
        return launch.emitOpError() << "kernel argument #" << i << " has type " << type
                                    << ", which cannot cross the launch boundary; pass "
                                       "scalars and !llvm.ptr";
      Value slot = value;
      if (!kernelFn || i >= kernelFn.getNumArguments() || !kernelFn.getArgAttr(i, "llvm.byval")) {
        slot = entry.create<LLVM::AllocaOp>(loc, ptr, type, one, 16);
        builder.create<LLVM::StoreOp>(loc, value, slot);
      }
      Value entryPtr =
          builder.create<LLVM::GEPOp>(loc, ptr, ptr, params, ArrayRef<LLVM::GEPArg>{int32_t(i)});
      builder.create<LLVM::StoreOp>(loc, slot, entryPtr);
    }
    args.push_back(params);
    builder.create<LLVM::CallOp>(loc, launchFn, args);
    launch.erase();
    return success();
  }
};

} // namespace

std::unique_ptr<Pass> createLowerLaunchesPass() { return std::make_unique<LowerLaunchesPass>(); }

} // namespace cute_torch
