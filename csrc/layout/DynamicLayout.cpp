//===- DynamicLayout.cpp - the algebra's rules for run-time leaves --------===//
//
// What CuTe does with layouts whose leaves are known only at run time, as far as the kernels
// need it: dividing dynamic-shape tensors into static tiles. Each rule gives the result's
// structure (with `?` leaves) and a recipe per leaf, so the one place that decides how a
// dynamic leaf is computed is here; the dialect's lowering only follows recipes.
//
//===----------------------------------------------------------------------===//

#include "cute/Layout/Layout.h"

namespace cute::layout {
namespace {

using Recipes = std::vector<LeafRecipe>;

/// A piece of a result: its shape and stride and the recipes of their leaves.
struct Part {
  IntTuple shape, stride;
  Recipes shapeLeaves, strideLeaves;
};

LeafRecipe constant(int64_t value) { return {LeafRecipe::Kind::Static, value, 0}; }

/// The recipe that reproduces operand leaf `source` (its value if static).
LeafRecipe copyOf(const IntTuple &leaf, size_t source) {
  if (leaf.isDynamic())
    return {LeafRecipe::Kind::Copy, 0, source};
  return constant(leaf.getValue());
}

/// A static layout as a part (every leaf a constant).
Part staticPart(const Layout &layout) {
  Part part{layout.getShape(), layout.getStride(), {}, {}};
  for (int64_t v : layout.getShape().flatten())
    part.shapeLeaves.push_back(constant(v));
  for (int64_t v : layout.getStride().flatten())
    part.strideLeaves.push_back(constant(v));
  return part;
}

/// A tuple of parts.
Part pack(const std::vector<Part> &parts) {
  std::vector<IntTuple> shapes, strides;
  Part result;
  for (const Part &p : parts) {
    shapes.push_back(p.shape);
    strides.push_back(p.stride);
    result.shapeLeaves.insert(result.shapeLeaves.end(), p.shapeLeaves.begin(), p.shapeLeaves.end());
    result.strideLeaves.insert(result.strideLeaves.end(), p.strideLeaves.begin(),
                               p.strideLeaves.end());
  }
  result.shape = IntTuple(shapes);
  result.stride = IntTuple(strides);
  return result;
}

/// Mode `mode` of the operand as a part, leaves copied; `first` numbers its first shape leaf
/// among the operand's leaves and `strideFirst` its first stride leaf.
Part modePart(const Layout &mode, size_t first, size_t strideFirst) {
  Part part{mode.getShape(), mode.getStride(), {}, {}};
  std::vector<IntTuple> shapeLeaves = mode.getShape().leaves();
  std::vector<IntTuple> strideLeaves = mode.getStride().leaves();
  for (size_t i = 0; i < shapeLeaves.size(); ++i)
    part.shapeLeaves.push_back(copyOf(shapeLeaves[i], first + i));
  for (size_t i = 0; i < strideLeaves.size(); ++i)
    part.strideLeaves.push_back(copyOf(strideLeaves[i], strideFirst + i));
  return part;
}

/// The tile size of a by-mode tiler entry that may divide a dynamic mode: n for n:1 or 1:0.
int64_t contiguousTile(const Layout &tile, size_t index, const Layout &layout) {
  const IntTuple &shape = tile.getShape(), &stride = tile.getStride();
  if (shape.isLeaf() && stride.isLeaf() && shape.isStatic() && stride.isStatic() &&
      (stride.getValue() == 1 || (stride.getValue() == 0 && shape.getValue() == 1)))
    return shape.getValue();
  throw LayoutError("mode " + std::to_string(index) + " of " + layout.str() +
                    " has run-time leaves; it can only be divided by a contiguous tile n:1, got " +
                    tile.str());
}

} // namespace

DynamicResult divideDynamic(const std::string &kind, const Layout &layout, const Tiler &tiler) {
  if (kind != "logical_divide" && kind != "zipped_divide" && kind != "tiled_divide" &&
      kind != "flat_divide")
    throw LayoutError(kind + " needs a static layout, but " + layout.str() +
                      " has run-time leaves ('?')");
  if (!tiler.byMode)
    throw LayoutError("a layout with run-time leaves (" + layout.str() +
                      ") can only be divided mode by mode by a tuple of tile sizes");
  std::vector<Layout> modes = layout.modes();
  if (tiler.modes.size() > modes.size())
    throw LayoutError("a tiler of " + std::to_string(tiler.modes.size()) + " modes for the rank-" +
                      std::to_string(modes.size()) + " layout " + layout.str());
  size_t shapeLeafCount = layout.getShape().leaves().size();
  std::vector<Part> tiles, rests;
  size_t first = 0;
  for (size_t i = 0; i < modes.size(); ++i) {
    const Layout &mode = modes[i];
    size_t leafCount = mode.getShape().leaves().size();
    size_t strideFirst = shapeLeafCount + first;
    if (i >= tiler.modes.size()) {
      rests.push_back(modePart(mode, first, strideFirst));
    } else if (mode.isStatic()) {
      Layout divided = logicalDivide(mode, Tiler(tiler.modes[i]));
      tiles.push_back(staticPart(divided[0]));
      rests.push_back(staticPart(divided[1]));
    } else {
      int64_t n = contiguousTile(tiler.modes[i], i, layout);
      if (!mode.getShape().isLeaf())
        throw LayoutError("mode " + std::to_string(i) + " of " + layout.str() +
                          " has run-time leaves and is not a single extent:stride");
      const IntTuple &s = mode.getShape(), &d = mode.getStride();
      Part tile{IntTuple(n), d, {constant(n)}, {copyOf(d, strideFirst)}};
      Part rest{s.isDynamic() ? IntTuple::dynamic() : IntTuple(ceilDiv(s.getValue(), n)),
                d.isDynamic() ? IntTuple::dynamic() : IntTuple(d.getValue() * n),
                {s.isDynamic() ? LeafRecipe{LeafRecipe::Kind::CeilDiv, n, first}
                               : constant(ceilDiv(s.getValue(), n))},
                {d.isDynamic() ? LeafRecipe{LeafRecipe::Kind::Mul, n, strideFirst}
                               : constant(d.getValue() * n)}};
      tiles.push_back(tile);
      rests.push_back(rest);
    }
    first += leafCount;
  }
  size_t n = tiler.modes.size();
  std::vector<Part> top;
  if (kind == "logical_divide") {
    for (size_t i = 0; i < n; ++i)
      top.push_back(pack({tiles[i], rests[i]}));
    top.insert(top.end(), rests.begin() + n, rests.end());
  } else if (kind == "zipped_divide") {
    top = {pack(tiles), pack(rests)};
  } else if (kind == "tiled_divide") {
    top.push_back(pack(tiles));
    top.insert(top.end(), rests.begin(), rests.end());
  } else { // flat_divide
    top = tiles;
    top.insert(top.end(), rests.begin(), rests.end());
  }
  Part result = pack(top);
  DynamicResult out{Layout(result.shape, result.stride), result.shapeLeaves};
  out.leaves.insert(out.leaves.end(), result.strideLeaves.begin(), result.strideLeaves.end());
  return out;
}

} // namespace cute::layout
