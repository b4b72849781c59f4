//===- PythonEntry.cpp - a short path from Python to cute::pointwise -----===//
//
// torch.ops.cute.pointwise(...) goes through torch.ops' generic Python binding, which matches
// the schema and boxes every argument: about as long as the whole C++ op on a small tensor.
// cute_torch.ops.pointwise calls this instead: it unpacks the arguments itself and calls the
// same dispatcher op (autograd, device kernels and fake kernels all still apply). Tensor
// subclasses and active torch-function modes get NotImplemented back, and the caller takes
// the generic route, so __torch_function__ semantics are kept.
//
//===----------------------------------------------------------------------===//

#include "Pointwise.h"

#include <Python.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/dispatch/Dispatcher.h>

namespace {

/// pointwise(expr: str, inputs: tuple[Tensor, ...], out_dtype: torch.dtype | None)
PyObject *pointwiseEntry(PyObject *, PyObject *const *args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (nargs != 3 || !PyUnicode_Check(args[0]) || !PyTuple_Check(args[1]) ||
      at::impl::torch_function_mode_enabled())
    Py_RETURN_NOTIMPLEMENTED;
  Py_ssize_t size = 0;
  const char *text = PyUnicode_AsUTF8AndSize(args[0], &size);
  if (!text)
    return nullptr;
  std::vector<at::Tensor> inputs;
  const Py_ssize_t n = PyTuple_GET_SIZE(args[1]);
  inputs.reserve(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject *item = PyTuple_GET_ITEM(args[1], i);
    if (!THPVariable_CheckExact(item)) // subclasses may override __torch_function__
      Py_RETURN_NOTIMPLEMENTED;
    inputs.push_back(THPVariable_Unpack(item));
  }
  if (inputs.empty())
    Py_RETURN_NOTIMPLEMENTED;
  std::optional<c10::ScalarType> dtype;
  if (args[2] != Py_None) {
    if (!THPDtype_Check(args[2]))
      Py_RETURN_NOTIMPLEMENTED;
    dtype = reinterpret_cast<THPDtype *>(args[2])->scalar_type;
  }
  at::Tensor out;
  {
    pybind11::gil_scoped_release release;
    out = cute_torch::ops::pointwiseOp().call(c10::string_view(text, size), inputs, dtype);
  }
  return THPVariable_Wrap(std::move(out));
  END_HANDLE_TH_ERRORS
}

PyMethodDef entryDef = {"pointwise",
                        reinterpret_cast<PyCFunction>(reinterpret_cast<void *>(&pointwiseEntry)),
                        METH_FASTCALL, "pointwise(expr, inputs: tuple, out_dtype) -> Tensor"};

} // namespace

/// cute_torch.ops fetches the entry through ctypes.PyDLL (GIL held); a new reference.
extern "C" __attribute__((visibility("default"))) PyObject *cute_torch_pointwise_entry() {
  return PyCFunction_New(&entryDef, nullptr);
}
