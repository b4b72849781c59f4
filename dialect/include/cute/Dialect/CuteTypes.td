//===- CuteTypes.td - cute dialect types -------------------*- tablegen -*-===//

#ifndef CUTE_TYPES
#define CUTE_TYPES

include "cute/Dialect/CuteDialect.td"

class Cute_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Cute_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Cute_LayoutType : Cute_Type<"Layout", "layout"> {
  let summary = "A CuTe layout (static or `?` run-time leaves): a hierarchical, congruent shape and stride";
  let description = [{
    Written in CuTe's notation, `!cute.layout<"(4,(2,8)):(2,(1,8))">`. A shape without a stride,
    `!cute.layout<"(4,8)">`, gets the compact column-major stride. The verifier checks that shape
    and stride are congruent and that the shape's static extents are positive.
  }];
  let parameters = (ins StringRefParameter<"shape:stride in CuTe notation">:$spec);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The parsed layout (the spec is verified, so this cannot fail).
    ::cute::layout::Layout getLayout() const;
  }];
}

#endif // CUTE_TYPES
