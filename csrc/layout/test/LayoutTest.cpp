// Unit tests of the dependency-free layout library.
#include "cute/Layout/Layout.h"

#include <gtest/gtest.h>

using namespace cute::layout;

TEST(IntTuple, ParsesAndPrintsNestedTuples) {
  std::string error;
  auto tuple = parseIntTuple("( 4, (2 ,8))", &error);
  ASSERT_TRUE(tuple) << error;
  EXPECT_EQ(tuple->str(), "(4,(2,8))");
  EXPECT_EQ(tuple->rank(), 2u);
  EXPECT_EQ(tuple->depth(), 2u);
  EXPECT_EQ(tuple->product(), 64);
  EXPECT_EQ(tuple->flatten(), (std::vector<int64_t>{4, 2, 8}));
}

TEST(IntTuple, ReportsWhereParsingFails) {
  std::string error;
  EXPECT_FALSE(parseIntTuple("(4,8", &error));
  EXPECT_NE(error.find("expected ',' or ')'"), std::string::npos) << error;
  EXPECT_NE(error.find("position 4"), std::string::npos) << error;
  EXPECT_FALSE(parseIntTuple("(4,x)", &error));
  EXPECT_NE(error.find("position 3"), std::string::npos) << error;
}

TEST(Layout, CompactStrideIsColumnMajor) {
  auto layout = parseLayout("(4,(2,8))", nullptr);
  ASSERT_TRUE(layout);
  EXPECT_EQ(layout->str(), "(4,(2,8)):(1,(4,8))");
}

TEST(Layout, RejectsIncongruentAndNonPositive) {
  std::string error;
  EXPECT_FALSE(parseLayout("(4,8):(1,(2,3))", &error));
  EXPECT_NE(error.find("not congruent"), std::string::npos) << error;
  EXPECT_FALSE(parseLayout("(4,0):(1,4)", &error));
  EXPECT_NE(error.find("not positive"), std::string::npos) << error;
}

TEST(Layout, MapsCoordinatesLikeCuTe) {
  // Row-major 4x8: (i, j) -> 8 i + j.
  auto rowMajor = *parseLayout("(4,8):(8,1)", nullptr);
  EXPECT_EQ(rowMajor.size(), 32);
  EXPECT_EQ(rowMajor.cosize(), 32);
  EXPECT_EQ(rowMajor.crd2idx({3, 5}), 29);
  // Linear coordinates are colexicographic: 5 -> (1, 1).
  EXPECT_EQ(rowMajor(5), 9);
  for (int64_t i = 0; i < rowMajor.size(); ++i)
    EXPECT_EQ(rowMajor(i), (i % 4) * 8 + i / 4);
  // A broadcast mode (stride 0) shrinks the codomain.
  auto broadcast = *parseLayout("(4,8):(1,0)", nullptr);
  EXPECT_EQ(broadcast.cosize(), 4);
}

//===----------------------------------------------------------------------===//
// Worked examples from CuTe's documentation (layout algebra, divides, products)
//===----------------------------------------------------------------------===//

namespace {
Layout L(const std::string &text) {
  std::string error;
  auto layout = parseLayout(text, &error);
  if (!layout)
    throw LayoutError(error);
  return *layout;
}
IntTuple T(const std::string &text) { return *parseIntTuple(text, nullptr); }
} // namespace

TEST(Algebra, DocumentedCoalesce) {
  EXPECT_EQ(coalesce(L("(2,(1,6)):(1,(6,2))")).str(), "12:1");
  EXPECT_EQ(coalesce(L("(4,8):(8,1)")).str(), "(4,8):(8,1)");
  EXPECT_EQ(coalesce(L("(1,1):(3,5)")).str(), "1:0");
  // By-mode coalesce keeps the rank.
  EXPECT_EQ(coalesce(L("((2,4),(3,5)):((1,2),(8,24))"), T("(1,1)")).str(), "(8,15):(1,8)");
}

TEST(Algebra, DocumentedComposition) {
  EXPECT_EQ(composition(L("20:2"), L("(5,4):(4,1)")).str(), "(5,4):(8,2)");
  EXPECT_EQ(composition(L("(10,2):(16,4)"), L("(5,4):(1,5)")).str(), "(5,(2,2)):(16,(80,4))");
  EXPECT_EQ(composition(L("(4,6,8,10):(2,3,5,7)"), L("6:12")).str(), "(2,3):(9,5)");
  EXPECT_EQ(composition(L("(6,2):(8,2)"), L("(4,3):(3,1)")).str(), "((2,2),3):((24,2),8)");
  // By-mode: (12,(4,8)):(59,(13,1)) with the tiler <3:4, 8:2>.
  Tiler tiler(std::vector<Layout>{L("3:4"), L("8:2")});
  EXPECT_EQ(composition(L("(12,(4,8)):(59,(13,1))"), tiler).str(), "(3,(2,4)):(236,(26,1))");
}

TEST(Algebra, DocumentedComplement) {
  EXPECT_EQ(complement(L("4:1"), 24).str(), "6:4");
  EXPECT_EQ(complement(L("6:4"), 24).str(), "4:1");
  EXPECT_EQ(complement(L("(4,6):(1,4)"), 24).str(), "1:0");
  EXPECT_EQ(complement(L("4:2"), 24).str(), "(2,3):(1,8)");
  EXPECT_EQ(complement(L("(2,4):(1,6)"), 24).str(), "3:2");
  EXPECT_EQ(complement(L("(2,2):(1,6)"), 24).str(), "(3,2):(2,12)");
  EXPECT_THROW(complement(L("(2,2):(1,3)"), 24), LayoutError); // Interleaved modes.
}

TEST(Algebra, RightInverseFollowsCuTesCpp) {
  // Coalesced first: ((2,2)) merges into 4:1, so this inverse is 4:2 (pycute's is (2,2):(2,1)).
  EXPECT_EQ(rightInverse(L("(2,(2,2)):(2,(1,2))")).str(), "4:2");
  // A repeated stride is skipped, not the end: stride 2 after the second stride-1 mode continues.
  EXPECT_EQ(rightInverse(L("(2,3,2):(1,1,2)")).str(), "(2,2):(1,6)");
}

TEST(Algebra, DocumentedDivides) {
  EXPECT_EQ(logicalDivide(L("(4,2,3):(2,1,8)"), L("4:2")).str(), "((2,2),(2,3)):((4,1),(2,8))");
  Tiler tiler(std::vector<Layout>{L("3:3"), L("(2,4):(1,8)")});
  Layout a = L("(9,(4,8)):(59,(13,1))");
  EXPECT_EQ(logicalDivide(a, tiler).str(), "((3,3),((2,4),(2,2))):((177,59),((13,2),(26,1)))");
  EXPECT_EQ(zippedDivide(a, tiler).str(), "((3,(2,4)),(3,(2,2))):((177,(13,2)),(59,(26,1)))");
  EXPECT_EQ(tiledDivide(a, tiler).str(), "((3,(2,4)),3,(2,2)):((177,(13,2)),59,(26,1))");
  EXPECT_EQ(flatDivide(a, tiler).str(), "(3,(2,4),3,(2,2)):(177,(13,2),59,(26,1))");
}

TEST(Algebra, DocumentedProducts) {
  EXPECT_EQ(logicalProduct(L("(2,2):(4,1)"), L("6:1")).str(), "((2,2),(2,3)):((4,1),(2,8))");
  // blocked_product coalesces each mode (tuple_repeat<R>(1) profile): (2,3):(5,10) is 6:5.
  EXPECT_EQ(blockedProduct(L("(2,5):(5,1)"), L("(3,4):(1,3)")),
            coalesce(L("((2,3),(5,4)):((5,10),(1,30))"), T("(1,1)")));
  EXPECT_EQ(rakedProduct(L("(2,5):(5,1)"), L("(3,4):(1,3)")).str(),
            "((3,2),(4,5)):((10,5),(30,1))");
  Tiler tiler(std::vector<Layout>{L("3:1"), L("4:1")});
  Layout zipped = zippedProduct(L("(2,5):(5,1)"), tiler);
  EXPECT_EQ(zipped[0], L("(2,5):(5,1)"));
  EXPECT_EQ(zipped[1].size(), 12);
}

TEST(Algebra, OrderedIdentityTileToShapeRecast) {
  EXPECT_EQ(makeOrderedLayout(T("(2,3,4)"), T("(1,0,2)")).str(), "(2,3,4):(3,1,6)");
  EXPECT_EQ(tileToShape(L("(8,8):(8,1)"), T("(32,16)")).str(), "(32,(8,2)):(8,(1,256))");
  EXPECT_EQ(recast(L("(4,8):(8,1)"), 16, 32).str(), "(4,4):(4,1)");
  EXPECT_EQ(recast(L("(4,4):(4,1)"), 32, 16).str(), "(4,8):(8,1)");
  EXPECT_EQ(recast(L("(4,8):(1,4)"), 8, 128).str(), "(1,8):(1,1)");
}

TEST(Algebra, MaxCommonVectorAndSwizzle) {
  EXPECT_EQ(maxCommonVector(L("(4,8):(1,4)"), L("(4,8):(1,4)")), 32);
  EXPECT_EQ(maxCommonVector(L("(4,8):(1,4)"), L("(4,8):(8,1)")), 1);
  EXPECT_EQ(maxCommonVector(L("(8,4):(1,16)"), L("32:1")), 8);
  Swizzle sw{3, 4, 3};
  EXPECT_EQ(sw(0), 0);
  EXPECT_EQ(sw(1 << 7), (1 << 7) | (1 << 4)); // Bit 7 flips bit 4.
  EXPECT_EQ(ComposedLayout({sw, 0, L("(8,64):(64,1)")}).str(), "Sw<3,4,3> o 0 o (8,64):(64,1)");
  EXPECT_EQ(L("(?,8):(8,1)").str(), "(?,8):(8,1)");
  EXPECT_THROW(coalesce(L("(?,8):(8,1)")), LayoutError);
}

TEST(DynamicLayout, DividesRunTimeExtentsByStaticTiles) {
  // (m, n):(1, ld) into 16 x 128 tiles: tiles (16,128):(1,ld), rests (ceil(m/16), ceil(n/128))
  // of strides (16, ld*128). Operand leaves: m=0, n=1, 1=2, ld=3.
  DynamicResult z = divideDynamic("zipped_divide", L("(?,?):(1,?)"),
                                  Tiler(std::vector<Layout>{L("16:1"), L("128:1")}));
  EXPECT_EQ(z.layout.str(), "((16,128),(?,?)):((1,?),(16,?))");
  using K = LeafRecipe::Kind;
  ASSERT_EQ(z.leaves.size(), 8u);
  EXPECT_EQ(z.leaves[2].kind, K::CeilDiv);
  EXPECT_EQ(z.leaves[2].source, 0u);
  EXPECT_EQ(z.leaves[2].value, 16);
  EXPECT_EQ(z.leaves[3].kind, K::CeilDiv);
  EXPECT_EQ(z.leaves[3].source, 1u);
  EXPECT_EQ(z.leaves[5].kind, K::Copy); // the tile's stride ld
  EXPECT_EQ(z.leaves[5].source, 3u);
  EXPECT_EQ(z.leaves[7].kind, K::Mul); // the rest's stride ld * 128
  EXPECT_EQ(z.leaves[7].value, 128);
  // Static modes divide as usual; modes past the tiler are kept.
  EXPECT_EQ(
      divideDynamic("logical_divide", L("(64,?):(1,64)"), Tiler(std::vector<Layout>{L("16:1")}))
          .layout.str(),
      "((16,4),?):((1,16),64)");
  EXPECT_THROW(divideDynamic("composition", L("?:1"), Tiler(L("4:1"))), LayoutError);
  EXPECT_THROW(
      divideDynamic("zipped_divide", L("(?,4):(1,?)"), Tiler(std::vector<Layout>{L("4:2")})),
      LayoutError); // a dynamic mode needs a contiguous tile
}
