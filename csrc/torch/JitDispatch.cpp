//===- JitDispatch.cpp - a @cute.jit call's memory-cache hit, in C++ ------===//
//
// A @cute.jit function without annotations, called again with plain torch tensors and Python
// scalars, is keyed, found and launched here in one call from Python. Keying in Python read
// five tensor attributes through torch's Python bindings (about 300 ns a tensor) and cost
// more than the launch; here a tensor is read from its at::Tensor. The key distinguishes what
// the Python key does (cute_torch/dsl/jit.py): dtype, shape, strides, 16-byte alignment and
// device of a tensor, the Python type of a scalar (an int only inside Int32's range).
//
// The Python memory cache stays the owner of every specialization and its LRU order
// (cute_torch/dsl/dispatch.py): it registers a specialization here on its second call, a hit
// here moves its entry to the most recent end, and an eviction there removes it here.
//
//===----------------------------------------------------------------------===//

#include "cute_torch/runtime.h"

#include <Python.h>
#include <torch/csrc/autograd/python_variable.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/SmallVector.h>

#include <cstring>
#include <string>
#include <unordered_map>

namespace {

using cute_torch::runtime::LoadedArtifact;

/// One registered specialization: its host entry and how its arguments are passed, one code
/// per argument: 'p' a pointer (a tensor's data), 'i' an integer, 'f' an f32, 'd' an f64.
struct Entry {
  PyObject *pythonKey; // the memory cache's key (owned), for the LRU touch and removal
  PyObject *owner;     // the Specialization (owned): keeps the entry's code and modules alive
  void (*entry)(void **);
  LoadedArtifact *artifact;
  std::string kinds;
  int device;
};

struct State {
  PyObject *touch;     // the memory cache's OrderedDict.move_to_end
  PyObject *cudaError; // cute_torch.CudaError: the Python path's error for a failed launch
  std::unordered_map<std::string, Entry> entries;
  std::string last; // the key of the last hit: a repeated call does not reorder the LRU
};

void appendBytes(std::string &key, const void *data, size_t size) {
  key.append(static_cast<const char *>(data), size);
}

/// Appends the key of `args` and fills one 8-byte slot per argument (a tensor's data pointer,
/// an int, a float as a double); false where an argument is not a strided torch.Tensor (or
/// nn.Parameter, whose Python key is the same) or a
/// Python bool, int (inside Int32's range) or float: the Python path handles those.
bool keyOf(PyObject *args, std::string &key, c10::SmallVectorImpl<int64_t> &slots) {
  const Py_ssize_t n = PyTuple_GET_SIZE(args);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject *arg = PyTuple_GET_ITEM(args, i);
    int64_t slot = 0;
    if (THPVariable_CheckExact(arg)) {
      const at::Tensor &t = THPVariable_Unpack(arg);
      if (!t.defined() || t.layout() != c10::kStrided || !t.has_storage())
        return false;
      key.push_back('T');
      key.push_back(static_cast<char>(t.scalar_type()));
      const int8_t rank = static_cast<int8_t>(t.dim());
      key.push_back(static_cast<char>(rank));
      appendBytes(key, t.sizes().data(), rank * sizeof(int64_t));
      appendBytes(key, t.strides().data(), rank * sizeof(int64_t));
      const auto address = reinterpret_cast<uintptr_t>(t.data_ptr());
      key.push_back(address % 16 == 0 ? 'a' : 'u');
      const int8_t device = t.is_cuda() ? t.get_device() : -1;
      key.push_back(static_cast<char>(device));
      slot = static_cast<int64_t>(address);
    } else if (PyBool_Check(arg)) {
      key.push_back('b');
      slot = arg == Py_True;
    } else if (PyLong_CheckExact(arg)) {
      int overflow = 0;
      const long long value = PyLong_AsLongLongAndOverflow(arg, &overflow);
      if (overflow || value < -(1LL << 31) || value >= (1LL << 31))
        return false;
      key.push_back('i');
      slot = value;
    } else if (PyFloat_CheckExact(arg)) {
      key.push_back('f');
      const double value = PyFloat_AS_DOUBLE(arg);
      std::memcpy(&slot, &value, sizeof value);
    } else {
      return false;
    }
    slots.push_back(slot);
  }
  return true;
}

/// Whether an argument keyOf took goes where the host function takes `kind`: a tensor as a
/// pointer, a bool or int as an integer, a float as an f32 or f64 (a handle's first call may
/// pass an int where a float was compiled: the slot would hold the wrong bits).
bool fits(PyObject *arg, char kind) {
  if (THPVariable_CheckExact(arg))
    return kind == 'p';
  if (PyFloat_CheckExact(arg))
    return kind == 'f' || kind == 'd';
  return kind == 'i';
}

State &stateOf(PyObject *capsule) {
  return *static_cast<State *>(PyCapsule_GetPointer(capsule, "cute_torch.jit_dispatch"));
}

/// call(args: tuple) -> bool: True if `args` hit a registered specialization and it ran.
PyObject *call(PyObject *capsule, PyObject *const *argv, Py_ssize_t nargs) {
  if (nargs != 1 || !PyTuple_Check(argv[0]) || at::impl::torch_function_mode_enabled())
    Py_RETURN_FALSE;
  State &state = stateOf(capsule);
  std::string key;
  c10::SmallVector<int64_t, 16> slots;
  if (!keyOf(argv[0], key, slots))
    Py_RETURN_FALSE;
  auto found = state.entries.find(key);
  if (found == state.entries.end())
    Py_RETURN_FALSE;
  const Entry &entry = found->second;
  if (key != state.last) {
    PyObject *moved = PyObject_CallOneArg(state.touch, entry.pythonKey);
    if (!moved)
      return nullptr;
    Py_DECREF(moved);
    state.last = key;
  }
  c10::SmallVector<void *, 16> pointers;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (entry.kinds[i] == 'f') { // an f32 is read from the slot's low half
      double value;
      std::memcpy(&value, &slots[i], sizeof value);
      const float narrow = static_cast<float>(value);
      slots[i] = 0;
      std::memcpy(&slots[i], &narrow, sizeof narrow);
    }
    pointers.push_back(&slots[i]);
  }
  const c10::Device device(c10::kCUDA, static_cast<c10::DeviceIndex>(entry.device));
  // Torch's current stream on the device; 0 where torch has no CUDA (the launch then fails as
  // it does on the Python path, with no driver).
  uintptr_t stream = 0;
  if (c10::impl::hasDeviceGuardImpl(c10::kCUDA)) {
    try {
      stream = reinterpret_cast<uintptr_t>(
          c10::impl::getDeviceGuardImpl(c10::kCUDA)->getStream(device).native_handle());
    } catch (const std::exception &e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
      return nullptr;
    }
  }
  // The owner is held across the launch: with the GIL released, another thread may evict
  // the entry, which must not unload the modules under it.
  PyObject *owner = entry.owner;
  Py_INCREF(owner);
  void (*hostEntry)(void **) = entry.entry;
  LoadedArtifact *artifact = entry.artifact;
  std::string error;
  PyThreadState *thread = PyEval_SaveThread();
  try {
    artifact->call(hostEntry, pointers.data(), device.index(), stream);
  } catch (const std::exception &e) { // CudaError, naming the kernel
    error = e.what();
  }
  PyEval_RestoreThread(thread);
  Py_DECREF(owner);
  if (!error.empty()) {
    PyErr_SetString(state.cudaError, error.c_str());
    return nullptr;
  }
  Py_RETURN_TRUE;
}

/// add(args, python_key, owner, entry, runtime, kinds: str, device) -> bool: registers the
/// specialization the memory cache keeps under `python_key` for calls keyed like `args`.
PyObject *add(PyObject *capsule, PyObject *const *argv, Py_ssize_t nargs) {
  if (nargs != 7 || !PyTuple_Check(argv[0]) || !PyUnicode_Check(argv[5])) {
    PyErr_SetString(PyExc_TypeError,
                    "add(args: tuple, python_key, owner, entry, runtime, kinds: str, device)");
    return nullptr;
  }
  State &state = stateOf(capsule);
  std::string key;
  c10::SmallVector<int64_t, 16> slots;
  const char *kinds = PyUnicode_AsUTF8(argv[5]);
  const auto entryAddress = PyLong_AsUnsignedLongLong(argv[3]);
  const auto runtimeAddress = PyLong_AsUnsignedLongLong(argv[4]);
  const long device = PyLong_AsLong(argv[6]);
  if (!kinds || PyErr_Occurred())
    return nullptr;
  if (!keyOf(argv[0], key, slots) || std::string(kinds).size() != slots.size())
    Py_RETURN_FALSE;
  for (size_t i = 0; i < slots.size(); ++i)
    if (!fits(PyTuple_GET_ITEM(argv[0], static_cast<Py_ssize_t>(i)), kinds[i]))
      Py_RETURN_FALSE;
  auto [it, inserted] = state.entries.try_emplace(key);
  if (!inserted) {
    Py_DECREF(it->second.pythonKey);
    Py_DECREF(it->second.owner);
  }
  Py_INCREF(argv[1]);
  Py_INCREF(argv[2]);
  it->second = Entry{argv[1],
                     argv[2],
                     reinterpret_cast<void (*)(void **)>(entryAddress),
                     reinterpret_cast<LoadedArtifact *>(runtimeAddress),
                     kinds,
                     static_cast<int>(device)};
  Py_RETURN_TRUE;
}

/// remove(python_key): drops what was registered under the memory cache's `python_key`.
PyObject *remove(PyObject *capsule, PyObject *const *argv, Py_ssize_t nargs) {
  if (nargs != 1) {
    PyErr_SetString(PyExc_TypeError, "remove(python_key)");
    return nullptr;
  }
  State &state = stateOf(capsule);
  for (auto it = state.entries.begin(); it != state.entries.end();) {
    const int same = PyObject_RichCompareBool(it->second.pythonKey, argv[0], Py_EQ);
    if (same != 1) {
      PyErr_Clear();
      ++it;
      continue;
    }
    if (it->first == state.last)
      state.last.clear();
    Py_DECREF(it->second.pythonKey);
    Py_DECREF(it->second.owner);
    it = state.entries.erase(it);
  }
  Py_RETURN_NONE;
}

void destroy(PyObject *capsule) {
  State *state = &stateOf(capsule);
  for (auto &[key, entry] : state->entries) {
    Py_DECREF(entry.pythonKey);
    Py_DECREF(entry.owner);
  }
  Py_DECREF(state->touch);
  Py_DECREF(state->cudaError);
  delete state;
}

PyMethodDef callDef = {"call", reinterpret_cast<PyCFunction>(reinterpret_cast<void *>(&call)),
                       METH_FASTCALL, "call(args: tuple) -> bool"};
PyMethodDef addDef = {"add", reinterpret_cast<PyCFunction>(reinterpret_cast<void *>(&add)),
                      METH_FASTCALL,
                      "add(args, python_key, owner, entry, runtime, kinds, device) -> bool"};
PyMethodDef removeDef = {"remove", reinterpret_cast<PyCFunction>(reinterpret_cast<void *>(&remove)),
                         METH_FASTCALL, "remove(python_key)"};

} // namespace

/// cute_torch.dsl.dispatch calls this through ctypes.PyDLL (GIL held): a new dispatch state
/// and its (call, add, remove) functions, bound to it; a new reference.
extern "C" __attribute__((visibility("default"))) PyObject *
cute_torch_jit_dispatch(PyObject *touch, PyObject *cudaError) {
  auto *state = new State{touch, cudaError, {}, {}};
  Py_INCREF(touch);
  Py_INCREF(cudaError);
  PyObject *capsule = PyCapsule_New(state, "cute_torch.jit_dispatch", &destroy);
  if (!capsule)
    return nullptr;
  PyObject *functions =
      Py_BuildValue("(NNN)", PyCFunction_New(&callDef, capsule), PyCFunction_New(&addDef, capsule),
                    PyCFunction_New(&removeDef, capsule));
  Py_DECREF(capsule);
  return functions;
}
