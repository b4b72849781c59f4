//===- Layout.cpp - CuTe's layout algebra ---------------------------------===//
//
// Each operation follows the definition in CuTe's documentation (layout algebra, divides,
// products); comments name the identity an operation implements.
//
//===----------------------------------------------------------------------===//

#include "cute/Layout/Layout.h"

#include <algorithm>
#include <cctype>
#include <numeric>

namespace cute::layout {

[[noreturn]] static void fail(const std::string &message) { throw LayoutError(message); }

//===----------------------------------------------------------------------===//
// IntTuple
//===----------------------------------------------------------------------===//

bool IntTuple::isStatic() const {
  if (leaf)
    return kind == Kind::Static;
  return std::all_of(children.begin(), children.end(),
                     [](const IntTuple &child) { return child.isStatic(); });
}

int64_t IntTuple::getValue() const {
  if (!leaf)
    fail("expected an integer, got the tuple " + str());
  if (kind != Kind::Static)
    fail(std::string("expected a static integer, got '") + (isDynamic() ? "?" : "_") + "'");
  return value;
}

size_t IntTuple::depth() const {
  if (leaf)
    return 0;
  size_t deepest = 0;
  for (const IntTuple &child : children)
    deepest = std::max(deepest, child.depth());
  return deepest + 1;
}

const IntTuple &IntTuple::operator[](size_t i) const {
  if (leaf && i == 0)
    return *this;
  if (leaf || i >= children.size())
    fail("mode " + std::to_string(i) + " is out of range for " + str());
  return children[i];
}

std::vector<IntTuple> IntTuple::leaves() const {
  if (leaf)
    return {*this};
  std::vector<IntTuple> result;
  for (const IntTuple &child : children) {
    std::vector<IntTuple> sub = child.leaves();
    result.insert(result.end(), sub.begin(), sub.end());
  }
  return result;
}

std::vector<int64_t> IntTuple::flatten() const {
  std::vector<int64_t> values;
  for (const IntTuple &leafTuple : leaves())
    values.push_back(leafTuple.getValue());
  return values;
}

int64_t IntTuple::product() const {
  int64_t result = 1;
  for (int64_t leafValue : flatten())
    result *= leafValue;
  return result;
}

bool IntTuple::congruentTo(const IntTuple &other) const {
  if (leaf || other.leaf)
    return leaf == other.leaf;
  if (children.size() != other.children.size())
    return false;
  for (size_t i = 0; i < children.size(); ++i)
    if (!children[i].congruentTo(other.children[i]))
      return false;
  return true;
}

bool IntTuple::weaklyCongruentTo(const IntTuple &other) const {
  if (leaf)
    return true;
  if (other.leaf || children.size() != other.children.size())
    return false;
  for (size_t i = 0; i < children.size(); ++i)
    if (!children[i].weaklyCongruentTo(other.children[i]))
      return false;
  return true;
}

std::string IntTuple::str() const {
  if (leaf) {
    if (kind == Kind::Dynamic)
      return "?";
    if (kind == Kind::Hole)
      return "_";
    return std::to_string(value);
  }
  std::string text = "(";
  for (size_t i = 0; i < children.size(); ++i)
    text += (i ? "," : "") + children[i].str();
  return text + ")";
}

bool IntTuple::operator==(const IntTuple &other) const {
  if (leaf != other.leaf)
    return false;
  if (leaf)
    return kind == other.kind && value == other.value;
  return children == other.children;
}

IntTuple makeTuple(std::vector<IntTuple> modes) { return IntTuple(std::move(modes)); }

int64_t ceilDiv(int64_t a, int64_t b) {
  if (b <= 0)
    fail("ceil_div by " + std::to_string(b));
  return (a + b - 1) / b;
}

IntTuple shapeDiv(const IntTuple &a, const IntTuple &b) {
  if (!a.isLeaf()) {
    std::vector<IntTuple> result;
    if (!b.isLeaf()) {
      if (a.rank() != b.rank())
        fail("shape_div of " + a.str() + " by " + b.str() + ": ranks differ");
      for (size_t i = 0; i < a.rank(); ++i)
        result.push_back(shapeDiv(a[i], b[i]));
      return makeTuple(result);
    }
    // Divide the modes in order, carrying what is left of the divisor.
    IntTuple rest = b;
    for (const IntTuple &mode : a.getChildren()) {
      result.push_back(shapeDiv(mode, rest));
      rest = shapeDiv(rest, IntTuple(mode.product()));
    }
    return makeTuple(result);
  }
  if (!b.isLeaf())
    return shapeDiv(a, IntTuple(b.product()));
  int64_t x = a.getValue(), y = b.getValue();
  if (y == 0 || (x % y != 0 && y % x != 0))
    fail("shape_div: neither of " + std::to_string(x) + " and " + std::to_string(y) +
         " divides the other");
  return IntTuple(x / y != 0 ? x / y : 1);
}

static IntTuple compactStrides(const IntTuple &shape, int64_t &current) {
  if (shape.isLeaf()) {
    IntTuple stride(shape.getValue() == 1 ? 0 : current);
    current *= shape.getValue();
    return stride;
  }
  std::vector<IntTuple> strides;
  for (const IntTuple &child : shape.getChildren())
    strides.push_back(compactStrides(child, current));
  return makeTuple(strides);
}

IntTuple compactColMajor(const IntTuple &shape, int64_t start) {
  return compactStrides(shape, start);
}

IntTuple idx2crd(int64_t index, const IntTuple &shape) {
  if (shape.isLeaf())
    return IntTuple(index);
  std::vector<IntTuple> coord;
  for (size_t i = 0; i < shape.rank(); ++i) {
    int64_t extent = shape[i].product();
    bool last = i + 1 == shape.rank();
    coord.push_back(idx2crd(last ? index : index % extent, shape[i]));
    index /= extent;
  }
  return makeTuple(coord);
}

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

Layout::Layout(IntTuple shape, IntTuple stride)
    : shape(std::move(shape)), stride(std::move(stride)) {
  if (!this->shape.congruentTo(this->stride))
    fail("shape " + this->shape.str() + " and stride " + this->stride.str() + " are not congruent");
}

Layout Layout::compact(const IntTuple &shape) { return Layout(shape, compactColMajor(shape)); }

Layout Layout::concat(const std::vector<Layout> &modes) {
  std::vector<IntTuple> shapes, strides;
  for (const Layout &mode : modes) {
    shapes.push_back(mode.shape);
    strides.push_back(mode.stride);
  }
  return Layout(makeTuple(shapes), makeTuple(strides));
}

int64_t Layout::cosize() const {
  // The largest offset plus one; CuTe's layout(size - 1) + 1 for non-negative strides.
  std::vector<int64_t> extents = shape.flatten(), strides = stride.flatten();
  int64_t largest = 0;
  for (size_t i = 0; i < extents.size(); ++i)
    largest += (extents[i] - 1) * std::max<int64_t>(strides[i], 0);
  return largest + 1;
}

Layout Layout::operator[](size_t i) const { return Layout(shape[i], stride[i]); }

std::vector<Layout> Layout::modes() const {
  std::vector<Layout> result;
  for (size_t i = 0; i < rank(); ++i)
    result.push_back((*this)[i]);
  return result;
}

static int64_t crd2idxImpl(const IntTuple &coord, const IntTuple &shape, const IntTuple &stride) {
  if (coord.isHole()) // a slicing hole (`_`) keeps its mode: no offset
    return 0;
  if (!coord.isLeaf()) {
    if (shape.isLeaf() || coord.rank() != shape.rank())
      fail("coordinate " + coord.str() + " is not congruent with shape " + shape.str());
    int64_t offset = 0;
    for (size_t i = 0; i < coord.rank(); ++i)
      offset += crd2idxImpl(coord[i], shape[i], stride[i]);
    return offset;
  }
  int64_t c = coord.getValue();
  if (shape.isLeaf())
    return c * stride.getValue();
  // A linear coordinate into a tuple splits colexicographically; the last mode takes the rest.
  int64_t offset = 0;
  for (size_t i = 0; i < shape.rank(); ++i) {
    int64_t extent = shape[i].product();
    bool last = i + 1 == shape.rank();
    offset += crd2idxImpl(IntTuple(last ? c : c % extent), shape[i], stride[i]);
    c /= extent;
  }
  return offset;
}

int64_t Layout::crd2idx(const IntTuple &coord) const { return crd2idxImpl(coord, shape, stride); }

int64_t Layout::operator()(int64_t linear) const { return crd2idx(IntTuple(linear)); }

int64_t Layout::crd2idx(const std::vector<int64_t> &flatCoord) const {
  std::vector<int64_t> strides = stride.flatten();
  if (flatCoord.size() != strides.size())
    fail("a flat coordinate of " + std::to_string(flatCoord.size()) + " values for " +
         std::to_string(strides.size()) + " leaves");
  int64_t offset = 0;
  for (size_t i = 0; i < strides.size(); ++i)
    offset += flatCoord[i] * strides[i];
  return offset;
}

std::vector<int64_t> Layout::idx2crd(int64_t linear) const {
  std::vector<int64_t> coord;
  std::vector<int64_t> extents = shape.flatten();
  for (size_t i = 0; i < extents.size(); ++i) {
    bool last = i + 1 == extents.size();
    coord.push_back(last ? linear : linear % extents[i]);
    linear /= extents[i];
  }
  return coord;
}

std::string Layout::str() const { return shape.str() + ":" + stride.str(); }

//===----------------------------------------------------------------------===//
// Parsing
//===----------------------------------------------------------------------===//

namespace {
/// Recursive-descent parser over `(`, `)`, `,`, integers, `?` and `_`, with positions.
class TupleParser {
public:
  TupleParser(const std::string &text, size_t start, size_t end)
      : text(text), pos(start), end(end) {}

  std::optional<IntTuple> parse(std::string *error) {
    std::optional<IntTuple> result = parseTuple(error);
    skipSpace();
    if (result && pos != end) {
      setError(error, "unexpected '" + std::string(1, text[pos]) + "'");
      return std::nullopt;
    }
    return result;
  }

private:
  void skipSpace() {
    while (pos < end && std::isspace(static_cast<unsigned char>(text[pos])))
      ++pos;
  }
  void setError(std::string *error, const std::string &what) {
    if (error)
      *error = what + " at position " + std::to_string(pos) + " in '" + text + "'";
  }
  std::optional<IntTuple> parseTuple(std::string *error) {
    skipSpace();
    if (pos >= end) {
      setError(error, "expected an integer or '('");
      return std::nullopt;
    }
    if (text[pos] == '(') {
      ++pos;
      std::vector<IntTuple> children;
      skipSpace();
      if (pos < end && text[pos] == ')') {
        ++pos;
        return makeTuple({}); // `()`: the empty tuple, what slicing every mode leaves.
      }
      while (true) {
        std::optional<IntTuple> child = parseTuple(error);
        if (!child)
          return std::nullopt;
        children.push_back(*child);
        skipSpace();
        if (pos < end && text[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < end && text[pos] == ')') {
          ++pos;
          break;
        }
        setError(error, "expected ',' or ')'");
        return std::nullopt;
      }
      // `(8)` stays a tuple of one, as the algebra prints it (zipped_divide by a one-mode
      // tiler gives `((128),(?))`), so every type spelling parses back to itself.
      return makeTuple(children);
    }
    if (text[pos] == '?' || text[pos] == '_')
      return text[pos++] == '?' ? IntTuple::dynamic() : IntTuple::hole();
    bool negative = false;
    if (text[pos] == '-') {
      negative = true;
      ++pos;
    }
    if (pos >= end || !std::isdigit(static_cast<unsigned char>(text[pos]))) {
      setError(error, "expected an integer or '('");
      return std::nullopt;
    }
    int64_t value = 0;
    while (pos < end && std::isdigit(static_cast<unsigned char>(text[pos])))
      value = value * 10 + (text[pos++] - '0');
    return IntTuple(negative ? -value : value);
  }

  const std::string &text;
  size_t pos, end;
};

bool allPositive(const IntTuple &shape) {
  for (const IntTuple &leafTuple : shape.leaves())
    if (leafTuple.isHole() || (!leafTuple.isDynamic() && leafTuple.getValue() <= 0))
      return false;
  return true;
}
} // namespace

std::optional<IntTuple> parseIntTuple(const std::string &text, std::string *error) {
  return TupleParser(text, 0, text.size()).parse(error);
}

std::optional<Layout> parseLayout(const std::string &text, std::string *error) {
  size_t colon = text.find(':');
  size_t shapeEnd = colon == std::string::npos ? text.size() : colon;
  std::optional<IntTuple> shape = TupleParser(text, 0, shapeEnd).parse(error);
  if (!shape)
    return std::nullopt;
  if (!allPositive(*shape)) {
    if (error)
      *error = "shape " + shape->str() + " has an extent that is not positive";
    return std::nullopt;
  }
  if (colon == std::string::npos) {
    if (!shape->isStatic()) {
      if (error)
        *error = "shape " + shape->str() + " is dynamic, so it needs an explicit stride";
      return std::nullopt;
    }
    return Layout::compact(*shape);
  }
  std::optional<IntTuple> stride = TupleParser(text, colon + 1, text.size()).parse(error);
  if (!stride)
    return std::nullopt;
  if (!shape->congruentTo(*stride)) {
    if (error)
      *error = "shape " + shape->str() + " and stride " + stride->str() + " are not congruent";
    return std::nullopt;
  }
  for (const IntTuple &leafTuple : stride->leaves())
    if (leafTuple.isHole()) {
      if (error)
        *error = "stride " + stride->str() + " has a hole";
      return std::nullopt;
    }
  return Layout(*shape, *stride);
}

//===----------------------------------------------------------------------===//
// Structure: select, append
//===----------------------------------------------------------------------===//

/// A layout of one leaf mode, or of several.
static Layout fromModes(const std::vector<std::pair<int64_t, int64_t>> &modes) {
  if (modes.empty())
    return Layout(1, 0);
  if (modes.size() == 1)
    return Layout(modes[0].first, modes[0].second);
  std::vector<IntTuple> shapes, strides;
  for (auto [extent, step] : modes) {
    shapes.emplace_back(extent);
    strides.emplace_back(step);
  }
  return Layout(makeTuple(shapes), makeTuple(strides));
}

/// The static (extent, stride) leaves of a layout, in order.
static std::vector<std::pair<int64_t, int64_t>> staticLeaves(const Layout &layout,
                                                             const char *operation) {
  if (!layout.isStatic())
    fail(std::string(operation) + " needs a static layout, got " + layout.str());
  std::vector<int64_t> extents = layout.getShape().flatten();
  std::vector<int64_t> strides = layout.getStride().flatten();
  std::vector<std::pair<int64_t, int64_t>> modes;
  for (size_t i = 0; i < extents.size(); ++i)
    modes.emplace_back(extents[i], strides[i]);
  return modes;
}

Layout select(const Layout &layout, const std::vector<size_t> &modes) {
  std::vector<Layout> picked;
  for (size_t mode : modes)
    picked.push_back(layout[mode]);
  return Layout::concat(picked);
}

Layout append(const Layout &layout, size_t rank, const Layout &pad) {
  if (layout.rank() >= rank)
    return layout;
  std::vector<Layout> modes = layout.modes();
  while (modes.size() < rank)
    modes.push_back(pad);
  return Layout::concat(modes);
}

//===----------------------------------------------------------------------===//
// Coalesce and filter
//===----------------------------------------------------------------------===//

Layout coalesce(const Layout &layout) {
  std::vector<std::pair<int64_t, int64_t>> result;
  for (auto [extent, step] : staticLeaves(layout, "coalesce")) {
    if (extent == 1)
      continue;
    if (!result.empty() && result.back().first * result.back().second == step) {
      result.back().first *= extent; // Mode i+1 continues mode i.
      continue;
    }
    result.emplace_back(extent, step);
  }
  return fromModes(result);
}

Layout coalesce(const Layout &layout, const IntTuple &profile) {
  if (profile.isLeaf())
    return coalesce(layout);
  std::vector<Layout> modes;
  for (size_t i = 0; i < layout.rank(); ++i)
    modes.push_back(i < profile.rank() ? coalesce(layout[i], profile[i]) : layout[i]);
  return Layout::concat(modes);
}

static IntTuple zeroExtents(const IntTuple &shape, const IntTuple &stride) {
  if (shape.isLeaf())
    return stride.isStatic() && stride.getValue() == 0 ? IntTuple(1) : shape;
  std::vector<IntTuple> modes;
  for (size_t i = 0; i < shape.rank(); ++i)
    modes.push_back(zeroExtents(shape[i], stride[i]));
  return makeTuple(modes);
}

Layout filterZeros(const Layout &layout) {
  return Layout(zeroExtents(layout.getShape(), layout.getStride()), layout.getStride());
}

Layout filter(const Layout &layout) { return coalesce(filterZeros(layout)); }

//===----------------------------------------------------------------------===//
// Composition
//===----------------------------------------------------------------------===//

/// A o (extent:step) for a leaf right-hand side: walk A's coalesced modes, dividing the
/// step out of each, then take as much of the extent as each mode still holds.
static Layout composeLeaf(const Layout &a, int64_t extent, int64_t step) {
  if (step == 0)
    return Layout(extent, 0);
  if (step < 0)
    fail("composition with the negative stride " + std::to_string(step));
  std::vector<std::pair<int64_t, int64_t>> lhs;
  for (auto mode : staticLeaves(coalesce(a), "composition"))
    lhs.push_back(mode);
  std::vector<std::pair<int64_t, int64_t>> result;
  int64_t restShape = extent, restStride = step;
  for (size_t i = 0; i + 1 < lhs.size(); ++i) {
    auto [currShape, currStride] = lhs[i];
    if (currShape % restStride != 0 && restStride % currShape != 0)
      fail("composition " + a.str() + " o " + std::to_string(extent) + ":" + std::to_string(step) +
           ": stride " + std::to_string(restStride) +
           " does not divide and is not a multiple of extent " + std::to_string(currShape));
    int64_t nextShape = ceilDiv(currShape, restStride);
    int64_t nextStride = ceilDiv(restStride, currShape);
    if (nextShape == 1 || restShape == 1) {
      restStride = nextStride;
      continue;
    }
    int64_t newShape = std::min(nextShape, restShape);
    if (restShape % newShape != 0)
      fail("composition " + a.str() + " o " + std::to_string(extent) + ":" + std::to_string(step) +
           ": extent " + std::to_string(restShape) + " is not divisible by " +
           std::to_string(newShape));
    result.emplace_back(newShape, restStride * currStride);
    restShape /= newShape;
    restStride = nextStride;
  }
  // The last mode of A takes whatever is left (it extends past A's size if need be).
  if (result.empty() || restShape != 1)
    result.emplace_back(restShape, restStride * lhs.back().second);
  return fromModes(result);
}

static Layout composeImpl(const Layout &a, const IntTuple &shape, const IntTuple &stride) {
  if (shape.isLeaf()) {
    if (!shape.isStatic() || !stride.isStatic())
      fail("composition needs a static right-hand side, got " + shape.str() + ":" + stride.str());
    return composeLeaf(a, shape.getValue(), stride.getValue());
  }
  std::vector<Layout> modes;
  for (size_t i = 0; i < shape.rank(); ++i)
    modes.push_back(composeImpl(a, shape[i], stride[i]));
  return Layout::concat(modes);
}

Layout composition(const Layout &a, const Layout &b) {
  return composeImpl(a, b.getShape(), b.getStride());
}

/// Applies `apply(A[i], tiler[i])` to the first modes of A, keeping the others.
template <typename Fn>
static Layout byMode(const Layout &a, const Tiler &tiler, const char *operation, Fn apply) {
  if (tiler.modes.size() > a.rank())
    fail(std::string(operation) + ": a tiler of " + std::to_string(tiler.modes.size()) +
         " modes for the rank-" + std::to_string(a.rank()) + " layout " + a.str());
  std::vector<Layout> modes;
  for (size_t i = 0; i < a.rank(); ++i)
    modes.push_back(i < tiler.modes.size() ? apply(a[i], tiler.modes[i]) : a[i]);
  return Layout::concat(modes);
}

Layout composition(const Layout &a, const Tiler &tiler) {
  if (!tiler.byMode)
    return composition(a, tiler.modes.front());
  return byMode(a, tiler, "composition",
                [](const Layout &mode, const Layout &t) { return composition(mode, t); });
}

//===----------------------------------------------------------------------===//
// Complement and inverses
//===----------------------------------------------------------------------===//

Layout complement(const Layout &layout, int64_t cotarget) {
  std::vector<std::pair<int64_t, int64_t>> modes;
  for (auto [extent, step] : staticLeaves(filter(layout), "complement"))
    if (extent != 1 && step != 0)
      modes.emplace_back(extent, step);
  for (auto [extent, step] : modes)
    if (step < 0)
      fail("complement of " + layout.str() + ": negative stride " + std::to_string(step));
  std::sort(modes.begin(), modes.end(), [](auto x, auto y) {
    return x.second != y.second ? x.second < y.second : x.first < y.first;
  });
  // Fill each gap between the image's modes, then repeat up to the cotarget.
  std::vector<std::pair<int64_t, int64_t>> result;
  int64_t current = 1;
  for (auto [extent, step] : modes) {
    if (step % current != 0)
      fail("complement of " + layout.str() + ": the layout is not injective, or its modes " +
           "interleave (stride " + std::to_string(step) + " is not a multiple of " +
           std::to_string(current) + ")");
    result.emplace_back(step / current, current);
    current = extent * step;
  }
  result.emplace_back(ceilDiv(cotarget, current), current);
  return coalesce(fromModes(result));
}

Layout complement(const Layout &layout) { return complement(layout, layout.cosize()); }

Layout rightInverse(const Layout &layout) {
  std::vector<std::pair<int64_t, int64_t>> flat = staticLeaves(coalesce(layout), "right_inverse");
  // Position of each mode in the domain: the compact column-major stride of its extent.
  std::vector<int64_t> position(flat.size());
  int64_t product = 1;
  for (size_t i = 0; i < flat.size(); ++i) {
    position[i] = product;
    product *= flat[i].first;
  }
  std::vector<size_t> order(flat.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return flat[x].second < flat[y].second; });
  std::vector<std::pair<int64_t, int64_t>> result;
  int64_t current = 1;
  // As CuTe's C++: a mode whose stride is not the next one expected is skipped, not the end
  // (a repeated stride of a non-injective layout can come before the one that continues).
  for (size_t i : order) {
    if (flat[i].second != current || flat[i].first == 1)
      continue;
    result.emplace_back(flat[i].first, position[i]);
    current = flat[i].first * flat[i].second;
  }
  return coalesce(fromModes(result));
}

Layout leftInverse(const Layout &layout) {
  return rightInverse(Layout::concat({layout, complement(layout)}));
}

//===----------------------------------------------------------------------===//
// Divides and products
//===----------------------------------------------------------------------===//

static Layout divideWhole(const Layout &a, const Layout &tiler) {
  return composition(a, Layout::concat({tiler, complement(tiler, a.size())}));
}

Layout logicalDivide(const Layout &a, const Tiler &tiler) {
  if (!tiler.byMode)
    return divideWhole(a, tiler.modes.front());
  return byMode(a, tiler, "logical_divide", divideWhole);
}

enum class Unzip { Zipped, Tiled, Flat };

/// Zips the modes of layouts of equal rank: mode i is (l0[i], l1[i], ...).
static Layout zip(const std::vector<Layout> &layouts) {
  if (layouts.empty())
    fail("zip of no layouts");
  size_t rank = layouts.front().rank();
  std::vector<Layout> modes;
  for (size_t i = 0; i < rank; ++i) {
    std::vector<Layout> column;
    for (const Layout &layout : layouts) {
      if (layout.rank() != rank)
        fail("zip of layouts of different ranks: " + layouts.front().str() + " and " +
             layout.str());
      column.push_back(layout[i]);
    }
    modes.push_back(Layout::concat(column));
  }
  return Layout::concat(modes);
}

/// Rearranges a by-mode divide or product ((t0,r0),(t1,r1),...,extra...) into
/// ((t0,t1,...),(r0,r1,...,extra...)), ((t...),r0,r1,...) or (t0,t1,...,r0,r1,...).
static Layout unzip(const Layout &split, const Tiler &tiler, Unzip form) {
  std::vector<Layout> tiles, rests;
  if (!tiler.byMode) {
    tiles = {split[0]};
    rests = split[1].getShape().isLeaf() ? std::vector<Layout>{split[1]} : split[1].modes();
    if (form == Unzip::Zipped)
      return split;
  } else {
    for (size_t i = 0; i < split.rank(); ++i) {
      if (i < tiler.modes.size()) {
        tiles.push_back(split[i][0]);
        rests.push_back(split[i][1]);
      } else {
        rests.push_back(split[i]);
      }
    }
  }
  std::vector<Layout> modes;
  switch (form) {
  case Unzip::Zipped:
    return Layout::concat({Layout::concat(tiles), Layout::concat(rests)});
  case Unzip::Tiled:
    modes.push_back(tiler.byMode ? Layout::concat(tiles) : tiles.front());
    modes.insert(modes.end(), rests.begin(), rests.end());
    return Layout::concat(modes);
  case Unzip::Flat:
    for (const Layout &tile : tiles) {
      std::vector<Layout> sub = tiler.byMode ? std::vector<Layout>{tile} : tile.modes();
      modes.insert(modes.end(), sub.begin(), sub.end());
    }
    modes.insert(modes.end(), rests.begin(), rests.end());
    return Layout::concat(modes);
  }
  return split;
}

Layout zippedDivide(const Layout &a, const Tiler &tiler) {
  return unzip(logicalDivide(a, tiler), tiler, Unzip::Zipped);
}
Layout tiledDivide(const Layout &a, const Tiler &tiler) {
  return unzip(logicalDivide(a, tiler), tiler, Unzip::Tiled);
}
Layout flatDivide(const Layout &a, const Tiler &tiler) {
  return unzip(logicalDivide(a, tiler), tiler, Unzip::Flat);
}

static Layout productWhole(const Layout &a, const Layout &b) {
  return Layout::concat({a, composition(complement(a, a.size() * b.cosize()), b)});
}

Layout logicalProduct(const Layout &a, const Tiler &b) {
  if (!b.byMode)
    return productWhole(a, b.modes.front());
  return byMode(a, b, "logical_product", productWhole);
}
Layout zippedProduct(const Layout &a, const Tiler &b) {
  return unzip(logicalProduct(a, b), b, Unzip::Zipped);
}
Layout tiledProduct(const Layout &a, const Tiler &b) {
  return unzip(logicalProduct(a, b), b, Unzip::Tiled);
}
Layout flatProduct(const Layout &a, const Tiler &b) {
  return unzip(logicalProduct(a, b), b, Unzip::Flat);
}

static Layout rankAlignedProduct(const Layout &a, const Layout &b, bool blockFirst) {
  size_t rank = std::max(a.rank(), b.rank());
  Layout product = productWhole(append(a, rank), append(b, rank));
  Layout first = blockFirst ? product[0] : product[1];
  Layout second = blockFirst ? product[1] : product[0];
  // With one mode, B's composed repetitions may have several modes of their own: keep them
  // together as the second half of that one mode.
  Layout zipped =
      rank == 1 ? Layout::concat({Layout::concat({first, second})}) : zip({first, second});
  std::vector<IntTuple> ones(rank, IntTuple(1));
  return coalesce(zipped, makeTuple(ones));
}

Layout blockedProduct(const Layout &a, const Layout &b) { return rankAlignedProduct(a, b, true); }
Layout rakedProduct(const Layout &a, const Layout &b) { return rankAlignedProduct(a, b, false); }

//===----------------------------------------------------------------------===//
// Construction helpers
//===----------------------------------------------------------------------===//

static IntTuple rebuildLike(const IntTuple &shape, const std::vector<int64_t> &values,
                            size_t &next) {
  if (shape.isLeaf())
    return IntTuple(values[next++]);
  std::vector<IntTuple> modes;
  for (const IntTuple &child : shape.getChildren())
    modes.push_back(rebuildLike(child, values, next));
  return makeTuple(modes);
}

Layout makeOrderedLayout(const IntTuple &shape, const IntTuple &order) {
  std::vector<int64_t> extents = shape.flatten();
  std::vector<int64_t> ranks = order.flatten();
  if (ranks.size() != extents.size())
    fail("make_ordered_layout: order " + order.str() + " does not match shape " + shape.str());
  std::vector<size_t> byOrder(extents.size());
  std::iota(byOrder.begin(), byOrder.end(), 0);
  std::stable_sort(byOrder.begin(), byOrder.end(),
                   [&](size_t x, size_t y) { return ranks[x] < ranks[y]; });
  std::vector<int64_t> strides(extents.size());
  int64_t current = 1;
  for (size_t i : byOrder) {
    strides[i] = extents[i] == 1 ? 0 : current;
    current *= extents[i];
  }
  size_t next = 0;
  return Layout(shape, rebuildLike(shape, strides, next));
}

Layout tileToShape(const Layout &block, const IntTuple &target,
                   const std::optional<IntTuple> &order) {
  size_t rank = target.rank();
  Layout padded = append(block, rank);
  std::vector<IntTuple> repeats;
  for (size_t i = 0; i < rank; ++i) {
    int64_t want = target[i].product(), have = padded[i].size();
    if (want % have != 0)
      fail("tile_to_shape: mode " + std::to_string(i) + " of " + target.str() +
           " is not a multiple of the block's " + std::to_string(have));
    repeats.emplace_back(want / have);
  }
  IntTuple repeatShape = rank == 1 ? repeats.front() : makeTuple(repeats);
  Layout repetition = order ? makeOrderedLayout(repeatShape, *order) : Layout::compact(repeatShape);
  return coalesce(blockedProduct(padded, repetition), repeatShape);
}

static IntTuple rescale(const IntTuple &shape, const IntTuple &stride, int64_t up, int64_t down,
                        bool wantShape) {
  if (!shape.isLeaf()) {
    std::vector<IntTuple> modes;
    for (size_t i = 0; i < shape.rank(); ++i)
      modes.push_back(rescale(shape[i], stride[i], up, down, wantShape));
    return makeTuple(modes);
  }
  int64_t extent = shape.getValue(), step = stride.getValue();
  if (step == 0)
    return wantShape ? extent : 0;
  if (up > 1) // Wider elements: the contiguous mode shrinks, the other strides shrink.
    return step == 1 ? (wantShape ? shapeDiv(extent, up) : IntTuple(1))
                     : (wantShape ? IntTuple(extent) : shapeDiv(step, up));
  // Narrower elements: the contiguous mode grows, the other strides grow.
  return step == 1 ? (wantShape ? IntTuple(extent * down) : IntTuple(1))
                   : (wantShape ? IntTuple(extent) : IntTuple(step * down));
}

Layout recast(const Layout &layout, int64_t oldBits, int64_t newBits) {
  if (oldBits <= 0 || newBits <= 0 || (oldBits % newBits != 0 && newBits % oldBits != 0))
    fail("recast from " + std::to_string(oldBits) + "-bit to " + std::to_string(newBits) +
         "-bit elements");
  if (oldBits == newBits)
    return layout;
  int64_t up = newBits > oldBits ? newBits / oldBits : 1;
  int64_t down = oldBits > newBits ? oldBits / newBits : 1;
  return Layout(rescale(layout.getShape(), layout.getStride(), up, down, true),
                rescale(layout.getShape(), layout.getStride(), up, down, false));
}

/// coalesce(A o B^-1): where A and B agree, as a layout over B's codomain.
static std::optional<std::pair<Layout, Layout>> commonPrefix(const Layout &a, const Layout &b) {
  try {
    Layout inverse = rightInverse(b);
    Layout common = coalesce(composition(a, inverse));
    Layout first = common[0];
    if (first.getStride().getValue() != 1)
      return std::nullopt;
    return std::make_pair(inverse, first);
  } catch (const LayoutError &) {
    return std::nullopt; // No common vector; width 1 is always correct.
  }
}

int64_t maxCommonVector(const Layout &a, const Layout &b) {
  auto common = commonPrefix(a, b);
  return common ? common->second.getShape().getValue() : 1;
}

Layout maxCommonLayout(const Layout &a, const Layout &b) {
  auto common = commonPrefix(a, b);
  return common ? composition(common->first, common->second) : Layout(1, 0);
}

//===----------------------------------------------------------------------===//
// Swizzles
//===----------------------------------------------------------------------===//

int64_t Swizzle::operator()(int64_t offset) const {
  int64_t mask = (int64_t(1) << bits) - 1;
  int64_t yyy = mask << (base + std::max(0, shift));
  int64_t moved = offset & yyy;
  moved = shift >= 0 ? moved >> shift : moved << -shift;
  return offset ^ moved;
}

std::string Swizzle::str() const {
  return "Sw<" + std::to_string(bits) + "," + std::to_string(base) + "," + std::to_string(shift) +
         ">";
}

std::string ComposedLayout::str() const {
  return swizzle.str() + " o " + std::to_string(offset) + " o " + layout.str();
}

std::optional<Layout> tryLayout(const std::function<Layout()> &fn, std::string *error) {
  try {
    return fn();
  } catch (const LayoutError &problem) {
    if (error)
      *error = problem.what();
    return std::nullopt;
  }
}

} // namespace cute::layout
