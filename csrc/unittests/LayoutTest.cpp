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
