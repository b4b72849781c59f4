//===- PythonEntry.cpp - short paths from Python to the cute:: ops --------===//
//
// torch.ops.cute.X(...) goes through torch.ops' generic Python binding (pybind11's call, the
// torch-function checks, the schema's argument matching): about as long as a small C++ op
// itself. These entries call the same dispatcher ops (autograd, device kernels and fake
// kernels all still apply) with less in between: cute_torch.ops.pointwise's unpacks its three
// arguments itself; the one per operator (cute_torch_op_entry) converts positional arguments by
// the schema's types. Tensor subclasses, keyword arguments and active torch-function modes get
// NotImplemented back, and the caller takes the generic route, so __torch_function__ semantics
// are kept.
//
//===----------------------------------------------------------------------===//

#include "Pointwise.h"

#include <Python.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>

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

/// Appends `obj` as an argument of schema type `type` to `stack`; false where the generic route
/// must take the call (a tensor subclass, or a value the type does not take).
bool pushArgument(PyObject *obj, const c10::TypePtr &type, torch::jit::Stack &stack) {
  const bool optional = type->kind() == c10::TypeKind::OptionalType;
  if (optional && obj == Py_None) {
    stack.emplace_back();
    return true;
  }
  const c10::TypePtr &real =
      optional ? type->expectRef<c10::OptionalType>().getElementType() : type;
  if (real->kind() == c10::TypeKind::TensorType) {
    if (!THPVariable_CheckExact(obj))
      return false;
    stack.emplace_back(THPVariable_Unpack(obj));
    return true;
  }
  if (real->kind() == c10::TypeKind::ListType &&
      real->expectRef<c10::ListType>().getElementType()->kind() == c10::TypeKind::TensorType) {
    if (!PyList_Check(obj) && !PyTuple_Check(obj))
      return false;
    c10::List<at::Tensor> tensors;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    tensors.reserve(n);
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject *item = PySequence_Fast_GET_ITEM(obj, i);
      if (!THPVariable_CheckExact(item))
        return false;
      tensors.push_back(THPVariable_Unpack(item));
    }
    stack.emplace_back(std::move(tensors));
    return true;
  }
  for (const c10::TypePtr &contained : real->containedTypes()) // e.g. a list of tensors in a tuple
    if (contained->kind() == c10::TypeKind::TensorType)
      return false;
  try {
    stack.push_back(torch::jit::toIValue(pybind11::handle(obj), type));
  } catch (const std::exception &) {
    return false; // the generic route raises torch's own message
  }
  return true;
}

/// op(*args) for the operator in `self` (a capsule of its c10::OperatorHandle).
PyObject *operatorEntry(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (at::impl::torch_function_mode_enabled())
    Py_RETURN_NOTIMPLEMENTED;
  const auto *op = static_cast<const c10::OperatorHandle *>(PyCapsule_GetPointer(self, nullptr));
  if (!op)
    return nullptr;
  const std::vector<c10::Argument> &params = op->schema().arguments();
  if (static_cast<size_t>(nargs) > params.size())
    Py_RETURN_NOTIMPLEMENTED;
  torch::jit::Stack stack;
  stack.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (i < static_cast<size_t>(nargs)) {
      if (!pushArgument(args[i], params[i].real_type(), stack))
        Py_RETURN_NOTIMPLEMENTED;
    } else if (params[i].default_value()) {
      stack.push_back(*params[i].default_value());
    } else {
      Py_RETURN_NOTIMPLEMENTED;
    }
  }
  {
    pybind11::gil_scoped_release release;
    op->callBoxed(stack);
  }
  if (stack.size() == 1)
    return torch::jit::toPyObject(std::move(stack[0])).release().ptr();
  pybind11::tuple results(stack.size());
  for (size_t i = 0; i < stack.size(); ++i)
    results[i] = torch::jit::toPyObject(std::move(stack[i]));
  return results.release().ptr();
  END_HANDLE_TH_ERRORS
}

PyMethodDef operatorEntryDef = {
    "cute_op", reinterpret_cast<PyCFunction>(reinterpret_cast<void *>(&operatorEntry)),
    METH_FASTCALL, "op(*args) -> the op's result, or NotImplemented (take torch.ops' route)"};

} // namespace

/// cute_torch.ops fetches the entry through ctypes.PyDLL (GIL held); a new reference.
extern "C" __attribute__((visibility("default"))) PyObject *cute_torch_pointwise_entry() {
  return PyCFunction_New(&entryDef, nullptr);
}

/// The entry of operator `name`.`overload` ("cute::gemm", "" for the default overload); a new
/// reference, or None where the dispatcher has no such operator.
extern "C" __attribute__((visibility("default"))) PyObject *
cute_torch_op_entry(const char *name, const char *overload) {
  std::optional<c10::OperatorHandle> op = c10::Dispatcher::singleton().findSchema({name, overload});
  if (!op)
    Py_RETURN_NONE;
  // The handle lives as long as the process: the operators are never deregistered.
  PyObject *capsule = PyCapsule_New(new c10::OperatorHandle(*op), nullptr, nullptr);
  if (!capsule)
    return nullptr;
  PyObject *entry = PyCFunction_New(&operatorEntryDef, capsule);
  Py_DECREF(capsule);
  return entry;
}
