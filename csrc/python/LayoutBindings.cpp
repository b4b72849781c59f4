//===- LayoutBindings.cpp - the layout algebra as cute_torch._C.layout ----===//
//
// Layouts cross as (shape, stride) pairs of nested Python tuples; `None` is CuTe's `_` and
// the string "?" a run-time leaf (only the rules for run-time leaves accept those).
// Tilers cross as (by_mode, [layout, ...]). Python keeps its own Layout objects (whose leaves
// may be run-time DSL values) and calls here for every static computation, so the algebra
// exists once. LayoutError becomes ValueError with CuTe's wording of what went wrong.
//
//===----------------------------------------------------------------------===//

#include "cute/Layout/Layout.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;
using namespace cute::layout;

namespace {

IntTuple toTuple(py::handle object) {
  if (object.is_none())
    return IntTuple::hole();
  if (py::isinstance<py::str>(object) && object.cast<std::string>() == "?")
    return IntTuple::dynamic();
  if (py::isinstance<py::tuple>(object) || py::isinstance<py::list>(object)) {
    std::vector<IntTuple> modes;
    for (py::handle item : object)
      modes.push_back(toTuple(item));
    return makeTuple(modes);
  }
  if (!py::isinstance<py::int_>(object))
    throw py::type_error("a layout leaf must be an int, got " +
                         std::string(py::str(py::type::of(object).attr("__name__"))));
  return IntTuple(object.cast<int64_t>());
}

py::object fromTuple(const IntTuple &tuple) {
  if (tuple.isHole())
    return py::none();
  if (tuple.isDynamic())
    return py::str("?");
  if (tuple.isLeaf())
    return py::int_(tuple.getValue());
  py::tuple result(tuple.rank());
  for (size_t i = 0; i < tuple.rank(); ++i)
    result[i] = fromTuple(tuple[i]);
  return result;
}

using PyLayout = std::pair<py::object, py::object>;

Layout toLayout(const PyLayout &pair) { return Layout(toTuple(pair.first), toTuple(pair.second)); }
PyLayout fromLayout(const Layout &layout) {
  return {fromTuple(layout.getShape()), fromTuple(layout.getStride())};
}

Tiler toTiler(bool byMode, const std::vector<PyLayout> &modes) {
  if (!byMode)
    return Tiler(toLayout(modes.at(0)));
  std::vector<Layout> layouts;
  for (const PyLayout &mode : modes)
    layouts.push_back(toLayout(mode));
  return Tiler(layouts);
}

/// Binds `Layout fn(Layout)` as `name((shape, stride)) -> (shape, stride)`.
void unary(py::module_ &m, const char *name, Layout (*fn)(const Layout &)) {
  m.def(name, [fn](const PyLayout &a) { return fromLayout(fn(toLayout(a))); });
}
void binary(py::module_ &m, const char *name, Layout (*fn)(const Layout &, const Layout &)) {
  m.def(name, [fn](const PyLayout &a, const PyLayout &b) {
    return fromLayout(fn(toLayout(a), toLayout(b)));
  });
}
void tiled(py::module_ &m, const char *name, Layout (*fn)(const Layout &, const Tiler &)) {
  m.def(name, [fn](const PyLayout &a, bool byMode, const std::vector<PyLayout> &tiler) {
    return fromLayout(fn(toLayout(a), toTiler(byMode, tiler)));
  });
}

} // namespace

void bindLayout(py::module_ &parent) {
  py::module_ m = parent.def_submodule("layout", "CuTe's layout algebra (the C++ library)");
  py::register_exception<LayoutError>(m, "LayoutError", PyExc_ValueError);

  m.def("compact_col_major",
        [](py::object shape) { return fromTuple(compactColMajor(toTuple(shape))); });
  m.def("shape_div",
        [](py::object a, py::object b) { return fromTuple(shapeDiv(toTuple(a), toTuple(b))); });
  m.def("idx2crd",
        [](int64_t index, py::object shape) { return fromTuple(idx2crd(index, toTuple(shape))); });
  m.def("crd2idx",
        [](py::object coord, const PyLayout &a) { return toLayout(a).crd2idx(toTuple(coord)); });
  m.def("cosize", [](const PyLayout &a) { return toLayout(a).cosize(); });

  unary(m, "filter", filter);
  unary(m, "filter_zeros", filterZeros);
  unary(m, "right_inverse", rightInverse);
  unary(m, "left_inverse", leftInverse);
  m.def("coalesce", [](const PyLayout &a, py::object profile) {
    Layout layout = toLayout(a);
    return fromLayout(profile.is_none() ? coalesce(layout) : coalesce(layout, toTuple(profile)));
  });
  m.def("complement", [](const PyLayout &a, std::optional<int64_t> cotarget) {
    Layout layout = toLayout(a);
    return fromLayout(cotarget ? complement(layout, *cotarget) : complement(layout));
  });
  binary(m, "blocked_product", blockedProduct);
  binary(m, "raked_product", rakedProduct);
  tiled(m, "composition", composition);
  tiled(m, "logical_divide", logicalDivide);
  tiled(m, "zipped_divide", zippedDivide);
  tiled(m, "tiled_divide", tiledDivide);
  tiled(m, "flat_divide", flatDivide);
  tiled(m, "logical_product", logicalProduct);
  tiled(m, "zipped_product", zippedProduct);
  tiled(m, "tiled_product", tiledProduct);
  tiled(m, "flat_product", flatProduct);
  m.def("make_ordered_layout", [](py::object shape, py::object order) {
    return fromLayout(makeOrderedLayout(toTuple(shape), toTuple(order)));
  });
  m.def("tile_to_shape", [](const PyLayout &block, py::object target, py::object order) {
    std::optional<IntTuple> ordering;
    if (!order.is_none())
      ordering = toTuple(order);
    return fromLayout(tileToShape(toLayout(block), toTuple(target), ordering));
  });
  m.def("recast", [](const PyLayout &a, int64_t oldBits, int64_t newBits) {
    return fromLayout(recast(toLayout(a), oldBits, newBits));
  });
  m.def("max_common_vector", [](const PyLayout &a, const PyLayout &b) {
    return maxCommonVector(toLayout(a), toLayout(b));
  });
  binary(m, "max_common_layout", maxCommonLayout);
  m.def("divide_dynamic",
        [](const std::string &kind, const PyLayout &a, const std::vector<PyLayout> &tiles) {
          std::vector<Layout> modes;
          for (const PyLayout &tile : tiles)
            modes.push_back(toLayout(tile));
          return fromLayout(divideDynamic(kind, toLayout(a), Tiler(modes)).layout);
        });
  m.def("swizzle", [](int bits, int base, int shift, int64_t offset) {
    return Swizzle{bits, base, shift}(offset);
  });
}
