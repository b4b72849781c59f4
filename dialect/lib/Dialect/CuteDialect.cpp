//===- CuteDialect.cpp - the cute dialect: types, ops, folders -----------===//

#include "cute/Dialect/CuteDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
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
  if (auto integer = mlir::dyn_cast<IntegerAttr>(value))
    return builder.create<arith::ConstantOp>(loc, type, integer);
  if (auto layout = mlir::dyn_cast<LayoutType>(type))
    return builder.create<StaticLayoutOp>(loc, layout);
  return nullptr;
}

//===----------------------------------------------------------------------===//
// LayoutType
//===----------------------------------------------------------------------===//

LogicalResult LayoutType::verify(function_ref<InFlightDiagnostic()> emitError, StringRef spec) {
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

void LayoutType::print(AsmPrinter &printer) const { printer << "<\"" << getSpec() << "\">"; }

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

static ::cute::layout::Layout layoutOf(Value value) {
  return mlir::cast<LayoutType>(value.getType()).getLayout();
}

OpFoldResult StaticLayoutOp::fold(FoldAdaptor) {
  return UnitAttr::get(getContext()); // Constant-like: the type carries everything.
}

static OpFoldResult integerFold(Type type, int64_t value) { return IntegerAttr::get(type, value); }

OpFoldResult SizeOp::fold(FoldAdaptor) {
  ::cute::layout::Layout layout = layoutOf(getLayout());
  if (!layout.getShape().isStatic())
    return {};
  return integerFold(getType(), layout.size());
}

OpFoldResult CosizeOp::fold(FoldAdaptor) {
  ::cute::layout::Layout layout = layoutOf(getLayout());
  if (!layout.isStatic())
    return {};
  return integerFold(getType(), layout.cosize());
}

/// Every leaf of a layout, shape then stride.
static std::vector<::cute::layout::IntTuple> allLeaves(const ::cute::layout::Layout &layout) {
  std::vector<::cute::layout::IntTuple> leaves = layout.getShape().leaves();
  std::vector<::cute::layout::IntTuple> strides = layout.getStride().leaves();
  leaves.insert(leaves.end(), strides.begin(), strides.end());
  return leaves;
}

LogicalResult GetLeafOp::verify() {
  size_t count = allLeaves(layoutOf(getLayout())).size();
  if (getIndex() < 0 || size_t(getIndex()) >= count)
    return emitOpError() << "leaf " << getIndex() << " of a layout with " << count
                         << " leaves (shape then stride)";
  return success();
}

OpFoldResult GetLeafOp::fold(FoldAdaptor) {
  ::cute::layout::IntTuple leaf = allLeaves(layoutOf(getLayout()))[getIndex()];
  if (leaf.isDynamic())
    return {};
  return integerFold(getType(), leaf.getValue());
}

/// The coordinate spelled by `coord` with the `?`s replaced by `values` (nullopt where a
/// value is unknown), in order.
static std::optional<::cute::layout::IntTuple> substitute(const ::cute::layout::IntTuple &coord,
                                                          ArrayRef<std::optional<int64_t>> values,
                                                          size_t &next) {
  namespace L = ::cute::layout;
  if (!coord.isLeaf()) {
    std::vector<L::IntTuple> children;
    for (const L::IntTuple &child : coord.getChildren()) {
      std::optional<L::IntTuple> found = substitute(child, values, next);
      if (!found)
        return std::nullopt;
      children.push_back(*found);
    }
    return L::IntTuple(children);
  }
  if (!coord.isDynamic())
    return coord;
  std::optional<int64_t> value = values[next++];
  if (!value)
    return std::nullopt;
  return L::IntTuple(*value);
}

/// True when `coord` fits `shape` the way crd2idx reads it: a tuple against a tuple of the same
/// rank, mode by mode; a leaf against anything.
static bool fitsShape(const ::cute::layout::IntTuple &coord,
                      const ::cute::layout::IntTuple &shape) {
  if (coord.isLeaf())
    return true;
  if (shape.isLeaf() || coord.rank() != shape.rank())
    return false;
  for (size_t i = 0; i < coord.rank(); ++i)
    if (!fitsShape(coord[i], shape[i]))
      return false;
  return true;
}

static size_t countDynamic(const ::cute::layout::IntTuple &tuple) {
  size_t count = 0;
  for (const auto &leaf : tuple.leaves())
    count += leaf.isDynamic();
  return count;
}

LogicalResult Crd2IdxOp::verify() {
  std::string error;
  std::optional<::cute::layout::IntTuple> coord =
      ::cute::layout::parseIntTuple(getCoord().str(), &error);
  if (!coord)
    return emitOpError() << "invalid coordinate \"" << getCoord() << "\": " << error;
  ::cute::layout::Layout layout = layoutOf(getLayout());
  if (!fitsShape(*coord, layout.getShape()))
    return emitOpError() << "coordinate " << coord->str() << " does not fit the shape "
                         << layout.getShape().str();
  if (countDynamic(*coord) != getCoords().size())
    return emitOpError() << "coordinate " << coord->str() << " has " << countDynamic(*coord)
                         << " run-time entries ('?'), but " << getCoords().size()
                         << " values were given";
  for (Value value : getCoords())
    if (value.getType() != getType())
      return emitOpError() << "coordinates must have the result's type " << getType();
  return success();
}

OpFoldResult Crd2IdxOp::fold(FoldAdaptor adaptor) {
  ::cute::layout::Layout layout = layoutOf(getLayout());
  if (!layout.isStatic())
    return {};
  SmallVector<std::optional<int64_t>> values;
  for (Attribute attr : adaptor.getCoords()) {
    auto integer = mlir::dyn_cast_or_null<IntegerAttr>(attr);
    values.push_back(integer ? std::optional<int64_t>(integer.getInt()) : std::nullopt);
  }
  size_t next = 0;
  std::optional<::cute::layout::IntTuple> coord =
      substitute(*::cute::layout::parseIntTuple(getCoord().str(), nullptr), values, next);
  if (!coord)
    return {};
  return integerFold(getType(), layout.crd2idx(*coord));
}

LogicalResult SwizzleOp::verify() {
  ArrayRef<int64_t> s = getSwizzle();
  if (s.size() != 3)
    return emitOpError() << "swizzle is array<i64: bits, base, shift>";
  if (s[0] < 0 || s[1] < 0 || std::abs(s[2]) < s[0])
    return emitOpError() << "Swizzle<" << s[0] << "," << s[1] << "," << s[2]
                         << "> needs bits, base >= 0 and |shift| >= bits";
  return success();
}

OpFoldResult SwizzleOp::fold(FoldAdaptor adaptor) {
  auto integer = mlir::dyn_cast_or_null<IntegerAttr>(adaptor.getOffset());
  if (!integer)
    return {};
  ArrayRef<int64_t> s = getSwizzle();
  ::cute::layout::Swizzle swizzle{int(s[0]), int(s[1]), int(s[2])};
  return integerFold(getType(), swizzle(integer.getInt()));
}

//===----------------------------------------------------------------------===//
// make_layout and the algebra
//===----------------------------------------------------------------------===//

LogicalResult MakeLayoutOp::verify() {
  ::cute::layout::Layout layout = mlir::cast<LayoutType>(getResult().getType()).getLayout();
  size_t wanted = countDynamic(layout.getShape()) + countDynamic(layout.getStride());
  if (wanted != getLeaves().size())
    return emitOpError() << "the layout " << layout.str() << " has " << wanted
                         << " run-time leaves ('?'), but " << getLeaves().size()
                         << " values were given";
  return success();
}

LogicalResult mlir::cute::inferAlgebra(StringRef opName, MLIRContext *context,
                                       std::optional<Location> location, ValueRange operands,
                                       DictionaryAttr attributes, SmallVectorImpl<Type> &inferred) {
  namespace L = ::cute::layout;
  std::vector<L::Layout> args;
  for (Value operand : operands) {
    auto type = mlir::dyn_cast<LayoutType>(operand.getType());
    if (!type)
      return emitOptionalError(location, "'", opName, "' takes layouts");
    args.push_back(type.getLayout());
  }
  StringRef name = opName.drop_front(std::string("cute.").size());
  bool byMode = attributes && attributes.get("by_mode");
  auto tiler = [&] { return byMode ? L::Tiler(args[1].modes()) : L::Tiler(args[1]); };
  std::string error;
  std::optional<L::Layout> result = L::tryLayout(
      [&]() -> L::Layout {
        if (!args[0].isStatic())
          return L::divideDynamic(name.str(), args[0], tiler()).layout;
        if (name == "logical_divide")
          return L::logicalDivide(args[0], tiler());
        if (name == "zipped_divide")
          return L::zippedDivide(args[0], tiler());
        if (name == "tiled_divide")
          return L::tiledDivide(args[0], tiler());
        if (name == "flat_divide")
          return L::flatDivide(args[0], tiler());
        throw L::LayoutError("no inference rule");
      },
      &error);
  if (!result)
    return emitOptionalError(location, "'", opName, "': ", error);
  inferred.push_back(LayoutType::get(context, result->str()));
  return success();
}

OpFoldResult mlir::cute::foldAlgebra(Operation *op) {
  // A static result type says everything; a dynamic one is computed at run time.
  if (!mlir::cast<LayoutType>(op->getResult(0).getType()).getLayout().isStatic())
    return {};
  return UnitAttr::get(op->getContext());
}

//===----------------------------------------------------------------------===//
// load / store
//===----------------------------------------------------------------------===//

template <typename OpT> static LogicalResult verifyMemoryOp(OpT op, VectorType vector) {
  std::string error;
  std::optional<::cute::layout::Layout> layout =
      ::cute::layout::parseLayout(op.getLayout().str(), &error);
  if (!layout)
    return op.emitOpError() << "invalid layout \"" << op.getLayout() << "\": " << error;
  if (!layout->isStatic())
    return op.emitOpError() << "needs a static element layout, got " << layout->str();
  if (vector.getRank() != 1 || vector.getNumElements() != layout->size())
    return op.emitOpError() << "moves " << layout->size() << " elements (the size of "
                            << layout->str() << ") but the vector type is " << vector;
  Type element = vector.getElementType();
  if (!element.isIntOrFloat() || element.getIntOrFloatBitWidth() % 8 != 0)
    return op.emitOpError() << "elements must be whole bytes, got " << element;
  int64_t align = op.getAlign();
  if (align <= 0 || (align & (align - 1)) != 0)
    return op.emitOpError() << "align " << align << " is not a power of two";
  if (op.getDivisibility() <= 0)
    return op.emitOpError() << "divisibility must be positive";
  if (auto swizzle = op.getSwizzle())
    if (swizzle->size() != 3)
      return op.emitOpError() << "swizzle is array<i64: bits, base, shift>";
  return success();
}

LogicalResult LoadOp::verify() {
  return verifyMemoryOp(*this, mlir::cast<VectorType>(getResult().getType()));
}
LogicalResult StoreOp::verify() {
  return verifyMemoryOp(*this, mlir::cast<VectorType>(getValue().getType()));
}
