//===- CubinBackends.cpp - PTX -> CUBIN with ptxas or nvJitLink -----------===//
//
// ptxas runs as a subprocess; nvJitLink (the same assembler as a library) runs in process and
// is loaded with dlopen, so neither is a link-time dependency. Both report resource usage in
// ptxas's `-v` format, which PtxUtils parses. On failure the PTX is kept on disk and the error
// carries a command that reproduces it.
//
//===----------------------------------------------------------------------===//

#include "DeviceCodegen.h"
#include "Failure.h"
#include "PtxUtils.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <dlfcn.h>
#include <functional>
#include <mutex>

namespace cute_torch {

namespace {

std::string join(const std::vector<std::string> &parts) {
  std::string text;
  for (const std::string &part : parts)
    text += (text.empty() ? "" : " ") + part;
  return text;
}

std::string readFile(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

bool writeFile(const std::string &path, const std::string &data) {
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec);
  if (ec)
    return false;
  out << data;
  return true;
}

/// Keeps a PTX that failed to assemble where the user can find it.
std::string keepFailedPtx(const std::string &ptx, const CodegenOptions &options) {
  llvm::SmallString<256> dir(options.dumpDir);
  if (dir.empty()) {
    llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, dir);
    llvm::sys::path::append(dir, "cute_torch_failed");
  }
  llvm::sys::fs::create_directories(dir);
  llvm::SmallString<256> path;
  std::string model = std::string(dir) + "/" + options.name + "-%%%%%%.ptx";
  int fd;
  if (llvm::sys::fs::createUniqueFile(model, fd, path))
    return "";
  llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);
  out << ptx;
  return std::string(path);
}

std::vector<std::string> assemblerFlags(const CodegenOptions &options) {
  std::vector<std::string> flags = {"-arch=" + options.arch,
                                    "-O" + std::to_string(std::min(options.optLevel, 3)), "-v"};
  if (options.lineInfo)
    flags.push_back("-lineinfo");
  flags.insert(flags.end(), options.ptxasOptions.begin(), options.ptxasOptions.end());
  return flags;
}

std::string ptxasPath(const CodegenOptions &options) { return options.cudaHome + "/bin/ptxas"; }

std::string reproduceCommand(const CodegenOptions &options, const std::string &ptxPath) {
  std::vector<std::string> command = {ptxasPath(options)};
  for (const std::string &flag : assemblerFlags(options))
    command.push_back(flag);
  command.push_back(ptxPath.empty() ? "<ptx>" : ptxPath);
  command.push_back("-o");
  command.push_back("/tmp/out.cubin");
  return join(command);
}

[[noreturn]] void assemblyFailed(const std::string &ptx, const CodegenOptions &options,
                                 const std::string &who, const std::string &log) {
  std::string path = keepFailedPtx(ptx, options);
  throw CompileFailure{"ptxas",
                       who + " failed for " + options.arch + ":\n" + log + "\nPTX kept at: " +
                           path + "\nreproduce with: " + reproduceCommand(options, path),
                       {},
                       path,
                       reproduceCommand(options, path)};
}

std::string assembleWithPtxas(const std::string &ptx, const CodegenOptions &options,
                              std::string &report) {
  std::string ptxas = ptxasPath(options);
  if (!llvm::sys::fs::can_execute(ptxas))
    throw CompileFailure{"toolkit",
                         "CUDA toolkit not found: no executable ptxas at " + ptxas +
                             "; set CUDA_HOME to the CUDA toolkit root (it must contain "
                             "bin/ptxas)",
                         {},
                         {},
                         {}};
  llvm::SmallString<128> dir;
  if (llvm::sys::fs::createUniqueDirectory("cute-ptxas", dir))
    throw CompileFailure{"ptxas", "cannot create a temporary directory", {}, {}, {}};
  std::string in = std::string(dir) + "/module.ptx", out = std::string(dir) + "/module.cubin",
              log = std::string(dir) + "/ptxas.log";
  writeFile(in, ptx);

  std::vector<std::string> argv = {ptxas};
  for (const std::string &flag : assemblerFlags(options))
    argv.push_back(flag);
  argv.insert(argv.end(), {in, "-o", out});
  std::vector<llvm::StringRef> args(argv.begin(), argv.end());
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(log),
                                                llvm::StringRef(log)};
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects, 0, 0, &error);
  report = readFile(log);
  std::string cubin = rc == 0 ? readFile(out) : std::string();
  for (const std::string &file : {in, out, log})
    llvm::sys::fs::remove(file);
  llvm::sys::fs::remove(dir);
  if (rc != 0)
    assemblyFailed(ptx, options, "ptxas", error.empty() ? report : error + "\n" + report);
  return cubin;
}

/// nvJitLink's C API, resolved with dlsym (declared here so no header is needed).
struct NvJitLink {
  using Handle = void *;
  int (*create)(Handle *, uint32_t, const char **) = nullptr;
  int (*addData)(Handle, int, const void *, size_t, const char *) = nullptr;
  int (*complete)(Handle) = nullptr;
  int (*getCubinSize)(Handle, size_t *) = nullptr;
  int (*getCubin)(Handle, void *) = nullptr;
  int (*getErrorLogSize)(Handle, size_t *) = nullptr;
  int (*getErrorLog)(Handle, char *) = nullptr;
  int (*getInfoLogSize)(Handle, size_t *) = nullptr;
  int (*getInfoLog)(Handle, char *) = nullptr;
  int (*destroy)(Handle *) = nullptr;
  static constexpr int kInputPtx = 2;

  static const NvJitLink *load(const CodegenOptions &options) {
    static std::mutex mutex;
    static std::map<std::string, NvJitLink> loaded;
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<std::string> candidates;
    if (!options.nvJitLinkPath.empty())
      candidates.push_back(options.nvJitLinkPath);
    candidates.push_back(options.cudaHome + "/lib64/libnvJitLink.so");
    candidates.push_back(options.cudaHome + "/lib64/libnvJitLink.so.13");
    candidates.push_back("libnvJitLink.so.13");
    for (const std::string &path : candidates) {
      auto found = loaded.find(path);
      if (found != loaded.end())
        return &found->second;
      void *library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!library)
        continue;
      NvJitLink api;
      bool ok = resolve(library, "nvJitLinkCreate", api.create) &&
                resolve(library, "nvJitLinkAddData", api.addData) &&
                resolve(library, "nvJitLinkComplete", api.complete) &&
                resolve(library, "nvJitLinkGetLinkedCubinSize", api.getCubinSize) &&
                resolve(library, "nvJitLinkGetLinkedCubin", api.getCubin) &&
                resolve(library, "nvJitLinkGetErrorLogSize", api.getErrorLogSize) &&
                resolve(library, "nvJitLinkGetErrorLog", api.getErrorLog) &&
                resolve(library, "nvJitLinkGetInfoLogSize", api.getInfoLogSize) &&
                resolve(library, "nvJitLinkGetInfoLog", api.getInfoLog) &&
                resolve(library, "nvJitLinkDestroy", api.destroy);
      if (ok)
        return &loaded.emplace(path, api).first->second;
    }
    return nullptr;
  }

  template <typename Fn> static bool resolve(void *library, const char *name, Fn &fn) {
    fn = reinterpret_cast<Fn>(dlsym(library, name));
    return fn != nullptr;
  }

  std::string log(Handle handle, bool error) const {
    size_t size = 0;
    if ((error ? getErrorLogSize : getInfoLogSize)(handle, &size) != 0 || size == 0)
      return "";
    std::string text(size, '\0');
    (error ? getErrorLog : getInfoLog)(handle, text.data());
    while (!text.empty() && text.back() == '\0')
      text.pop_back();
    return text;
  }
};

std::string assembleWithNvJitLink(const NvJitLink &api, const std::string &ptx,
                                  const CodegenOptions &options, std::string &report) {
  std::vector<std::string> flags = assemblerFlags(options);
  // nvJitLink takes the optimization level itself and everything else for ptxas via -Xptxas.
  std::vector<std::string> linkFlags;
  for (const std::string &flag : flags) {
    if (flag.rfind("-arch=", 0) == 0 || flag.rfind("-O", 0) == 0 || flag == "-lineinfo")
      linkFlags.push_back(flag);
    else if (flag == "-v") {
      // -verbose alone reports only the link's summary per kernel (registers, stack), not
      // ptxas's spill counts, and -Xptxas=-v alone nothing (the GPU machine's nvJitLink).
      linkFlags.push_back("-verbose");
      linkFlags.push_back("-Xptxas=-v");
    } else
      linkFlags.push_back("-Xptxas=" + flag);
  }
  std::vector<const char *> argv;
  for (const std::string &flag : linkFlags)
    argv.push_back(flag.c_str());
  NvJitLink::Handle handle = nullptr;
  if (api.create(&handle, argv.size(), argv.data()) != 0)
    assemblyFailed(ptx, options, "nvJitLink", "nvJitLinkCreate rejected: " + join(linkFlags));
  std::string cubin;
  bool ok = api.addData(handle, NvJitLink::kInputPtx, ptx.data(), ptx.size(),
                        options.name.c_str()) == 0 &&
            api.complete(handle) == 0;
  report = api.log(handle, /*error=*/false);
  if (ok) {
    size_t size = 0;
    api.getCubinSize(handle, &size);
    cubin.resize(size);
    api.getCubin(handle, cubin.data());
  }
  std::string errors = ok ? "" : api.log(handle, /*error=*/true);
  api.destroy(&handle);
  if (!ok)
    assemblyFailed(ptx, options, "nvJitLink", errors);
  return cubin;
}

} // namespace

std::string assembleCubin(const std::string &ptx, const CodegenOptions &options,
                          std::string &backendUsed, std::string &report) {
  const std::string &backend = options.cubinBackend;
  if (backend != "auto" && backend != "ptxas" && backend != "nvjitlink")
    throw CompileFailure{"options",
                         "unknown cubin_backend '" + backend + "'; use auto, ptxas or nvjitlink",
                         {},
                         {},
                         {}};
  // Warp-specialized kernels (setmaxnreg) run at ptxas's register cap, where nvJitLink's
  // relocatable code costs registers: `auto` gives them ptxas's whole-program mode directly.
  const bool registerBound = ptx.find("setmaxnreg") != std::string::npos;
  if (backend == "auto" && registerBound && llvm::sys::fs::can_execute(ptxasPath(options))) {
    backendUsed = "ptxas";
    return assembleWithPtxas(ptx, options, report);
  }
  if (backend != "ptxas") {
    if (const NvJitLink *api = NvJitLink::load(options)) {
      backendUsed = "nvjitlink";
      std::string cubin = assembleWithNvJitLink(*api, ptx, options, report);
      // nvJitLink assembles relocatable code, which can cost a large kernel registers that
      // ptxas's whole-program mode keeps: when its cubin spills, `auto` takes ptxas's if that
      // spills less (a few ms more, only for kernels that spill). Where nvJitLink's log gives
      // no spill counts for a kernel that may spill (no ptxas lines: seen for kernels it
      // served quickly, 6 ms against ptxas's 134), `auto` takes ptxas's cubin and report, so
      // spills are known wherever ptxas runs. A ptxas that fails there (older than the PTX)
      // leaves nvJitLink's cubin.
      int spilled = totalSpillStores(report);
      bool unknown = spillsUnknown(report);
      if (backend == "auto" && (spilled > 0 || unknown) &&
          llvm::sys::fs::can_execute(ptxasPath(options))) {
        std::string ptxasReport, whole;
        try {
          whole = assembleWithPtxas(ptx, options, ptxasReport);
        } catch (const CompileFailure &) {
          return cubin;
        }
        if (unknown || totalSpillStores(ptxasReport) < spilled) {
          backendUsed = "ptxas";
          report = ptxasReport;
          return whole;
        }
      }
      return cubin;
    }
    if (backend == "nvjitlink")
      throw CompileFailure{"toolkit",
                           "cubin_backend=nvjitlink, but libnvJitLink.so cannot be loaded from " +
                               options.cudaHome +
                               "/lib64 or the library path; set CUDA_HOME or "
                               "CUTE_TORCH_NVJITLINK",
                           {},
                           {},
                           {}};
  }
  backendUsed = "ptxas";
  return assembleWithPtxas(ptx, options, report);
}

} // namespace cute_torch
