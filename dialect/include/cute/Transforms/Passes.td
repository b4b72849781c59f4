//===- Passes.td - cute dialect passes ---------------------*- tablegen -*-===//

#ifndef CUTE_PASSES
#define CUTE_PASSES

include "mlir/Pass/PassBase.td"

def CuteLowerToArith : Pass<"cute-lower-to-arith"> {
  let summary = "Lower layout algebra ops to index arithmetic";
  let constructor = "mlir::cute::createLowerToArithPass()";
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

#endif // CUTE_PASSES
