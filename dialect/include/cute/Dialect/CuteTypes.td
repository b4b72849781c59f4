//===- CuteTypes.td - cute dialect types -------------------*- tablegen -*-===//

#ifndef CUTE_TYPES
#define CUTE_TYPES

include "cute/Dialect/CuteDialect.td"

class Cute_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Cute_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Cute_LayoutType : Cute_Type<"Layout", "layout"> {
  let summary = "A static CuTe layout: a shape and a stride, hierarchical and congruent";
  let description = [{
    Written in CuTe's notation, `!cute.layout<"(4,(2,8)):(2,(1,8))">`. A shape without a stride,
    `!cute.layout<"(4,8)">`, gets the compact column-major stride. The verifier checks that shape
    and stride are congruent and that the shape's extents are positive.
  }];
  let parameters = (ins StringRefParameter<"shape:stride in CuTe notation">:$spec);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The parsed layout (the spec is verified, so this cannot fail).
    ::cute::layout::Layout getLayout() const;
  }];
}

def Cute_PtrType : Cute_Type<"Ptr", "ptr"> {
  let summary = "A typed pointer with an address space and a known alignment";
  let description = [{
    `!cute.ptr<f32, gmem, align 16>`: element type, address space (`gmem`, `smem`, `rmem`) and
    the alignment in bytes the pointer is known to have (a power of two, at least the element's).
  }];
  let parameters = (ins "::mlir::Type":$elementType, "unsigned":$addressSpace,
                        "unsigned":$alignment);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    static constexpr unsigned kGmem = 1, kSmem = 3, kRmem = 5;
  }];
}

#endif // CUTE_TYPES
