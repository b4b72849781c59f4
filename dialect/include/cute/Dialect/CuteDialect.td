//===- CuteDialect.td - the cute dialect -------------------*- tablegen -*-===//
//
// The `cute` dialect: CuTe layouts and the algebra over them. Static parts of a
// layout live in its type; dynamic leaves are SSA operands of cute.make_layout.
//
//===----------------------------------------------------------------------===//

#ifndef CUTE_DIALECT
#define CUTE_DIALECT

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Cute_Dialect : Dialect {
  let name = "cute";
  let summary = "CuTe layouts and layout algebra";
  let cppNamespace = "::mlir::cute";
  let useDefaultTypePrinterParser = 1;
  let hasConstantMaterializer = 1;
  // Attributes stay in the op's attribute dictionary, where inferAlgebra reads them.
  let usePropertiesForAttributes = 0;
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::LLVM::LLVMDialect"];
  let extraClassDeclaration = [{
    void registerTypes();
  }];
}

class Cute_Op<string mnemonic, list<Trait> traits = []>
    : Op<Cute_Dialect, mnemonic, traits>;

#endif // CUTE_DIALECT
