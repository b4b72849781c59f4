//===- Layout.cpp - CuTe int tuples and layouts ---------------------------===//

#include "cute/Layout/Layout.h"

#include <cctype>

namespace cute::layout {

size_t IntTuple::depth() const {
  if (leaf)
    return 0;
  size_t deepest = 0;
  for (const IntTuple &child : children)
    deepest = std::max(deepest, child.depth());
  return deepest + 1;
}

std::vector<int64_t> IntTuple::flatten() const {
  if (leaf)
    return {value};
  std::vector<int64_t> leaves;
  for (const IntTuple &child : children) {
    std::vector<int64_t> sub = child.flatten();
    leaves.insert(leaves.end(), sub.begin(), sub.end());
  }
  return leaves;
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

std::string IntTuple::str() const {
  if (leaf)
    return std::to_string(value);
  std::string text = "(";
  for (size_t i = 0; i < children.size(); ++i)
    text += (i ? "," : "") + children[i].str();
  return text + ")";
}

bool IntTuple::operator==(const IntTuple &other) const {
  if (leaf != other.leaf)
    return false;
  if (leaf)
    return value == other.value;
  return children == other.children;
}

static IntTuple compactStride(const IntTuple &shape, int64_t &current) {
  if (shape.isLeaf()) {
    IntTuple stride(shape.getValue() == 1 ? 0 : current);
    current *= shape.getValue();
    return stride;
  }
  std::vector<IntTuple> strides;
  for (const IntTuple &child : shape.getChildren())
    strides.push_back(compactStride(child, current));
  return IntTuple(std::move(strides));
}

Layout Layout::compact(const IntTuple &shape) {
  int64_t current = 1;
  return Layout(shape, compactStride(shape, current));
}

std::vector<int64_t> Layout::idx2crd(int64_t linear) const {
  std::vector<int64_t> coord;
  for (int64_t extent : shape.flatten()) {
    coord.push_back(linear % extent);
    linear /= extent;
  }
  return coord;
}

int64_t Layout::crd2idx(const std::vector<int64_t> &flatCoord) const {
  std::vector<int64_t> strides = stride.flatten();
  int64_t offset = 0;
  for (size_t i = 0; i < strides.size() && i < flatCoord.size(); ++i)
    offset += flatCoord[i] * strides[i];
  return offset;
}

int64_t Layout::cosize() const {
  // The largest offset is reached at the last coordinate for non-negative strides; CuTe
  // defines cosize as layout(size - 1) + 1.
  if (size() == 0)
    return 0;
  return (*this)(size() - 1) + 1;
}

std::string Layout::str() const { return shape.str() + ":" + stride.str(); }

namespace {
/// Recursive-descent parser over `(`, `)`, `,` and integers, with positions for errors.
class TupleParser {
public:
  TupleParser(const std::string &text, size_t start, size_t end)
      : text(text), pos(start), end(end) {}

  std::optional<IntTuple> parse(std::string *error) {
    std::optional<IntTuple> result = parseTuple(error);
    skipSpace();
    if (result && pos != end) {
      fail(error, "unexpected '" + std::string(1, text[pos]) + "'");
      return std::nullopt;
    }
    return result;
  }

private:
  void skipSpace() {
    while (pos < end && std::isspace(static_cast<unsigned char>(text[pos])))
      ++pos;
  }
  void fail(std::string *error, const std::string &what) {
    if (error)
      *error = what + " at position " + std::to_string(pos) + " in '" + text + "'";
  }
  std::optional<IntTuple> parseTuple(std::string *error) {
    skipSpace();
    if (pos >= end) {
      fail(error, "expected an integer or '('");
      return std::nullopt;
    }
    if (text[pos] == '(') {
      ++pos;
      std::vector<IntTuple> children;
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
        fail(error, "expected ',' or ')'");
        return std::nullopt;
      }
      if (children.size() == 1)
        return children.front(); // `(8)` is the same as `8`, as in CuTe.
      return IntTuple(std::move(children));
    }
    bool negative = false;
    if (text[pos] == '-') {
      negative = true;
      ++pos;
    }
    if (pos >= end || !std::isdigit(static_cast<unsigned char>(text[pos]))) {
      fail(error, "expected an integer or '('");
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
  for (int64_t extent : shape.flatten())
    if (extent <= 0)
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
  if (colon == std::string::npos)
    return Layout::compact(*shape);
  std::optional<IntTuple> stride = TupleParser(text, colon + 1, text.size()).parse(error);
  if (!stride)
    return std::nullopt;
  if (!shape->congruentTo(*stride)) {
    if (error)
      *error = "shape " + shape->str() + " and stride " + stride->str() + " are not congruent";
    return std::nullopt;
  }
  return Layout(*shape, *stride);
}

} // namespace cute::layout
