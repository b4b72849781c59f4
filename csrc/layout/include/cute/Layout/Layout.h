//===- Layout.h - CuTe's layout algebra, no dependencies ----------*- C++ -*-===//
//
// Hierarchical integer tuples, layouts (a shape and a congruent stride), CuTe's textual
// notation and the layout algebra as CuTe's documentation defines it: coalesce, composition,
// complement, inverses, divides, products, construction helpers (ordered layouts, tile_to_shape,
// recast), swizzles.
//
// It depends on nothing but the C++ standard library, so the dialect (type inference and
// folding), the Python module (the eager algebra) and the unit tests all use this one copy.
//
// Leaves are static integers, dynamic (`?`, a value known only at run time) or holes (`_`,
// CuTe's underscore in slicing coordinates). The algebra needs static leaves; given a dynamic
// one it throws LayoutError naming the operation, so callers can fall back to run-time math.
//
//===----------------------------------------------------------------------===//

#ifndef CUTE_LAYOUT_LAYOUT_H
#define CUTE_LAYOUT_LAYOUT_H

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cute::layout {

/// Raised by the algebra for arguments outside its domain (incompatible shapes, non-injective
/// layouts, dynamic leaves where static ones are needed). The message says what and why.
class LayoutError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// An integer or a tuple of IntTuples: `8`, `(4,8)`, `(4,(2,8))`, `(?,8)`, `(_,3)`.
class IntTuple {
public:
  enum class Kind { Static, Dynamic, Hole };

  IntTuple(int64_t value = 0) : value(value) {}
  explicit IntTuple(std::vector<IntTuple> children) : children(std::move(children)), leaf(false) {}
  static IntTuple dynamic() { return IntTuple(0, Kind::Dynamic); }
  static IntTuple hole() { return IntTuple(0, Kind::Hole); }

  bool isLeaf() const { return leaf; }
  bool isDynamic() const { return leaf && kind == Kind::Dynamic; }
  bool isHole() const { return leaf && kind == Kind::Hole; }
  /// True when every leaf is a static integer.
  bool isStatic() const;
  /// The value of a static leaf; throws for tuples, dynamic leaves and holes.
  int64_t getValue() const;
  const std::vector<IntTuple> &getChildren() const { return children; }
  /// Number of top-level modes (1 for a leaf).
  size_t rank() const { return leaf ? 1 : children.size(); }
  /// Nesting depth: 0 for a leaf.
  size_t depth() const;
  /// Mode i (a leaf is its own mode 0).
  const IntTuple &operator[](size_t i) const;
  /// The leaves in order, as tuples (kinds kept).
  std::vector<IntTuple> leaves() const;
  /// The static leaves in order; throws if one is dynamic or a hole.
  std::vector<int64_t> flatten() const;
  /// Product of the leaves; throws if one is not static.
  int64_t product() const;
  /// Same tree structure (leaves may differ).
  bool congruentTo(const IntTuple &other) const;
  /// CuTe's weak congruence: this tuple's tree is a prefix of `other`'s.
  bool weaklyCongruentTo(const IntTuple &other) const;
  std::string str() const;
  bool operator==(const IntTuple &other) const;
  bool operator!=(const IntTuple &other) const { return !(*this == other); }

private:
  IntTuple(int64_t value, Kind kind) : value(value), kind(kind) {}
  int64_t value = 0;
  std::vector<IntTuple> children;
  bool leaf = true;
  Kind kind = Kind::Static;
};

/// Builds a tuple from its modes; one mode stays a tuple of one (`make_tuple(x)`).
IntTuple makeTuple(std::vector<IntTuple> modes);
/// CuTe's shape_div: divides `a` by `b` mode by mode, leaf by leaf, where one of each pair
/// divides the other (4/8 is 1, as in CuTe).
IntTuple shapeDiv(const IntTuple &a, const IntTuple &b);
/// Ceiling division of two static integers.
int64_t ceilDiv(int64_t a, int64_t b);
/// The compact column-major strides of a shape (extent-1 modes get stride 0, as in CuTe).
IntTuple compactColMajor(const IntTuple &shape, int64_t start = 1);
/// The natural coordinate of a linear index in a shape, colexicographic (first mode fastest).
IntTuple idx2crd(int64_t index, const IntTuple &shape);

class Layout {
public:
  Layout(IntTuple shape, IntTuple stride);
  /// The compact column-major layout of a shape (LayoutLeft).
  static Layout compact(const IntTuple &shape);
  /// A layout of the given modes: `make_layout(l0, l1, ...)`.
  static Layout concat(const std::vector<Layout> &modes);

  const IntTuple &getShape() const { return shape; }
  const IntTuple &getStride() const { return stride; }
  bool isStatic() const { return shape.isStatic() && stride.isStatic(); }
  size_t rank() const { return shape.rank(); }
  size_t depth() const { return shape.depth(); }
  int64_t size() const { return shape.product(); }
  /// One past the largest offset the layout produces (the smallest offset is 0 for
  /// non-negative strides).
  int64_t cosize() const;
  /// Mode i as a layout.
  Layout operator[](size_t i) const;
  /// The modes as layouts (a rank-1 layout is its own only mode).
  std::vector<Layout> modes() const;
  /// The offset of a coordinate: a linear index, a flat coordinate (one per leaf) or any
  /// coordinate congruent to a prefix of the shape (CuTe's crd2idx).
  int64_t operator()(int64_t linear) const;
  int64_t crd2idx(const IntTuple &coord) const;
  int64_t crd2idx(const std::vector<int64_t> &flatCoord) const;
  /// The flat coordinate of a linear index, colexicographic (first mode fastest).
  std::vector<int64_t> idx2crd(int64_t linear) const;
  /// `shape:stride` in CuTe's notation, e.g. `(4,8):(8,1)`.
  std::string str() const;
  bool operator==(const Layout &other) const {
    return shape == other.shape && stride == other.stride;
  }
  bool operator!=(const Layout &other) const { return !(*this == other); }

private:
  IntTuple shape, stride;
};

//===----------------------------------------------------------------------===//
// Parsing
//===----------------------------------------------------------------------===//

/// Parses CuTe's notation (`?` a dynamic leaf, `_` a hole). On failure returns nullopt and
/// sets `error`.
std::optional<IntTuple> parseIntTuple(const std::string &text, std::string *error);
/// Parses `shape:stride` or a bare `shape` (compact column-major stride), and checks that
/// shape and stride are congruent and that every static extent is positive.
std::optional<Layout> parseLayout(const std::string &text, std::string *error);

//===----------------------------------------------------------------------===//
// The algebra (CuTe's definitions; all throw LayoutError outside their domain)
//===----------------------------------------------------------------------===//

/// Selects modes: `select(L, {2, 0})`.
Layout select(const Layout &layout, const std::vector<size_t> &modes);
/// Pads with 1:0 modes (or `pad`) up to `rank` modes.
Layout append(const Layout &layout, size_t rank, const Layout &pad = Layout(1, 0));
/// The shortest layout with the same mapping over [0, size): drops extent-1 modes and merges
/// modes where stride[i+1] == shape[i] * stride[i].
Layout coalesce(const Layout &layout);
/// Coalesces each mode of `profile` separately (CuTe's by-mode coalesce).
Layout coalesce(const Layout &layout, const IntTuple &profile);
/// Replaces the extents of stride-0 modes by 1.
Layout filterZeros(const Layout &layout);
/// coalesce(filter_zeros(L)): the layout without broadcast modes.
Layout filter(const Layout &layout);
/// (A o B)(c) = A(B(c)), shaped like B.
Layout composition(const Layout &a, const Layout &b);
/// The layout of the offsets in [0, cotarget) that `layout` does not produce, ordered.
Layout complement(const Layout &layout, int64_t cotarget);
Layout complement(const Layout &layout);
/// R with L(R(i)) == i on the longest prefix of [0, cosize) it can cover.
Layout rightInverse(const Layout &layout);
/// R with R(L(i)) == i for every i in [0, size(L)) (L must be injective).
Layout leftInverse(const Layout &layout);
/// A tiler is one layout (applied to the layout as a whole, 1-D) or a tuple of layouts
/// applied mode by mode (CuTe's by-mode tilers; a shape `(8,4)` is the tiler `(8:1,4:1)`).
struct Tiler {
  std::vector<Layout> modes;
  bool byMode;
  Tiler(const Layout &whole) : modes{whole}, byMode(false) {}
  Tiler(std::vector<Layout> perMode) : modes(std::move(perMode)), byMode(true) {}
};
/// By-mode composition: mode i of A composed with tiler[i]; the other modes of A unchanged.
Layout composition(const Layout &a, const Tiler &tiler);
/// compose(A, (B, complement(B, size(A)))): the tile and its repetitions.
Layout logicalDivide(const Layout &a, const Tiler &tiler);
/// ((tile modes...), (rest modes...)).
Layout zippedDivide(const Layout &a, const Tiler &tiler);
/// ((tile modes...), rest0, rest1, ...).
Layout tiledDivide(const Layout &a, const Tiler &tiler);
/// (tile0, tile1, ..., rest0, rest1, ...).
Layout flatDivide(const Layout &a, const Tiler &tiler);
/// (A, complement(A, size(A) * cosize(B)) o B): B repetitions of A.
Layout logicalProduct(const Layout &a, const Tiler &b);
Layout zippedProduct(const Layout &a, const Tiler &b);
Layout tiledProduct(const Layout &a, const Tiler &b);
Layout flatProduct(const Layout &a, const Tiler &b);
/// Mode by mode: A's block repeated by B, A fastest (blocked) or B fastest (raked).
Layout blockedProduct(const Layout &a, const Layout &b);
Layout rakedProduct(const Layout &a, const Layout &b);
/// Compact layout of `shape` whose modes are ordered by `order` (smallest order fastest).
Layout makeOrderedLayout(const IntTuple &shape, const IntTuple &order);
/// Repeats `block` to fill `target` (rank-aligned), repetitions ordered by `order`
/// (column-major when empty).
Layout tileToShape(const Layout &block, const IntTuple &target,
                   const std::optional<IntTuple> &order = std::nullopt);
/// The same memory seen with elements of `newBits` instead of `oldBits`.
Layout recast(const Layout &layout, int64_t oldBits, int64_t newBits);
/// How many leading elements both layouts map to the same contiguous offsets
/// (the widest vector a copy between them can use, in elements).
int64_t maxCommonVector(const Layout &a, const Layout &b);
/// The layout of the coordinates where both map identically.
Layout maxCommonLayout(const Layout &a, const Layout &b);

//===----------------------------------------------------------------------===//
// Swizzles
//===----------------------------------------------------------------------===//

/// CuTe's Swizzle<B, M, S>: XORs the B bits at [M + max(0,S), ...) into the B bits at
/// [M + max(0,-S), ...), so rows of a shared-memory tile land in different banks.
struct Swizzle {
  int bits = 0, base = 0, shift = 0;
  int64_t operator()(int64_t offset) const;
  std::string str() const;
  bool operator==(const Swizzle &other) const {
    return bits == other.bits && base == other.base && shift == other.shift;
  }
};

/// swizzle(offset + layout(c)), printed `Sw<3,4,3> o 0 o (8,64):(64,1)`.
struct ComposedLayout {
  Swizzle swizzle;
  int64_t offset = 0;
  Layout layout{1, 0};
  int64_t operator()(int64_t linear) const { return swizzle(offset + layout(linear)); }
  std::string str() const;
};

//===----------------------------------------------------------------------===//
// Layouts with run-time leaves (DynamicLayout.cpp)
//===----------------------------------------------------------------------===//

/// How one leaf of a result is computed from the leaves of the operand layout, numbered over
/// all its leaves, shape then stride. The dialect's lowering turns recipes into arithmetic.
struct LeafRecipe {
  enum class Kind { Static, Copy, CeilDiv, Mul };
  Kind kind = Kind::Static;
  int64_t value = 0; // Static: the leaf; CeilDiv and Mul: the static divisor or factor
  size_t source = 0; // Copy, CeilDiv and Mul: the operand leaf
};

/// A result layout (`?` where a leaf is known only at run time) and, for each of its leaves
/// (shape then stride), how to compute it.
struct DynamicResult {
  Layout layout;
  std::vector<LeafRecipe> leaves;
};

/// logical/zipped/tiled/flat divide (`kind`, CuTe's name) of a layout with run-time leaves by a
/// by-mode tiler. A tiled mode with run-time leaves must be one leaf s:d and its tile a
/// contiguous n:1 (or 1:0): it splits into n:d and ceil(s/n):(d*n), what dividing a
/// dynamic-shape tensor into static tiles needs. Static modes divide as usual; modes past the
/// tiler are kept. Throws LayoutError otherwise.
DynamicResult divideDynamic(const std::string &kind, const Layout &layout, const Tiler &tiler);

/// Runs `fn`, returning nullopt and the message instead of throwing (for callers built
/// without exception handling, such as the dialect).
std::optional<Layout> tryLayout(const std::function<Layout()> &fn, std::string *error);

} // namespace cute::layout

#endif // CUTE_LAYOUT_LAYOUT_H
