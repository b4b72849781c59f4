//===- CuteOps.td - cute dialect operations ----------------*- tablegen -*-===//

#ifndef CUTE_OPS
#define CUTE_OPS

include "cute/Dialect/CuteTypes.td"
include "mlir/Dialect/LLVMIR/LLVMOpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
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
  let results = (outs AnySignlessIntegerOrIndex:$result);
  let assemblyFormat = "$layout attr-dict `:` qualified(type($layout)) `->` type($result)";
  let hasFolder = 1;
}

def Cute_CosizeOp : Cute_Op<"cosize", [Pure]> {
  let summary = "One past the largest offset a layout maps to";
  let arguments = (ins Cute_LayoutType:$layout);
  let results = (outs AnySignlessIntegerOrIndex:$result);
  let assemblyFormat = "$layout attr-dict `:` qualified(type($layout)) `->` type($result)";
  let hasFolder = 1;
}

def Cute_GetLeafOp : Cute_Op<"get_leaf", [Pure]> {
  let summary = "One leaf of a layout, numbered over its shape leaves then its stride leaves";
  let description = [{
    `cute.get_leaf %l {index = 1} : !cute.layout<"(?,8):(1,?)"> -> i32` is the extent 8;
    index 3 is the run-time stride. How the DSL reads a run-time leaf of a layout the algebra
    computed (the rest extent of a dynamic divide).
  }];
  let arguments = (ins Cute_LayoutType:$layout, I64Attr:$index);
  let results = (outs AnySignlessIntegerOrIndex:$result);
  let assemblyFormat = "$layout attr-dict `:` qualified(type($layout)) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Cute_Crd2IdxOp : Cute_Op<"crd2idx", [Pure]> {
  let summary = "Maps a coordinate to an offset through a layout";
  let description = [{
    `coord` spells the coordinate in CuTe's notation against the layout's shape: `?` takes the
    next operand, an integer is a static coordinate, `_` (a hole, as in slicing) contributes 0.
    It is congruent to a prefix of the shape; an integer coordinate against a tuple of modes
    is split colexicographically (first mode fastest), as CuTe's crd2idx does:
    `cute.crd2idx %l[%i, %j] {coord = "(?,(2,?))"} : !cute.layout<"(8,(4,?)):(1,(8,?))">, (i32, i32) -> i32`
    (without run-time coordinates: `cute.crd2idx %l[] {coord = "(3,5)"} : !cute.layout<"(?,8):(?,1)"> -> i32`).
    Operands and result share one integer type. Folds when everything is static; lowers to
    multiply-adds (and div/rem for split coordinates).
  }];
  let arguments = (ins Cute_LayoutType:$layout, Variadic<AnySignlessIntegerOrIndex>:$coords,
                       StrAttr:$coord);
  let results = (outs AnySignlessIntegerOrIndex:$result);
  let assemblyFormat = [{
    $layout `[` $coords `]` attr-dict `:` qualified(type($layout)) (`,` `(` type($coords)^ `)`)?
    `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Cute_SwizzleOp : Cute_Op<"swizzle", [Pure, SameOperandsAndResultType]> {
  let summary = "CuTe's Swizzle<B, M, S> of an offset";
  let description = [{
    `cute.swizzle %x {swizzle = array<i64: 3, 4, 3>} : i32` XORs the B bits at M + max(0,S)
    into the bits at M + max(0,-S). Folds on constants.
  }];
  let arguments = (ins AnySignlessInteger:$offset, DenseI64ArrayAttr:$swizzle);
  let results = (outs AnySignlessInteger:$result);
  let assemblyFormat = "$offset attr-dict `:` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Cute_MakeLayoutOp : Cute_Op<"make_layout", [Pure]> {
  let summary = "A layout with run-time leaves";
  let description = [{
    The result type spells the static leaves and marks run-time ones `?`; the operands give the
    run-time leaves in order, shape leaves first, then stride leaves:
    `cute.make_layout(%m, %ld) : (i32, i32) -> !cute.layout<"(?,8):(?,1)">`.
  }];
  let arguments = (ins Variadic<AnySignlessIntegerOrIndex>:$leaves);
  let results = (outs Cute_LayoutType:$result);
  let assemblyFormat = "`(` $leaves `)` attr-dict `:` functional-type($leaves, $result)";
  let hasVerifier = 1;
}

// Layout algebra: the result type is inferred with the C++ layout library (the same code the
// Python front end runs eagerly), and a static result folds to cute.static_layout. Divides
// also take a layout with run-time leaves (DynamicLayout.cpp); their results are then computed
// at run time.
class Cute_AlgebraOp<string mnemonic, dag args, string doc>
    : Cute_Op<mnemonic, [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = doc;
  let arguments = args;
  let results = (outs Cute_LayoutType:$result);
  let hasFolder = 1;
  let extraClassDefinition = [{
    ::mlir::OpFoldResult $cppClass::fold(FoldAdaptor) {
      return foldAlgebra(getOperation());
    }
    ::mlir::LogicalResult $cppClass::inferReturnTypes(::mlir::MLIRContext *context,
        std::optional<::mlir::Location> location, ::mlir::ValueRange operands,
        ::mlir::DictionaryAttr attributes, ::mlir::OpaqueProperties, ::mlir::RegionRange,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      return inferAlgebra(getOperationName(), context, location, operands, attributes, inferred);
    }
  }];
}

// Binary ops take a layout and a tiler; with `by_mode` the tiler's modes apply mode by mode.
// Only the divides are ops: the DSL computes every other operation of the algebra at trace time
// (static layouts, in C++ through cute_torch._C.layout); divides also run on layouts with
// run-time leaves, the tiles of a dynamic-shape tensor.
class Cute_DivideOp<string mnemonic, string doc>
    : Cute_AlgebraOp<mnemonic, (ins Cute_LayoutType:$lhs, Cute_LayoutType:$rhs,
                                    UnitAttr:$by_mode), doc> {
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` qualified(type($lhs)) `,` qualified(type($rhs))";
}

def Cute_LogicalDivideOp : Cute_DivideOp<"logical_divide", "A o (B, B*): tile and rest">;
def Cute_ZippedDivideOp : Cute_DivideOp<"zipped_divide", "((tiles...), (rests...))">;
def Cute_TiledDivideOp : Cute_DivideOp<"tiled_divide", "((tiles...), rest0, rest1, ...)">;
def Cute_FlatDivideOp : Cute_DivideOp<"flat_divide", "(tile0, ..., rest0, ...)">;

// Memory: a TensorSSA register value (a vector) to or from memory, element i at
// base[swizzle(offset + layout(i))], in as few vector instructions as the layout, the
// alignment and the swizzle allow (at most 16 bytes each).
def Cute_LoadOp : Cute_Op<"load"> {
  let summary = "Loads a tensor's elements into a vector";
  let description = [{
    `%v = cute.load %base[%offset] {layout = "(4,2):(1,8)", align = 16, divisibility = 4}
         : !llvm.ptr<1>, i32 -> vector<8xf32>`
    `align` is the base pointer's alignment in bytes, `divisibility` what the run-time element
    offset is known to be a multiple of, `swizzle = array<i64: B, M, S>` an optional CuTe
    swizzle applied to each element's byte address (CuTe DSL's convention: Sw<3,4,3> is the
    128-byte swizzle whatever the element type).
  }];
  let arguments = (ins LLVM_AnyPointer:$base, AnySignlessInteger:$offset, StrAttr:$layout,
                       I64Attr:$align, I64Attr:$divisibility,
                       OptionalAttr<DenseI64ArrayAttr>:$swizzle);
  let results = (outs AnyVector:$result);
  let assemblyFormat = "$base `[` $offset `]` attr-dict `:` qualified(type($base)) `,` type($offset) `->` type($result)";
  let hasVerifier = 1;
}

def Cute_StoreOp : Cute_Op<"store"> {
  let summary = "Stores a vector into a tensor's elements";
  let arguments = (ins AnyVector:$value, LLVM_AnyPointer:$base, AnySignlessInteger:$offset,
                       StrAttr:$layout, I64Attr:$align, I64Attr:$divisibility,
                       OptionalAttr<DenseI64ArrayAttr>:$swizzle);
  let assemblyFormat = "$value `,` $base `[` $offset `]` attr-dict `:` type($value) `,` qualified(type($base)) `,` type($offset)";
  let hasVerifier = 1;
}

#endif // CUTE_OPS
