//===- LowerToArith.cpp - the cute dialect to arith and LLVM -------------===//
//
// Layout ops become constants and multiply-adds: static leaves are constants, run-time leaves
// come from the cute.make_layout that built the layout or a divide's recipe (DynamicLayout.cpp).
// Divides with static results become cute.static_layout; dynamic ones are read through their
// recipes and erased once unused. cute.load / cute.store become LLVM loads and stores of the widest
// vectors (up to 16 bytes) that the element layout, the alignment and the swizzle allow.
//
//===----------------------------------------------------------------------===//

#include "cute/Dialect/CuteDialect.h"
#include "cute/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::cute {
#define GEN_PASS_DEF_CUTELOWERTOARITH
#include "cute/Transforms/Passes.h.inc"
} // namespace mlir::cute

using namespace mlir;
using namespace mlir::cute;
namespace L = ::cute::layout;

namespace {

/// Arithmetic on leaves and coordinates of one integer type (i32, i64 or index) that folds
/// constants as it builds, so static parts leave no code behind.
class IntBuilder {
public:
  IntBuilder(OpBuilder &b, Location loc, Type type) : b(b), loc(loc), type(type) {}

  Value constant(int64_t value) const {
    if (type.isIndex())
      return b.create<arith::ConstantIndexOp>(loc, value);
    return b.create<arith::ConstantIntOp>(loc, value, type);
  }
  /// `value` converted to this builder's type.
  Value cast(Value value) const {
    Type from = value.getType();
    if (from == type)
      return value;
    if (from.isIndex() || type.isIndex())
      return b.create<arith::IndexCastOp>(loc, type, value);
    if (from.getIntOrFloatBitWidth() < type.getIntOrFloatBitWidth())
      return b.create<arith::ExtSIOp>(loc, type, value);
    return b.create<arith::TruncIOp>(loc, type, value);
  }
  Value add(Value x, Value y) const {
    if (isConstant(x, 0))
      return y;
    if (isConstant(y, 0))
      return x;
    return b.create<arith::AddIOp>(loc, x, y);
  }
  Value mul(Value x, Value y) const {
    if (isConstant(x, 0) || isConstant(y, 1))
      return x;
    if (isConstant(y, 0) || isConstant(x, 1))
      return y;
    return b.create<arith::MulIOp>(loc, x, y);
  }
  Value div(Value x, Value y) const {
    return isConstant(y, 1) ? x : b.create<arith::DivSIOp>(loc, x, y).getResult();
  }
  Value rem(Value x, Value y) const { return b.create<arith::RemSIOp>(loc, x, y); }
  Value sub(Value x, Value y) const {
    return isConstant(y, 0) ? x : b.create<arith::SubIOp>(loc, x, y).getResult();
  }
  Value ceilDiv(Value x, int64_t n) const {
    return n == 1 ? x : div(add(x, constant(n - 1)), constant(n));
  }
  Value product(ArrayRef<Value> values) const {
    Value result = constant(1);
    for (Value v : values)
      result = mul(result, v);
    return result;
  }

private:
  static bool isConstant(Value v, int64_t value) {
    llvm::APInt found;
    return matchPattern(v, m_ConstantInt(&found)) && found.getSExtValue() == value;
  }
  OpBuilder &b;
  Location loc;
  Type type;
};

/// Every leaf of a layout value (shape leaves, then stride leaves) as values of the builder's
/// type: constants for static leaves; run-time ones from the cute.make_layout that built the
/// layout, or computed by the recipe of the divide that produced it (DynamicLayout.cpp).
FailureOr<SmallVector<Value>> leafValues(Value layoutValue, const IntBuilder &ints, Location loc) {
  L::Layout layout = mlir::cast<LayoutType>(layoutValue.getType()).getLayout();
  std::vector<L::IntTuple> leaves = layout.getShape().leaves();
  std::vector<L::IntTuple> strides = layout.getStride().leaves();
  leaves.insert(leaves.end(), strides.begin(), strides.end());
  SmallVector<Value> result;
  if (layout.isStatic()) {
    for (const L::IntTuple &leaf : leaves)
      result.push_back(ints.constant(leaf.getValue()));
    return result;
  }
  Operation *def = layoutValue.getDefiningOp();
  if (auto make = mlir::dyn_cast_or_null<MakeLayoutOp>(def)) {
    size_t next = 0;
    for (const L::IntTuple &leaf : leaves)
      result.push_back(leaf.isDynamic() ? ints.cast(make.getLeaves()[next++])
                                        : ints.constant(leaf.getValue()));
    return result;
  }
  if (def && isa<LogicalDivideOp, ZippedDivideOp, TiledDivideOp, FlatDivideOp>(def)) {
    Value source = def->getOperand(0);
    FailureOr<SmallVector<Value>> from = leafValues(source, ints, loc);
    if (failed(from))
      return failure();
    L::Layout tiler = mlir::cast<LayoutType>(def->getOperand(1).getType()).getLayout();
    bool byMode = def->hasAttr("by_mode");
    L::DynamicResult divided = L::divideDynamic(
        def->getName().stripDialect().str(), mlir::cast<LayoutType>(source.getType()).getLayout(),
        byMode ? L::Tiler(tiler.modes()) : L::Tiler(tiler));
    for (const L::LeafRecipe &recipe : divided.leaves) {
      switch (recipe.kind) {
      case L::LeafRecipe::Kind::Static:
        result.push_back(ints.constant(recipe.value));
        break;
      case L::LeafRecipe::Kind::Copy:
        result.push_back((*from)[recipe.source]);
        break;
      case L::LeafRecipe::Kind::CeilDiv:
        result.push_back(ints.ceilDiv((*from)[recipe.source], recipe.value));
        break;
      case L::LeafRecipe::Kind::Mul:
        result.push_back(ints.mul((*from)[recipe.source], ints.constant(recipe.value)));
        break;
      }
    }
    return result;
  }
  mlir::emitError(loc, "a layout with run-time leaves must come from cute.make_layout or a "
                       "divide of one");
  return failure();
}

size_t shapeLeafCount(Value layout) {
  return mlir::cast<LayoutType>(layout.getType()).getLayout().getShape().leaves().size();
}

/// A pattern for an op that reads a layout's leaves: `lower` gets them as values of the op's
/// result type and returns the op's replacement.
template <typename OpT> struct LeafPattern : OpRewritePattern<OpT> {
  using OpRewritePattern<OpT>::OpRewritePattern;
  virtual Value lower(OpT op, const IntBuilder &ints, ArrayRef<Value> leaves) const = 0;
  LogicalResult matchAndRewrite(OpT op, PatternRewriter &rewriter) const override {
    IntBuilder ints(rewriter, op.getLoc(), op.getType());
    FailureOr<SmallVector<Value>> leaves = leafValues(op.getLayout(), ints, op.getLoc());
    if (failed(leaves))
      return failure();
    rewriter.replaceOp(op, lower(op, ints, *leaves));
    return success();
  }
};

struct LowerSize : LeafPattern<SizeOp> {
  using LeafPattern::LeafPattern;
  Value lower(SizeOp op, const IntBuilder &ints, ArrayRef<Value> leaves) const override {
    return ints.product(leaves.take_front(shapeLeafCount(op.getLayout())));
  }
};

struct LowerCosize : LeafPattern<CosizeOp> {
  using LeafPattern::LeafPattern;
  Value lower(CosizeOp op, const IntBuilder &ints, ArrayRef<Value> leaves) const override {
    // 1 + sum((s_i - 1) * d_i), strides non-negative.
    size_t n = shapeLeafCount(op.getLayout());
    Value one = ints.constant(1), total = one;
    for (size_t i = 0; i < n; ++i)
      total = ints.add(total, ints.mul(ints.sub(leaves[i], one), leaves[n + i]));
    return total;
  }
};

struct LowerGetLeaf : LeafPattern<GetLeafOp> {
  using LeafPattern::LeafPattern;
  Value lower(GetLeafOp op, const IntBuilder &, ArrayRef<Value> leaves) const override {
    return leaves[op.getIndex()];
  }
};

/// A (sub)shape and the values of its leaves, for walking coordinates against it.
struct LeafTree {
  L::IntTuple shape;
  ArrayRef<Value> extents, strides;

  /// Mode i of this tree; `offset` counts the leaves of the modes before it.
  LeafTree mode(size_t i, size_t &offset) const {
    size_t count = shape[i].leaves().size();
    LeafTree sub{shape[i], extents.slice(offset, count), strides.slice(offset, count)};
    offset += count;
    return sub;
  }
};

/// CuTe's crd2idx over values: a tuple coordinate goes mode by mode; an integer coordinate
/// against a tuple shape is split colexicographically, the last mode taking the rest; a hole
/// contributes nothing. `next` walks the `?` operands.
Value crd2idx(const L::IntTuple &coord, const LeafTree &tree, ValueRange operands, size_t &next,
              const IntBuilder &ints);

Value linearCrd2idx(Value c, const LeafTree &tree, const IntBuilder &ints) {
  if (tree.shape.isLeaf())
    return ints.mul(c, tree.strides.front());
  Value offset = ints.constant(0);
  size_t at = 0;
  for (size_t i = 0; i < tree.shape.rank(); ++i) {
    LeafTree sub = tree.mode(i, at);
    bool last = i + 1 == tree.shape.rank();
    Value extent = ints.product(sub.extents);
    offset = ints.add(offset, linearCrd2idx(last ? c : ints.rem(c, extent), sub, ints));
    if (!last)
      c = ints.div(c, extent);
  }
  return offset;
}

Value crd2idx(const L::IntTuple &coord, const LeafTree &tree, ValueRange operands, size_t &next,
              const IntBuilder &ints) {
  if (coord.isHole())
    return ints.constant(0);
  if (coord.isLeaf())
    return linearCrd2idx(coord.isDynamic() ? operands[next++] : ints.constant(coord.getValue()),
                         tree, ints);
  Value offset = ints.constant(0);
  size_t at = 0;
  for (size_t i = 0; i < coord.rank(); ++i)
    offset = ints.add(offset, crd2idx(coord[i], tree.mode(i, at), operands, next, ints));
  return offset;
}

struct LowerCrd2Idx : LeafPattern<Crd2IdxOp> {
  using LeafPattern::LeafPattern;
  Value lower(Crd2IdxOp op, const IntBuilder &ints, ArrayRef<Value> leaves) const override {
    L::Layout layout = mlir::cast<LayoutType>(op.getLayout().getType()).getLayout();
    size_t n = shapeLeafCount(op.getLayout());
    LeafTree tree{layout.getShape(), leaves.take_front(n), leaves.drop_front(n)};
    size_t next = 0;
    return crd2idx(*L::parseIntTuple(op.getCoord().str(), nullptr), tree, op.getCoords(), next,
                   ints);
  }
};

/// CuTe's Swizzle<B, M, S> of `offset`: XOR the B bits at M + max(0,S) into those at
/// M + max(0,-S).
Value applySwizzle(OpBuilder &b, Location loc, Value offset, const L::Swizzle &swizzle) {
  if (swizzle.bits == 0)
    return offset;
  Type type = offset.getType();
  auto constant = [&](int64_t v) { return b.create<arith::ConstantIntOp>(loc, v, type); };
  int64_t mask = ((int64_t(1) << swizzle.bits) - 1) << (swizzle.base + std::max(0, swizzle.shift));
  Value moved = b.create<arith::AndIOp>(loc, offset, constant(mask));
  moved = swizzle.shift >= 0
              ? b.create<arith::ShRUIOp>(loc, moved, constant(swizzle.shift)).getResult()
              : b.create<arith::ShLIOp>(loc, moved, constant(-swizzle.shift)).getResult();
  return b.create<arith::XOrIOp>(loc, offset, moved);
}

struct LowerSwizzle : OpRewritePattern<SwizzleOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SwizzleOp op, PatternRewriter &rewriter) const override {
    ArrayRef<int64_t> s = op.getSwizzle();
    rewriter.replaceOp(op, applySwizzle(rewriter, op.getLoc(), op.getOffset(),
                                        L::Swizzle{int(s[0]), int(s[1]), int(s[2])}));
    return success();
  }
};

bool isAlgebra(Operation *op) {
  return isa<LogicalDivideOp, ZippedDivideOp, TiledDivideOp, FlatDivideOp>(op);
}

template <typename OpT> struct EraseDead : OpRewritePattern<OpT> {
  using OpRewritePattern<OpT>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpT op, PatternRewriter &rewriter) const override {
    if (!op->use_empty())
      return failure();
    rewriter.eraseOp(op);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// load / store
//===----------------------------------------------------------------------===//

/// How a memory op's elements are grouped: `width` consecutive elements per instruction.
struct Access {
  L::Layout layout;
  int64_t width;
  std::optional<L::Swizzle> swizzle;
};

/// The widest power-of-two vector (at most 16 bytes) such that every group of `width`
/// elements is contiguous in memory, starts at a multiple of `width` elements (given the
/// pointer's alignment and the offset's divisibility) and is not split by the swizzle.
template <typename OpT> Access planAccess(OpT op, int64_t elementBytes) {
  L::Layout layout = *L::parseLayout(op.getLayout().str(), nullptr);
  std::optional<L::Swizzle> swizzle;
  if (auto s = op.getSwizzle())
    swizzle = L::Swizzle{int((*s)[0]), int((*s)[1]), int((*s)[2])};
  int64_t size = layout.size();
  for (int64_t width = 16 / elementBytes; width > 1; width /= 2) {
    if (size % width || op.getDivisibility() % width || op.getAlign() % (width * elementBytes))
      continue;
    if (swizzle && width * elementBytes > (int64_t(1) << swizzle->base))
      continue; // a group must not straddle the swizzled bytes
    bool contiguous = true;
    for (int64_t group = 0; group < size / width && contiguous; ++group) {
      int64_t start = layout(group * width);
      contiguous = start % width == 0;
      for (int64_t j = 1; j < width && contiguous; ++j)
        contiguous = layout(group * width + j) == start + j;
    }
    if (contiguous)
      return {layout, width, swizzle};
  }
  return {layout, 1, swizzle};
}

/// The address of element group `start`: base + swizzle(offset + start).
Value groupAddress(OpBuilder &b, Location loc, Value base, Value offset, int64_t start,
                   const std::optional<L::Swizzle> &swizzle, Type element) {
  Type offsetType = offset.getType();
  auto constant = [&](int64_t v) { return b.create<arith::ConstantIntOp>(loc, v, offsetType); };
  Value index = start ? b.create<arith::AddIOp>(loc, offset, constant(start)).getResult() : offset;
  if (swizzle) {
    // The swizzle acts on the byte address (CuTe DSL's convention): index -> bytes -> back.
    Value shift = constant(llvm::Log2_64(element.getIntOrFloatBitWidth() / 8));
    Value bytes = b.create<arith::ShLIOp>(loc, index, shift);
    index = b.create<arith::ShRUIOp>(loc, applySwizzle(b, loc, bytes, *swizzle), shift);
  }
  return b.create<LLVM::GEPOp>(loc, base.getType(), element, base, ValueRange{index});
}

/// The type a group moves as: sub-word elements go as 32-bit words (NVPTX splits a vector of
/// eight 16-bit values into two 8-byte accesses, but keeps four words one 16-byte access).
Type wordVector(Type element, int64_t width) {
  int64_t bytes = width * element.getIntOrFloatBitWidth() / 8;
  if (element.getIntOrFloatBitWidth() >= 32 || bytes < 4 || bytes % 4)
    return VectorType::get({width}, element);
  return VectorType::get({bytes / 4}, IntegerType::get(element.getContext(), 32));
}

/// PTX state space of a pointer that vector words go through inline PTX for, if any: LLVM
/// folds our word vectors back into 16-bit vectors, which NVPTX then splits into 8-byte
/// accesses, so sub-word groups in global and shared memory are moved by asm it cannot split.
std::optional<StringRef> wordSpace(Value base, Type element, int64_t width) {
  auto words = mlir::cast<VectorType>(wordVector(element, width));
  if (!words.getElementType().isInteger(32) || element.isInteger(32) || words.getNumElements() < 2)
    return std::nullopt;
  switch (mlir::cast<LLVM::LLVMPointerType>(base.getType()).getAddressSpace()) {
  case 1:
    return StringRef("global");
  case 3:
    return StringRef("shared");
  default:
    return std::nullopt;
  }
}

std::string wordList(int64_t count, int64_t first) {
  std::string text = "{";
  for (int64_t i = 0; i < count; ++i)
    text += (i ? ", $" : "$") + std::to_string(first + i);
  return text + "}";
}

Value asmLoadWords(OpBuilder &b, Location loc, Value address, StringRef space, VectorType words) {
  int64_t n = words.getNumElements();
  Type i32 = b.getI32Type();
  SmallVector<Type> fields(n, i32);
  auto structType = LLVM::LLVMStructType::getLiteral(b.getContext(), fields);
  std::string text = ("ld." + space + ".v" + std::to_string(n) + ".b32 ").str() + wordList(n, 0) +
                     ", [$" + std::to_string(n) + "];";
  std::string constraints;
  for (int64_t i = 0; i < n; ++i)
    constraints += "=r,";
  constraints += "l";
  auto asmOp = b.create<LLVM::InlineAsmOp>(loc, structType, ValueRange{address}, text, constraints,
                                           /*has_side_effects=*/true, /*is_align_stack=*/false,
                                           LLVM::AsmDialectAttr(), ArrayAttr());
  Value vector = b.create<LLVM::UndefOp>(loc, words);
  for (int64_t i = 0; i < n; ++i) {
    Value word = b.create<LLVM::ExtractValueOp>(loc, asmOp.getResult(0), ArrayRef<int64_t>{i});
    Value at = b.create<LLVM::ConstantOp>(loc, i32, b.getI32IntegerAttr(i));
    vector = b.create<LLVM::InsertElementOp>(loc, vector, word, at);
  }
  return vector;
}

void asmStoreWords(OpBuilder &b, Location loc, Value address, StringRef space, Value words) {
  int64_t n = mlir::cast<VectorType>(words.getType()).getNumElements();
  SmallVector<Value> operands{address};
  for (int64_t i = 0; i < n; ++i) {
    Value at = b.create<LLVM::ConstantOp>(loc, b.getI32Type(), b.getI32IntegerAttr(i));
    operands.push_back(b.create<LLVM::ExtractElementOp>(loc, words, at));
  }
  std::string text =
      ("st." + space + ".v" + std::to_string(n) + ".b32 [$0], ").str() + wordList(n, 1) + ";";
  std::string constraints = "l";
  for (int64_t i = 0; i < n; ++i)
    constraints += ",r";
  b.create<LLVM::InlineAsmOp>(loc, TypeRange{}, operands, text, constraints,
                              /*has_side_effects=*/true, /*is_align_stack=*/false,
                              LLVM::AsmDialectAttr(), ArrayAttr());
}

Value position(OpBuilder &b, Location loc, int64_t i) {
  return b.create<LLVM::ConstantOp>(loc, b.getI32Type(), b.getI32IntegerAttr(i));
}

struct LowerLoad : OpRewritePattern<LoadOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LoadOp op, PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto vectorType = mlir::cast<VectorType>(op.getResult().getType());
    Type element = vectorType.getElementType();
    int64_t bytes = element.getIntOrFloatBitWidth() / 8;
    Access access = planAccess(op, bytes);
    Value result = rewriter.create<LLVM::UndefOp>(loc, vectorType);
    int64_t size = access.layout.size();
    for (int64_t group = 0; group < size; group += access.width) {
      Value address = groupAddress(rewriter, loc, op.getBase(), op.getOffset(),
                                   access.layout(group), access.swizzle, element);
      if (access.width == 1) {
        Value scalar = rewriter.create<LLVM::LoadOp>(loc, element, address, bytes);
        result = rewriter.create<LLVM::InsertElementOp>(loc, result, scalar,
                                                        position(rewriter, loc, group));
        continue;
      }
      auto chunkType = VectorType::get({access.width}, element);
      Type moved = wordVector(element, access.width);
      std::optional<StringRef> space = wordSpace(op.getBase(), element, access.width);
      Value chunk =
          space ? asmLoadWords(rewriter, loc, address, *space, mlir::cast<VectorType>(moved))
                : rewriter.create<LLVM::LoadOp>(loc, moved, address, access.width * bytes)
                      .getResult();
      if (moved != chunkType)
        chunk = rewriter.create<LLVM::BitcastOp>(loc, chunkType, chunk);
      for (int64_t j = 0; j < access.width; ++j) {
        Value scalar =
            rewriter.create<LLVM::ExtractElementOp>(loc, chunk, position(rewriter, loc, j));
        result = rewriter.create<LLVM::InsertElementOp>(loc, result, scalar,
                                                        position(rewriter, loc, group + j));
      }
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct LowerStore : OpRewritePattern<StoreOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(StoreOp op, PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto vectorType = mlir::cast<VectorType>(op.getValue().getType());
    Type element = vectorType.getElementType();
    int64_t bytes = element.getIntOrFloatBitWidth() / 8;
    Access access = planAccess(op, bytes);
    int64_t size = access.layout.size();
    for (int64_t group = 0; group < size; group += access.width) {
      Value address = groupAddress(rewriter, loc, op.getBase(), op.getOffset(),
                                   access.layout(group), access.swizzle, element);
      Value data;
      if (access.width == 1) {
        data = rewriter.create<LLVM::ExtractElementOp>(loc, op.getValue(),
                                                       position(rewriter, loc, group));
      } else {
        auto chunkType = VectorType::get({access.width}, element);
        data = rewriter.create<LLVM::UndefOp>(loc, chunkType);
        for (int64_t j = 0; j < access.width; ++j) {
          Value scalar = rewriter.create<LLVM::ExtractElementOp>(
              loc, op.getValue(), position(rewriter, loc, group + j));
          data =
              rewriter.create<LLVM::InsertElementOp>(loc, data, scalar, position(rewriter, loc, j));
        }
        Type moved = wordVector(element, access.width);
        if (moved != chunkType)
          data = rewriter.create<LLVM::BitcastOp>(loc, moved, data);
        if (std::optional<StringRef> space = wordSpace(op.getBase(), element, access.width)) {
          asmStoreWords(rewriter, loc, address, *space, data);
          continue;
        }
      }
      rewriter.create<LLVM::StoreOp>(loc, data, address, access.width * bytes);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

struct LowerToArithPass : mlir::cute::impl::CuteLowerToArithBase<LowerToArithPass> {
  void runOnOperation() override {
    // Algebra results that are static become the static layout their type names; dynamic
    // ones are read through leafValues and erased once nothing uses them.
    getOperation()->walk([](Operation *op) {
      if (!isAlgebra(op) ||
          !mlir::cast<LayoutType>(op->getResult(0).getType()).getLayout().isStatic())
        return;
      OpBuilder builder(op);
      auto type = mlir::cast<LayoutType>(op->getResult(0).getType());
      op->getResult(0).replaceAllUsesWith(builder.create<StaticLayoutOp>(op->getLoc(), type));
      op->erase();
    });
    RewritePatternSet patterns(&getContext());
    patterns.add<LowerSize, LowerCosize, LowerGetLeaf, LowerCrd2Idx, LowerSwizzle, LowerLoad,
                 LowerStore, EraseDead<StaticLayoutOp>, EraseDead<MakeLayoutOp>,
                 EraseDead<LogicalDivideOp>, EraseDead<ZippedDivideOp>, EraseDead<TiledDivideOp>,
                 EraseDead<FlatDivideOp>>(&getContext());
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // Anything of the dialect left over cannot reach LLVM: say which op, where.
    WalkResult leftover = getOperation()->walk([](Operation *op) {
      if (isa<CuteDialect>(op->getDialect())) {
        op->emitError() << "'" << op->getName() << "' has no lowering (is its layout used "
                        << "by an op that needs its value at run time?)";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (leftover.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace

std::unique_ptr<Pass> mlir::cute::createLowerToArithPass() {
  return std::make_unique<LowerToArithPass>();
}
