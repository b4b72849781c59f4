//===- Passes.td - cute dialect passes ---------------------*- tablegen -*-===//

#ifndef CUTE_PASSES
#define CUTE_PASSES

include "mlir/Pass/PassBase.td"

def CuteLowerToArith : Pass<"cute-lower-to-arith"> {
  let summary = "Lower the cute dialect: layouts to index arithmetic, load/store to LLVM "
                "vector memory instructions";
  let constructor = "mlir::cute::createLowerToArithPass()";
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::LLVM::LLVMDialect"];
}

#endif // CUTE_PASSES
