//===- LowerToArith.cpp - layout algebra to index arithmetic -------------===//
//
// Static layouts become constants and multiply-adds: size/cosize are constants, crd2idx is
// sum(c_i * d_i) after splitting a linear coordinate colexicographically.
//
//===----------------------------------------------------------------------===//

#include "cute/Dialect/CuteDialect.h"
#include "cute/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::cute {
#define GEN_PASS_DEF_CUTELOWERTOARITH
#include "cute/Transforms/Passes.h.inc"
} // namespace mlir::cute

using namespace mlir;
using namespace mlir::cute;

namespace {

Value indexConstant(PatternRewriter &rewriter, Location loc, int64_t value) {
  return rewriter.create<arith::ConstantIndexOp>(loc, value);
}

template <typename OpT, int64_t (::cute::layout::Layout::*Measure)() const>
struct LowerMeasure : OpRewritePattern<OpT> {
  using OpRewritePattern<OpT>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpT op, PatternRewriter &rewriter) const override {
    auto layout = op.getLayout().getType().template cast<LayoutType>().getLayout();
    rewriter.replaceOp(op, indexConstant(rewriter, op.getLoc(), (layout.*Measure)()));
    return success();
  }
};

struct LowerCrd2Idx : OpRewritePattern<Crd2IdxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(Crd2IdxOp op, PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ::cute::layout::Layout layout = op.getLayout().getType().cast<LayoutType>().getLayout();
    std::vector<int64_t> extents = layout.getShape().flatten();
    std::vector<int64_t> strides = layout.getStride().flatten();

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
        Value extent = indexConstant(rewriter, loc, extents[i]);
        coords.push_back(rewriter.create<arith::RemSIOp>(loc, rest, extent));
        rest = rewriter.create<arith::DivSIOp>(loc, rest, extent);
      }
    }
    Value offset = indexConstant(rewriter, loc, 0);
    for (size_t i = 0; i < coords.size(); ++i) {
      if (strides[i] == 0)
        continue;
      Value term = coords[i];
      if (strides[i] != 1)
        term = rewriter.create<arith::MulIOp>(loc, term, indexConstant(rewriter, loc, strides[i]));
      offset = rewriter.create<arith::AddIOp>(loc, offset, term);
    }
    rewriter.replaceOp(op, offset);
    return success();
  }
};

struct EraseDeadStaticLayout : OpRewritePattern<StaticLayoutOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(StaticLayoutOp op, PatternRewriter &rewriter) const override {
    if (!op->use_empty())
      return failure();
    rewriter.eraseOp(op);
    return success();
  }
};

struct LowerToArithPass : mlir::cute::impl::CuteLowerToArithBase<LowerToArithPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<LowerMeasure<SizeOp, &::cute::layout::Layout::size>,
                 LowerMeasure<CosizeOp, &::cute::layout::Layout::cosize>, LowerCrd2Idx,
                 EraseDeadStaticLayout>(&getContext());
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // Anything of the dialect left over cannot reach LLVM: say which op, where.
    WalkResult leftover = getOperation()->walk([](Operation *op) {
      if (isa<CuteDialect>(op->getDialect())) {
        op->emitError() << "'" << op->getName() << "' has no lowering to arith";
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
