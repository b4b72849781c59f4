//===- PythonBuilder.cpp - calling the Python builder on a cache miss ----===//

#include "PythonBuilder.h"

#include <Python.h>
#include <c10/util/Exception.h>

namespace cute_torch::ops {
namespace {

PyObject *builder = nullptr; // owned; set once by cute_torch.ops, never released

/// The pending Python exception as (type name, message); clears it.
std::pair<std::string, std::string> takePythonError() {
  PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
  PyErr_Fetch(&type, &value, &trace);
  PyErr_NormalizeException(&type, &value, &trace);
  std::string name = type ? reinterpret_cast<PyTypeObject *>(type)->tp_name : "Exception";
  std::string message;
  if (value) {
    if (PyObject *text = PyObject_Str(value)) {
      if (const char *utf8 = PyUnicode_AsUTF8(text))
        message = utf8;
      Py_DECREF(text);
    }
  }
  PyErr_Clear();
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(trace);
  return {name, message};
}

[[noreturn]] void raisePythonError() {
  auto [type, message] = takePythonError();
  // Keep the kind the user would see from Python itself.
  if (type == "ValueError" || type.find("ExpressionError") != std::string::npos)
    TORCH_CHECK_VALUE(false, message);
  if (type == "TypeError")
    TORCH_CHECK_TYPE(false, message);
  if (type == "NotImplementedError")
    TORCH_CHECK_NOT_IMPLEMENTED(false, message);
  TORCH_CHECK(false, type, ": ", message);
}

PyObject *toPython(const BuilderArg &arg) {
  switch (arg.kind) {
  case BuilderArg::String:
    return PyUnicode_FromStringAndSize(arg.text.data(), static_cast<Py_ssize_t>(arg.text.size()));
  case BuilderArg::Int:
    return PyLong_FromLongLong(arg.number);
  case BuilderArg::Bool:
    return PyBool_FromLong(arg.number);
  case BuilderArg::None:
    break;
  }
  Py_RETURN_NONE;
}

} // namespace

BuilderResult callBuilder(const char *kind, const std::vector<BuilderArg> &args) {
  TORCH_CHECK(Py_IsInitialized(), "cute_torch ops need the Python interpreter to build kernels");
  PyGILState_STATE gil = PyGILState_Ensure();
  struct Release {
    PyGILState_STATE state;
    ~Release() { PyGILState_Release(state); }
  } release{gil};
  TORCH_CHECK(builder,
              "cute_torch ops: no kernel builder is installed; import cute_torch.ops (loading the "
              "library through torch.ops.load_library alone is not enough)");
  PyObject *tuple = PyTuple_New(static_cast<Py_ssize_t>(args.size() + 1));
  PyTuple_SET_ITEM(tuple, 0, PyUnicode_FromString(kind));
  for (size_t i = 0; i < args.size(); ++i)
    PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i + 1), toPython(args[i]));
  PyObject *result = PyObject_CallObject(builder, tuple);
  Py_DECREF(tuple);
  if (!result)
    raisePythonError();
  BuilderResult out;
  if (result == Py_None) {
    out.isNone = true;
  } else if (PyUnicode_Check(result)) {
    out.text = PyUnicode_AsUTF8(result);
  } else if (PyTuple_Check(result)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(result); ++i) {
      PyObject *item = PyTuple_GET_ITEM(result, i);
      if (!PyLong_Check(item))
        break;
      out.ints.push_back(static_cast<uintptr_t>(PyLong_AsUnsignedLongLong(item)));
    }
    Py_INCREF(result); // keeps the compiled kernel alive for the cache's (the process's) life
  }
  Py_DECREF(result);
  return out;
}

} // namespace cute_torch::ops

/// cute_torch.ops calls this through ctypes.PyDLL (which holds the GIL) after loading.
extern "C" __attribute__((visibility("default"))) void cute_torch_set_builder(PyObject *callable) {
  Py_XINCREF(callable);
  cute_torch::ops::builder = callable;
}
