//===- module.cpp - cute_torch._C: the compiler's C API and the runtime ---===//
//
// Thin: compile MLIR text into an Artifact (CUBINs + JIT host entries + metadata), load it into
// the runtime, and call its host functions with Python arguments packed as the host ABI wants.
//
//===----------------------------------------------------------------------===//

#include "cute_torch/compiler.h"
#include "cute_torch/runtime.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <map>
#include <memory>

namespace py = pybind11;
using namespace cute_torch::runtime;

namespace {

/// How one argument of a host function is passed: its slot's width and kind.
enum class ArgKind { Int, Float32, Float64, Pointer };

struct HostFunction {
  void (*entry)(void **) = nullptr;
  std::vector<ArgKind> args;
  std::vector<std::string> typeNames;
};

ArgKind argKind(const std::string &type) {
  if (type == "f32")
    return ArgKind::Float32;
  if (type == "f64")
    return ArgKind::Float64;
  if (type.rfind("!llvm.ptr", 0) == 0)
    return ArgKind::Pointer;
  if (type == "i1" || type == "i8" || type == "i16" || type == "i32" || type == "i64")
    return ArgKind::Int;
  throw std::invalid_argument("host functions cannot take arguments of type " + type +
                              " yet; use iN, f32, f64 or !llvm.ptr");
}

/// The device address of a Python object: an int, a torch tensor (data_ptr()), or anything
/// with __cuda_array_interface__.
uint64_t pointerOf(const py::handle &value) {
  if (py::isinstance<py::int_>(value))
    return value.cast<uint64_t>();
  if (py::hasattr(value, "data_ptr"))
    return value.attr("data_ptr")().cast<uint64_t>();
  if (py::hasattr(value, "__cuda_array_interface__"))
    return py::tuple(value.attr("__cuda_array_interface__")["data"])[0].cast<uint64_t>();
  throw py::type_error("expected a pointer: an int, a tensor or an object with "
                       "__cuda_array_interface__, got " +
                       std::string(py::str(py::type::of(value))));
}

class Artifact {
public:
  explicit Artifact(CuteArtifact *handle) : handle(handle) {
    py::dict meta = py::module_::import("json").attr("loads")(metadata());
    std::vector<KernelDesc> kernels;
    for (py::handle kernel : meta["kernels"])
      kernels.push_back({kernel["module"].cast<std::string>(), kernel["name"].cast<std::string>()});
    std::map<std::string, std::string> cubins;
    for (size_t i = 0; i < cute_artifact_num_cubins(handle); ++i) {
      size_t size = 0;
      const char *name = nullptr;
      const void *data = cute_artifact_cubin(handle, i, &size, &name);
      cubins[name] = std::string(static_cast<const char *>(data), size);
    }
    loaded = std::make_unique<LoadedArtifact>(std::move(cubins), std::move(kernels));
    for (py::handle fn : meta["host_functions"]) {
      std::string name = fn["name"].cast<std::string>();
      HostFunction &host = functions[name];
      host.entry =
          reinterpret_cast<void (*)(void **)>(cute_artifact_host_entry(handle, name.c_str()));
      for (py::handle type : fn["args"]) {
        host.typeNames.push_back(type.cast<std::string>());
        host.args.push_back(argKind(host.typeNames.back()));
      }
    }
  }
  ~Artifact() {
    loaded.reset(); // Unload modules before the JIT'd code goes away.
    cute_artifact_destroy(handle);
  }

  std::string metadata() const { return cute_artifact_metadata(handle); }

  int maxActiveClusters(int kernel, std::array<uint32_t, 3> block, std::array<uint32_t, 3> cluster,
                        uint32_t smem, int device) {
    py::gil_scoped_release release;
    return loaded->maxActiveClusters(kernel, {block[0], block[1], block[2]},
                                     {cluster[0], cluster[1], cluster[2]}, smem, device);
  }

  py::list cubins() const {
    py::list result;
    for (size_t i = 0; i < cute_artifact_num_cubins(handle); ++i) {
      size_t size = 0;
      const char *name = nullptr;
      const void *data = cute_artifact_cubin(handle, i, &size, &name);
      result.append(py::make_tuple(name, py::bytes(static_cast<const char *>(data), size)));
    }
    return result;
  }

  py::object stage(const std::string &name) const {
    size_t size = 0;
    const char *data = cute_artifact_stage(handle, name.c_str(), &size);
    if (!data)
      return py::none();
    return py::bytes(data, size);
  }

  void call(const std::string &name, const py::sequence &args, int device, uintptr_t stream) {
    auto found = functions.find(name);
    if (found == functions.end())
      throw py::key_error("no host function '" + name + "' in this artifact");
    const HostFunction &fn = found->second;
    if (size_t(py::len(args)) != fn.args.size())
      throw py::type_error(name + "() takes " + std::to_string(fn.args.size()) +
                           " arguments, got " + std::to_string(py::len(args)));
    std::vector<uint64_t> slots(fn.args.size());
    std::vector<void *> pointers(fn.args.size());
    for (size_t i = 0; i < fn.args.size(); ++i) {
      py::handle value = args[i];
      void *slot = &slots[i];
      try {
        switch (fn.args[i]) {
        case ArgKind::Int:
          *static_cast<int64_t *>(slot) = value.cast<int64_t>();
          break;
        case ArgKind::Float32:
          *static_cast<float *>(slot) = value.cast<float>();
          break;
        case ArgKind::Float64:
          *static_cast<double *>(slot) = value.cast<double>();
          break;
        case ArgKind::Pointer:
          *static_cast<uint64_t *>(slot) = pointerOf(value);
          break;
        }
      } catch (const py::cast_error &) {
        throw py::type_error(name + "(): argument " + std::to_string(i) + " must be " +
                             fn.typeNames[i] + ", got " +
                             std::string(py::str(py::type::of(value))));
      }
      pointers[i] = slot;
    }
    py::gil_scoped_release release;
    loaded->call(fn.entry, pointers.data(), device, stream);
  }

  /// For native callers (the torch extension): the packed host entry of `name` and the
  /// runtime's LoadedArtifact, valid while this Artifact lives.
  uintptr_t hostEntryAddress(const std::string &name) const {
    auto found = functions.find(name);
    if (found == functions.end())
      throw py::key_error("no host function '" + name + "' in this artifact");
    return reinterpret_cast<uintptr_t>(found->second.entry);
  }
  uintptr_t runtimeAddress() const { return reinterpret_cast<uintptr_t>(loaded.get()); }

private:
  CuteArtifact *handle;
  std::unique_ptr<LoadedArtifact> loaded;
  std::map<std::string, HostFunction> functions;
};

/// What host code may call: the runtime's launch and TMA-descriptor entries.
const char *const hostSymbolNames[] = {"cute_rt_launch", "cute_rt_encode_tma"};
void *const hostSymbolAddresses[] = {reinterpret_cast<void *>(&cute_rt_launch),
                                     reinterpret_cast<void *>(&cute_rt_encode_tma)};
constexpr int kHostSymbolCount = 2;

py::tuple artifactOrError(CuteArtifact *handle, char *error) {
  if (!handle) {
    std::string message = error ? error : "{}";
    cute_free_string(error);
    return py::make_tuple(py::none(), message);
  }
  return py::make_tuple(std::make_shared<Artifact>(handle), py::none());
}

/// Compiles MLIR text. Returns (Artifact, None) or (None, error JSON).
py::tuple compile(const std::string &mlir, const std::string &options) {
  char *error = nullptr;
  CuteArtifact *handle;
  {
    py::gil_scoped_release release;
    handle = cute_compile(mlir.data(), mlir.size(), options.c_str(), hostSymbolNames,
                          hostSymbolAddresses, kHostSymbolCount, &error);
  }
  return artifactOrError(handle, error);
}

/// Rebuilds an artifact from cached host code (its ELF object or its host stage), metadata and
/// [(module name, CUBIN)].
py::tuple load(const std::string &host, const std::string &metadata, const py::list &cubins) {
  std::vector<std::string> names, blobs;
  for (py::handle entry : cubins) {
    py::tuple pair = entry.cast<py::tuple>();
    names.push_back(pair[0].cast<std::string>());
    blobs.push_back(pair[1].cast<std::string>());
  }
  std::vector<const char *> namePtrs;
  std::vector<const void *> blobPtrs;
  std::vector<size_t> sizes;
  for (size_t i = 0; i < names.size(); ++i) {
    namePtrs.push_back(names[i].c_str());
    blobPtrs.push_back(blobs[i].data());
    sizes.push_back(blobs[i].size());
  }
  char *error = nullptr;
  CuteArtifact *handle;
  {
    py::gil_scoped_release release;
    handle = cute_load_artifact(host.data(), host.size(), metadata.c_str(), blobPtrs.data(),
                                sizes.data(), namePtrs.data(), names.size(), hostSymbolNames,
                                hostSymbolAddresses, kHostSymbolCount, &error);
  }
  return artifactOrError(handle, error);
}

} // namespace

void bindLayout(py::module_ &parent); // LayoutBindings.cpp

PYBIND11_MODULE(_C, m) {
  m.doc() = "cute_torch native module: the compiler library and the runtime";
  py::register_exception<CudaError>(m, "CudaError", PyExc_RuntimeError);

  py::class_<Artifact, std::shared_ptr<Artifact>>(m, "Artifact")
      .def_property_readonly("metadata", &Artifact::metadata)
      .def("cubins", &Artifact::cubins, "[(gpu.module name, CUBIN bytes)]")
      .def("stage", &Artifact::stage, "A kept stage's bytes, or None")
      .def("call", &Artifact::call, py::arg("function"), py::arg("args"), py::arg("device"),
           py::arg("stream"), "Run a host function; its launches go to `stream` on `device`")
      .def("host_entry_address", &Artifact::hostEntryAddress, py::arg("function"),
           "Address of a host function's packed entry, void entry(void **args)")
      .def("max_active_clusters", &Artifact::maxActiveClusters, py::arg("kernel"), py::arg("block"),
           py::arg("cluster"), py::arg("smem"), py::arg("device"),
           "Clusters of one kernel that can run at once (cuOccupancyMaxActiveClusters)")
      .def("runtime_address", &Artifact::runtimeAddress,
           "Address of the runtime's LoadedArtifact (cute_torch::runtime) that launches it");

  m.def("compile", &compile, py::arg("mlir"), py::arg("options_json"));
  m.def("load", &load, py::arg("host_code"), py::arg("metadata_json"), py::arg("cubins"),
        "Rebuild an artifact from kept host code (its object, or its host stage), metadata and "
        "CUBINs");
  m.def("compiler_version", [] { return std::string(cute_compiler_version()); });
  m.def(
      "compiler_stages", [] { return std::string(cute_compiler_stages()); },
      "The stages `keep` accepts, in pipeline order, comma-separated");
  m.def(
      "compiler_archs", [] { return std::string(cute_compiler_archs()); },
      "The archs the compiler targets, comma-separated");
  m.def("driver_available", [] {
    std::string why;
    bool ok = driverAvailable(&why);
    return py::make_tuple(ok, why);
  });
  m.def("device_arch", &deviceArch, py::arg("device"));
  m.def("device_count", &deviceCount);
  bindLayout(m);
}
