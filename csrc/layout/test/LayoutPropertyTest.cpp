// Property tests of the layout algebra over thousands of random layouts: each identity CuTe's
// documentation states, checked point by point over the whole domain.
#include "cute/Layout/Layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

using namespace cute::layout;

namespace {

constexpr int kTrials = 3000;

class RandomLayouts {
public:
  explicit RandomLayouts(unsigned seed) : rng(seed) {}

  int64_t pick(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  }

  /// Random flat extents, 1 to 4 modes of 1 to 8.
  std::vector<int64_t> extents() {
    std::vector<int64_t> result(pick(1, 4));
    for (auto &extent : result)
      extent = pick(1, 8);
    return result;
  }

  /// An injective layout: the modes of a compact layout in a random order, with random gaps
  /// (each stride a multiple of the span below it), grouped into a random hierarchy.
  Layout injective() {
    std::vector<int64_t> ext = extents();
    std::vector<size_t> order(ext.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<int64_t> strides(ext.size());
    int64_t current = 1;
    for (size_t i : order) {
      current *= pick(1, 2); // A gap, or none.
      strides[i] = current;
      current *= ext[i];
    }
    return group(ext, strides);
  }

  /// Any layout: strides anywhere in [0, 12].
  Layout arbitrary() {
    std::vector<int64_t> ext = extents();
    std::vector<int64_t> strides(ext.size());
    for (auto &stride : strides)
      stride = pick(0, 12);
    return group(ext, strides);
  }

  /// Groups flat modes into a random hierarchy: the first two modes may become one.
  Layout group(const std::vector<int64_t> &ext, const std::vector<int64_t> &strides) {
    std::vector<IntTuple> shape, stride;
    size_t i = 0;
    if (ext.size() >= 3 && pick(0, 1)) {
      shape.push_back(makeTuple({ext[0], ext[1]}));
      stride.push_back(makeTuple({strides[0], strides[1]}));
      i = 2;
    }
    for (; i < ext.size(); ++i) {
      shape.emplace_back(ext[i]);
      stride.emplace_back(strides[i]);
    }
    if (shape.size() == 1)
      return Layout(shape[0], stride[0]);
    return Layout(makeTuple(shape), makeTuple(stride));
  }

  std::mt19937 rng;
};

std::vector<int64_t> image(const Layout &layout) {
  std::vector<int64_t> offsets;
  for (int64_t i = 0; i < layout.size(); ++i)
    offsets.push_back(layout(i));
  return offsets;
}

bool injective(const Layout &layout) {
  std::vector<int64_t> offsets = image(layout);
  return std::set<int64_t>(offsets.begin(), offsets.end()).size() == offsets.size();
}

} // namespace

TEST(LayoutProperties, CoalesceAndFilterKeepTheMapping) {
  RandomLayouts gen(1);
  for (int trial = 0; trial < kTrials; ++trial) {
    Layout layout = gen.arbitrary();
    Layout merged = coalesce(layout);
    ASSERT_EQ(merged.size(), layout.size()) << layout.str();
    for (int64_t i = 0; i < layout.size(); ++i)
      ASSERT_EQ(merged(i), layout(i)) << layout.str() << " vs " << merged.str() << " at " << i;
    // coalesce is idempotent and never deeper than one level.
    ASSERT_EQ(coalesce(merged), merged);
    ASSERT_LE(merged.depth(), 1u);
    // filter keeps the set of offsets and drops every broadcast mode.
    std::vector<int64_t> all = image(layout), kept = image(filter(layout));
    ASSERT_EQ(std::set<int64_t>(all.begin(), all.end()),
              std::set<int64_t>(kept.begin(), kept.end()))
        << layout.str();
  }
}

TEST(LayoutProperties, CompositionIsFunctionComposition) {
  RandomLayouts gen(2);
  int composed = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    Layout a = gen.pick(0, 1) ? gen.injective() : gen.arbitrary();
    Layout b = gen.injective();
    if (b.cosize() > a.size())
      continue; // Stay in A's domain, where the identity holds exactly.
    Layout c = [&] {
      try {
        return composition(a, b);
      } catch (const LayoutError &) {
        return Layout(0, 0); // Incompatible shapes are outside the domain; skip.
      }
    }();
    if (c.size() == 0)
      continue;
    ++composed;
    ASSERT_EQ(c.size(), b.size()) << a.str() << " o " << b.str() << " = " << c.str();
    ASSERT_TRUE(c.getShape().weaklyCongruentTo(c.getShape()));
    for (int64_t i = 0; i < b.size(); ++i)
      ASSERT_EQ(c(i), a(b(i))) << a.str() << " o " << b.str() << " = " << c.str() << " at " << i;
  }
  EXPECT_GT(composed, kTrials / 10) << "too few random pairs were composable to mean much";
}

TEST(LayoutProperties, ComplementIsDisjointOrderedAndCovering) {
  RandomLayouts gen(3);
  for (int trial = 0; trial < kTrials; ++trial) {
    Layout layout = gen.injective();
    if (layout.cosize() > 2048)
      continue; // Keep the point-by-point checks quick.
    int64_t cotarget = layout.cosize() * gen.pick(1, 3);
    Layout rest = complement(layout, cotarget);
    // Disjoint: only offset 0 is shared.
    std::vector<int64_t> mine = image(layout), theirs = image(rest);
    std::set<int64_t> mineSet(mine.begin(), mine.end());
    for (int64_t j = 1; j < rest.size(); ++j)
      ASSERT_EQ(mineSet.count(theirs[j]), 0u) << layout.str() << " / " << rest.str();
    // Ordered: strictly increasing.
    for (int64_t j = 1; j < rest.size(); ++j)
      ASSERT_LT(theirs[j - 1], theirs[j]) << rest.str();
    // Covering: (layout, complement) is injective and reaches every offset below the cotarget.
    Layout both = Layout::concat({layout, rest});
    ASSERT_TRUE(injective(both)) << both.str();
    std::vector<int64_t> covered = image(both);
    std::set<int64_t> coveredSet(covered.begin(), covered.end());
    for (int64_t offset = 0; offset < cotarget; ++offset)
      ASSERT_EQ(coveredSet.count(offset), 1u) << both.str() << " misses " << offset;
  }
}

TEST(LayoutProperties, Inverses) {
  RandomLayouts gen(4);
  for (int trial = 0; trial < kTrials; ++trial) {
    Layout layout = gen.injective();
    Layout right = rightInverse(layout);
    for (int64_t i = 0; i < right.size(); ++i)
      ASSERT_EQ(layout(right(i)), i) << layout.str() << " right inverse " << right.str();
    Layout left = leftInverse(layout);
    for (int64_t i = 0; i < layout.size(); ++i)
      ASSERT_EQ(left(layout(i)), i) << layout.str() << " left inverse " << left.str();
    // A bijection onto [0, size) has an inverse of the same size.
    Layout compact = Layout::compact(layout.getShape());
    ASSERT_EQ(rightInverse(compact).size(), compact.size()) << compact.str();
  }
}

TEST(LayoutProperties, DividesAndProducts) {
  RandomLayouts gen(5);
  int divides = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    Layout a = gen.injective();
    // A tile that divides A's size: a compact 1-D layout of a divisor, maybe strided.
    int64_t size = a.size();
    std::vector<int64_t> divisors;
    for (int64_t d = 1; d <= size; ++d)
      if (size % d == 0)
        divisors.push_back(d);
    int64_t tileSize = divisors[gen.pick(0, divisors.size() - 1)];
    int64_t tileStride = size % (tileSize * 2) == 0 && gen.pick(0, 1) ? 2 : 1;
    Layout tile(tileSize, tileStride);
    Layout divided(0, 0);
    try {
      divided = logicalDivide(a, tile);
    } catch (const LayoutError &) {
      continue; // The tile does not fit A's modes (e.g. 5 elements across a mode of 2).
    }
    ++divides;
    // (tile, rest) is a re-ordering of A's domain: same size, same offsets, A o (tile, tile*).
    ASSERT_EQ(divided.size(), size) << a.str() << " / " << tile.str();
    ASSERT_EQ(divided[0].size(), tileSize);
    Layout reference = Layout::concat({tile, complement(tile, size)});
    for (int64_t i = 0; i < size; ++i)
      ASSERT_EQ(divided(i), a(reference(i))) << a.str() << " / " << tile.str();
    std::vector<int64_t> x = image(a), y = image(divided);
    ASSERT_EQ(std::multiset<int64_t>(x.begin(), x.end()),
              std::multiset<int64_t>(y.begin(), y.end()));
    // zipped_divide with one layout is logical_divide.
    ASSERT_EQ(zippedDivide(a, tile), divided);

    // logical_product: mode 0 is A, B's repetitions land outside A's image, all injective.
    Layout b = gen.injective();
    if (a.size() * b.cosize() > 4096)
      continue;
    Layout product(0, 0);
    try {
      product = logicalProduct(a, b);
    } catch (const LayoutError &) {
      continue; // B's repetitions do not fit the complement's modes.
    }
    ASSERT_EQ(product[0], a);
    ASSERT_EQ(product.size(), a.size() * b.size());
    ASSERT_TRUE(injective(product)) << a.str() << " x " << b.str() << " = " << product.str();
    Layout blocked = blockedProduct(a, b);
    ASSERT_EQ(blocked.size(), a.size() * b.size());
    ASSERT_EQ(blocked.rank(), std::max(a.rank(), b.rank()));
    ASSERT_TRUE(injective(blocked)) << blocked.str();
  }
  EXPECT_GT(divides, kTrials / 2);
}

TEST(LayoutProperties, MaxCommonVectorIsCommon) {
  RandomLayouts gen(7);
  for (int trial = 0; trial < kTrials; ++trial) {
    Layout a = gen.injective(), b = gen.injective();
    if (a.size() != b.size())
      b = Layout::compact(a.getShape());
    int64_t width = maxCommonVector(a, b);
    ASSERT_GE(width, 1);
    Layout inverse = rightInverse(b);
    for (int64_t j = 0; j < width; ++j)
      ASSERT_EQ(a(inverse(j)), j) << a.str() << " " << b.str() << " width " << width;
  }
}

TEST(LayoutProperties, SwizzlesAreInvolutions) {
  for (int bits = 1; bits <= 3; ++bits)
    for (int base = 0; base <= 4; ++base)
      for (int shift = bits; shift <= 4; ++shift) {
        Swizzle sw{bits, base, shift};
        int64_t span = int64_t(1) << (bits + base + shift);
        std::set<int64_t> out;
        for (int64_t x = 0; x < span; ++x) {
          ASSERT_EQ(sw(sw(x)), x) << sw.str();
          out.insert(sw(x));
        }
        ASSERT_EQ(int64_t(out.size()), span) << sw.str() << " is not a bijection";
      }
}
