//===- Layout.h - CuTe int tuples and layouts, no dependencies ---*- C++ -*-===//
//
// The start of the layout-algebra library: hierarchical integer tuples, layouts built from a
// shape and a stride, CuTe's textual notation, and the basic maps (size, cosize, crd2idx,
// idx2crd). It depends on nothing but the C++ standard library so that the dialect, the
// compiler and unit tests can all use it.
//
//===----------------------------------------------------------------------===//

#ifndef CUTE_LAYOUT_LAYOUT_H
#define CUTE_LAYOUT_LAYOUT_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cute::layout {

/// An integer or a tuple of IntTuples: `8`, `(4,8)`, `(4,(2,8))`.
class IntTuple {
public:
  IntTuple(int64_t value = 0) : value(value), leaf(true) {}
  explicit IntTuple(std::vector<IntTuple> children)
      : children(std::move(children)), leaf(false) {}

  bool isLeaf() const { return leaf; }
  int64_t getValue() const { return value; }
  const std::vector<IntTuple> &getChildren() const { return children; }
  /// Number of top-level modes (1 for a leaf).
  size_t rank() const { return leaf ? 1 : children.size(); }
  /// Nesting depth: 0 for a leaf.
  size_t depth() const;
  /// The leaves in order.
  std::vector<int64_t> flatten() const;
  /// Product of the leaves.
  int64_t product() const;
  /// Same tree structure (leaves may differ).
  bool congruentTo(const IntTuple &other) const;
  std::string str() const;
  bool operator==(const IntTuple &other) const;

private:
  int64_t value;
  std::vector<IntTuple> children;
  bool leaf;
};

class Layout {
public:
  Layout(IntTuple shape, IntTuple stride)
      : shape(std::move(shape)), stride(std::move(stride)) {}
  /// The compact column-major layout of a shape (LayoutLeft).
  static Layout compact(const IntTuple &shape);

  const IntTuple &getShape() const { return shape; }
  const IntTuple &getStride() const { return stride; }
  int64_t size() const { return shape.product(); }
  /// One past the largest offset the layout produces.
  int64_t cosize() const;
  /// Offset of a flat coordinate (one entry per leaf of the shape).
  int64_t crd2idx(const std::vector<int64_t> &flatCoord) const;
  /// Offset of a linear (colexicographic) coordinate.
  int64_t operator()(int64_t linear) const { return crd2idx(idx2crd(linear)); }
  /// The flat coordinate of a linear index, colexicographic (first mode fastest).
  std::vector<int64_t> idx2crd(int64_t linear) const;
  /// `shape:stride` in CuTe's notation, e.g. `(4,8):(8,1)`.
  std::string str() const;

private:
  IntTuple shape, stride;
};

/// Parses CuTe's notation. On failure returns nullopt and sets `error`.
std::optional<IntTuple> parseIntTuple(const std::string &text, std::string *error);
/// Parses `shape:stride` or a bare `shape` (compact column-major stride), and checks that
/// shape and stride are congruent and that every extent is positive.
std::optional<Layout> parseLayout(const std::string &text, std::string *error);

} // namespace cute::layout

#endif // CUTE_LAYOUT_LAYOUT_H
