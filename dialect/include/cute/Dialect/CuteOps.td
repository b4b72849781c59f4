//===- CuteOps.td - cute dialect operations ----------------*- tablegen -*-===//

#ifndef CUTE_OPS
#define CUTE_OPS

include "cute/Dialect/CuteTypes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Cute_StaticLayoutOp : Cute_Op<"static_layout", [Pure, ConstantLike]> {
  let summary = "Materializes a static layout as a value";
  let results = (outs Cute_LayoutType:$result);
  let assemblyFormat = "attr-dict `:` qualified(type($result))";
  let hasFolder = 1;
}

def Cute_SizeOp : Cute_Op<"size", [Pure]> {
  let summary = "The number of coordinates of a layout (the product of its shape)";
  let arguments = (ins Cute_LayoutType:$layout);
  let results = (outs Index:$result);
  let assemblyFormat = "$layout attr-dict `:` qualified(type($layout))";
  let hasFolder = 1;
}

def Cute_CosizeOp : Cute_Op<"cosize", [Pure]> {
  let summary = "One past the largest offset a layout maps to";
  let arguments = (ins Cute_LayoutType:$layout);
  let results = (outs Index:$result);
  let assemblyFormat = "$layout attr-dict `:` qualified(type($layout))";
  let hasFolder = 1;
}

def Cute_Crd2IdxOp : Cute_Op<"crd2idx", [Pure]> {
  let summary = "Maps a coordinate to an offset through a layout";
  let description = [{
    Takes either one linear (colexicographic) coordinate or one coordinate per leaf of the
    flattened shape, and returns the offset `sum(c_i * d_i)`. Folds when all coordinates are
    constants; lowers to index arithmetic.
  }];
  let arguments = (ins Variadic<Index>:$coords, Cute_LayoutType:$layout);
  let results = (outs Index:$result);
  let assemblyFormat = "`(` $coords `)` `,` $layout attr-dict `:` qualified(type($layout))";
  let hasVerifier = 1;
  let hasFolder = 1;
}

#endif // CUTE_OPS
