//===- LowerToArith.cpp - the cute dialect to arith and LLVM -------------===//
//
// Layout ops become constants and multiply-adds: static leaves are constants, run-time leaves
// come from the cute.make_layout that built the layout. Algebra ops have static results and
// become cute.static_layout. cute.load / cute.store become LLVM loads and stores of the widest
// vectors (up to 16 bytes) that the element layout, the alignment and the swizzle allow.
//
//===----------------------------------------------------------------------===//

#include "cute/Dialect/CuteDialect.h"
#include "cute/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
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

Value indexConstant(OpBuilder &builder, Location loc, int64_t value) {
  return builder.create<arith::ConstantIndexOp>(loc, value);
}

/// The leaves of a layout value as index values: constants for static leaves, the operands of
/// its cute.make_layout for run-time ones.
FailureOr<std::pair<SmallVector<Value>, SmallVector<Value>>>
leafValues(Value layoutValue, OpBuilder &builder, Location loc) {
  L::Layout layout = mlir::cast<LayoutType>(layoutValue.getType()).getLayout();
  SmallVector<Value> dynamic;
  if (!layout.isStatic()) {
    auto make = layoutValue.getDefiningOp<MakeLayoutOp>();
    if (!make) {
      mlir::emitError(loc, "a layout with run-time leaves must come from cute.make_layout");
      return failure();
    }
    dynamic.append(make.getLeaves().begin(), make.getLeaves().end());
  }
  size_t next = 0;
  auto values = [&](const L::IntTuple &tuple) {
    SmallVector<Value> result;
    for (const L::IntTuple &leaf : tuple.leaves())
      result.push_back(leaf.isDynamic() ? dynamic[next++]
                                        : indexConstant(builder, loc, leaf.getValue()));
    return result;
  };
  SmallVector<Value> shape = values(layout.getShape());
  SmallVector<Value> stride = values(layout.getStride());
  return std::make_pair(shape, stride);
}

Value mul(OpBuilder &b, Location loc, Value x, Value y) {
  return b.create<arith::MulIOp>(loc, x, y);
}
Value add(OpBuilder &b, Location loc, Value x, Value y) {
  return b.create<arith::AddIOp>(loc, x, y);
}

struct LowerSize : OpRewritePattern<SizeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SizeOp op, PatternRewriter &rewriter) const override {
    auto leaves = leafValues(op.getLayout(), rewriter, op.getLoc());
    if (failed(leaves))
      return failure();
    Value product = indexConstant(rewriter, op.getLoc(), 1);
    for (Value extent : leaves->first)
      product = mul(rewriter, op.getLoc(), product, extent);
    rewriter.replaceOp(op, product);
    return success();
  }
};

struct LowerCosize : OpRewritePattern<CosizeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CosizeOp op, PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto leaves = leafValues(op.getLayout(), rewriter, loc);
    if (failed(leaves))
      return failure();
    // 1 + sum((s_i - 1) * d_i), strides non-negative.
    Value one = indexConstant(rewriter, loc, 1), total = one;
    for (auto [extent, stride] : llvm::zip(leaves->first, leaves->second))
      total = add(rewriter, loc, total,
                  mul(rewriter, loc, rewriter.create<arith::SubIOp>(loc, extent, one), stride));
    rewriter.replaceOp(op, total);
    return success();
  }
};

struct LowerCrd2Idx : OpRewritePattern<Crd2IdxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(Crd2IdxOp op, PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto leaves = leafValues(op.getLayout(), rewriter, loc);
    if (failed(leaves))
      return failure();
    auto &[extents, strides] = *leaves;
    SmallVector<Value> coords(op.getCoords().begin(), op.getCoords().end());
    if (coords.size() == 1 && extents.size() > 1) {
      // Split the linear coordinate, first mode fastest; the last mode takes the rest.
      Value rest = coords.front();
      coords.clear();
      for (size_t i = 0; i < extents.size(); ++i) {
        if (i + 1 == extents.size()) {
          coords.push_back(rest);
          break;
        }
        coords.push_back(rewriter.create<arith::RemSIOp>(loc, rest, extents[i]));
        rest = rewriter.create<arith::DivSIOp>(loc, rest, extents[i]);
      }
    }
    Value offset = indexConstant(rewriter, loc, 0);
    for (size_t i = 0; i < coords.size(); ++i)
      offset = add(rewriter, loc, offset, mul(rewriter, loc, coords[i], strides[i]));
    rewriter.replaceOp(op, offset);
    return success();
  }
};

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
    if (swizzle && width > (int64_t(1) << swizzle->base))
      continue;
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
  if (swizzle && swizzle->bits > 0) {
    int64_t mask = ((int64_t(1) << swizzle->bits) - 1)
                   << (swizzle->base + std::max(0, swizzle->shift));
    Value moved = b.create<arith::AndIOp>(loc, index, constant(mask));
    moved = swizzle->shift >= 0
                ? b.create<arith::ShRUIOp>(loc, moved, constant(swizzle->shift)).getResult()
                : b.create<arith::ShLIOp>(loc, moved, constant(-swizzle->shift)).getResult();
    index = b.create<arith::XOrIOp>(loc, index, moved);
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
    // Algebra results are static: each becomes the static layout its type names.
    getOperation()->walk([](Operation *op) {
      if (!isa<CoalesceOp, FilterOp, RightInverseOp, LeftInverseOp, ComplementOp, CompositionOp,
               LogicalDivideOp, ZippedDivideOp, TiledDivideOp, FlatDivideOp, LogicalProductOp,
               ZippedProductOp, BlockedProductOp, RakedProductOp>(op))
        return;
      OpBuilder builder(op);
      auto type = mlir::cast<LayoutType>(op->getResult(0).getType());
      op->getResult(0).replaceAllUsesWith(builder.create<StaticLayoutOp>(op->getLoc(), type));
      op->erase();
    });
    RewritePatternSet patterns(&getContext());
    patterns.add<LowerSize, LowerCosize, LowerCrd2Idx, LowerLoad, LowerStore,
                 EraseDead<StaticLayoutOp>, EraseDead<MakeLayoutOp>>(&getContext());
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
