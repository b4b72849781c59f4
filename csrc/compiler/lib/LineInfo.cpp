//===- LineInfo.cpp - debug scopes from the user's Python locations ------===//
//
// With line info on, every op of a kernel keeps the location the front end gave it (the user's
// `file.py:line:col`). LLVM turns locations into `.loc` directives only inside a function that
// has a DISubprogram, so this pass gives each llvm.func of a gpu.module one:
//
//   llvm.func @k(...) loc(fused<#di_subprogram>["kernel.py":12:1])
//
// with a compile unit per gpu.module whose emission kind is DebugDirectivesOnly: the PTX gets
// `.file`/`.loc` lines and no DWARF sections, which is what `ptxas -lineinfo` maps to SASS.
// An op from another file than its function (a helper defined elsewhere) is scoped by a
// DILexicalBlockFile of its own file, so its lines are not attributed to the kernel's file.
// (MLIR 19's ensure-debug-info-scope-on-llvm-func does the first half, on builtin.module only,
// and attributes every line to the function's file.)
//
//===----------------------------------------------------------------------===//

#include "Pipeline.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Pass/Pass.h"

#include "llvm/BinaryFormat/Dwarf.h"
#include "llvm/Support/Path.h"

using namespace mlir;

namespace cute_torch {
namespace {

LLVM::DIFileAttr fileAttr(MLIRContext *ctx, StringRef path) {
  return LLVM::DIFileAttr::get(ctx, llvm::sys::path::filename(path),
                               llvm::sys::path::parent_path(path));
}

struct LineInfoPass : PassWrapper<LineInfoPass, OperationPass<gpu::GPUModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(LineInfoPass)

  StringRef getArgument() const final { return "cute-line-info"; }
  StringRef getDescription() const final {
    return "Give each llvm.func of a gpu.module a debug scope from its locations (PTX .loc)";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<LLVM::LLVMDialect>();
  }

  void runOnOperation() override {
    gpu::GPUModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    LLVM::DICompileUnitAttr unit;
    for (auto func : module.getOps<LLVM::LLVMFuncOp>()) {
      if (func.isExternal() ||
          func.getLoc()->findInstanceOf<FusedLocWith<LLVM::DISubprogramAttr>>())
        continue;
      // The function's own location (the kernel's `def`), else its first located op.
      FileLineColLoc where = fileLocation(func.getLoc());
      if (!where)
        func.walk([&](Operation *op) {
          if (!where)
            where = fileLocation(op->getLoc());
        });
      if (!where)
        continue;
      LLVM::DIFileAttr file = fileAttr(ctx, where.getFilename());
      if (!unit)
        unit = LLVM::DICompileUnitAttr::get(
            DistinctAttr::create(UnitAttr::get(ctx)), llvm::dwarf::DW_LANG_Python, file,
            StringAttr::get(ctx, "cute_torch"), /*isOptimized=*/true,
            LLVM::DIEmissionKind::DebugDirectivesOnly);
      auto subprogram = LLVM::DISubprogramAttr::get(
          DistinctAttr::create(UnitAttr::get(ctx)), unit, file, func.getName(), func.getName(),
          file, where.getLine(), where.getLine(),
          LLVM::DISubprogramFlags::Definition | LLVM::DISubprogramFlags::Optimized,
          LLVM::DISubroutineTypeAttr::get(ctx, llvm::dwarf::DW_CC_normal, {}));
      func->setLoc(FusedLoc::get(ctx, {func.getLoc()}, subprogram));

      StringRef funcFile = where.getFilename();
      func.walk([&](Operation *op) {
        FileLineColLoc loc = fileLocation(op->getLoc());
        if (!loc || loc.getFilename() == funcFile)
          return;
        auto scope =
            LLVM::DILexicalBlockFileAttr::get(ctx, subprogram, fileAttr(ctx, loc.getFilename()), 0);
        op->setLoc(FusedLoc::get(ctx, {loc}, scope));
      });
    }
  }
};

} // namespace

FileLineColLoc fileLocation(Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return file;
  if (auto name = dyn_cast<NameLoc>(loc))
    return fileLocation(name.getChildLoc());
  if (auto call = dyn_cast<CallSiteLoc>(loc))
    return fileLocation(call.getCallee());
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (FileLineColLoc file = fileLocation(inner))
        return file;
  return {};
}

std::unique_ptr<Pass> createLineInfoPass() { return std::make_unique<LineInfoPass>(); }

} // namespace cute_torch
