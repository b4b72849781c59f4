//===- CuteDialect.cpp - the cute dialect: types, ops, folders -----------===//

#include "cute/Dialect/CuteDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::cute;

#include "cute/Dialect/CuteDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "cute/Dialect/CuteTypes.cpp.inc"

#define GET_OP_CLASSES
#include "cute/Dialect/CuteOps.cpp.inc"

void CuteDialect::initialize() {
  registerTypes();
  addOperations<
#define GET_OP_LIST
#include "cute/Dialect/CuteOps.cpp.inc"
      >();
}

void CuteDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "cute/Dialect/CuteTypes.cpp.inc"
      >();
}

Operation *CuteDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                            Location loc) {
  if (auto integer = value.dyn_cast<IntegerAttr>())
    return builder.create<arith::ConstantOp>(loc, type, integer);
  return nullptr;
}

//===----------------------------------------------------------------------===//
// LayoutType
//===----------------------------------------------------------------------===//

LogicalResult LayoutType::verify(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef spec) {
  std::string error;
  if (!::cute::layout::parseLayout(spec.str(), &error))
    return emitError() << "invalid layout \"" << spec << "\": " << error;
  return success();
}

::cute::layout::Layout LayoutType::getLayout() const {
  return *::cute::layout::parseLayout(getSpec().str(), nullptr);
}

Type LayoutType::parse(AsmParser &parser) {
  std::string spec;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parser.parseString(&spec) || parser.parseGreater())
    return {};
  std::string error;
  std::optional<::cute::layout::Layout> layout = ::cute::layout::parseLayout(spec, &error);
  if (!layout) {
    parser.emitError(loc) << "invalid layout \"" << spec << "\": " << error;
    return {};
  }
  // Store the canonical spelling, so `"(4,8)"` and `"(4,8):(1,4)"` are the same type.
  return LayoutType::get(parser.getContext(), layout->str());
}

void LayoutType::print(AsmPrinter &printer) const {
  printer << "<\"" << getSpec() << "\">";
}

//===----------------------------------------------------------------------===//
// PtrType
//===----------------------------------------------------------------------===//

static std::optional<unsigned> addressSpaceFromKeyword(StringRef keyword) {
  return llvm::StringSwitch<std::optional<unsigned>>(keyword)
      .Case("gmem", PtrType::kGmem)
      .Case("smem", PtrType::kSmem)
      .Case("rmem", PtrType::kRmem)
      .Default(std::nullopt);
}

static StringRef addressSpaceKeyword(unsigned space) {
  switch (space) {
  case PtrType::kGmem:
    return "gmem";
  case PtrType::kSmem:
    return "smem";
  case PtrType::kRmem:
    return "rmem";
  }
  return "?";
}

LogicalResult PtrType::verify(function_ref<InFlightDiagnostic()> emitError, Type elementType,
                              unsigned addressSpace, unsigned alignment) {
  if (addressSpaceKeyword(addressSpace) == "?")
    return emitError() << "unknown address space " << addressSpace;
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    return emitError() << "alignment " << alignment << " is not a power of two";
  if (elementType.isIntOrFloat()) {
    unsigned bytes = std::max(1u, elementType.getIntOrFloatBitWidth() / 8);
    if (alignment < bytes)
      return emitError() << "alignment " << alignment << " is smaller than the element's "
                         << bytes << " bytes";
  }
  return success();
}

Type PtrType::parse(AsmParser &parser) {
  Type elementType;
  StringRef space;
  unsigned alignment = 0;
  SMLoc spaceLoc;
  if (parser.parseLess() || parser.parseType(elementType) || parser.parseComma())
    return {};
  spaceLoc = parser.getCurrentLocation();
  if (parser.parseKeyword(&space))
    return {};
  std::optional<unsigned> addressSpace = addressSpaceFromKeyword(space);
  if (!addressSpace) {
    parser.emitError(spaceLoc) << "expected address space gmem, smem or rmem, got '" << space
                               << "'";
    return {};
  }
  if (parser.parseComma() || parser.parseKeyword("align") || parser.parseInteger(alignment) ||
      parser.parseGreater())
    return {};
  return PtrType::getChecked([&] { return parser.emitError(spaceLoc); }, parser.getContext(),
                             elementType, *addressSpace, alignment);
}

void PtrType::print(AsmPrinter &printer) const {
  printer << "<" << getElementType() << ", " << addressSpaceKeyword(getAddressSpace())
          << ", align " << getAlignment() << ">";
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

static ::cute::layout::Layout layoutOf(Value value) {
  return value.getType().cast<LayoutType>().getLayout();
}

OpFoldResult StaticLayoutOp::fold(FoldAdaptor) {
  return UnitAttr::get(getContext()); // Constant-like: the type carries everything.
}

OpFoldResult SizeOp::fold(FoldAdaptor) {
  return IntegerAttr::get(IndexType::get(getContext()), layoutOf(getLayout()).size());
}

OpFoldResult CosizeOp::fold(FoldAdaptor) {
  return IntegerAttr::get(IndexType::get(getContext()), layoutOf(getLayout()).cosize());
}

LogicalResult Crd2IdxOp::verify() {
  ::cute::layout::Layout layout = layoutOf(getLayout());
  size_t leaves = layout.getShape().flatten().size();
  size_t given = getCoords().size();
  if (given != 1 && given != leaves)
    return emitOpError() << "takes 1 linear coordinate or " << leaves
                         << " (one per leaf of the shape " << layout.getShape().str()
                         << "), got " << given;
  return success();
}

OpFoldResult Crd2IdxOp::fold(FoldAdaptor adaptor) {
  std::vector<int64_t> coords;
  for (Attribute attr : adaptor.getCoords()) {
    auto integer = attr.dyn_cast_or_null<IntegerAttr>();
    if (!integer)
      return {};
    coords.push_back(integer.getInt());
  }
  ::cute::layout::Layout layout = layoutOf(getLayout());
  int64_t offset = coords.size() == 1 && layout.getShape().flatten().size() != 1
                       ? layout(coords.front())
                       : layout.crd2idx(coords);
  return IntegerAttr::get(IndexType::get(getContext()), offset);
}
