//===- Compiler.cpp - the compiler library's C API ------------------------===//
//
// Drives the stages of Pipeline.cpp over one MLIR module, keeps (and dumps) what was asked
// for, and packs the result into an artifact: CUBINs, JIT-compiled host entries, metadata.
//
//===----------------------------------------------------------------------===//

#include "cute_torch/compiler.h"

#include "DeviceCodegen.h"
#include "Failure.h"
#include "HostJit.h"
#include "Pipeline.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

using namespace cute_torch;

struct CuteArtifact {
  std::string metadata;
  std::vector<std::pair<std::string, std::string>> cubins; // gpu.module name, bytes
  std::map<std::string, std::string> stages;
  std::unique_ptr<cute_torch::HostCode> host;
  std::map<std::string, void *> entries;
};

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Options {
  CodegenOptions codegen;
  std::vector<std::string> keep;
  std::string sourceName = "<mlir>";
  bool parseOnly = false; // parse and keep the module as printed ("mlir"); compile nothing
  bool keeps(const std::string &stage) const {
    return std::find(keep.begin(), keep.end(), stage) != keep.end();
  }
};

/// The stages a compilation can keep (`keep`) and dump (`dump_dir`), in pipeline order, with
/// the dump file's extension. Python reads the names through cute_compiler_stages().
struct StageInfo {
  const char *name;
  const char *extension;
};
constexpr StageInfo kStages[] = {
    {"mlir", ".mlir"},          // the input, parsed
    {"nvvm", ".nvvm.mlir"},     // after the common and device passes
    {"llvm", ".ll"},            // LLVM IR of each gpu.module
    {"ptx", ".ptx"},            // PTX of each gpu.module
    {"cubin", ".cubin"},        // the first gpu.module's CUBIN
    {"host", ".host.mlir"},     // the host code after the host passes (LLVM dialect)
    {"host_object", ".host.o"}, // its object code (always kept: the disk cache stores it)
    {"sass", ".sass"},          // disassembled CUBINs (nvdisasm or cuobjdump)
};

const StageInfo *findStage(llvm::StringRef name) {
  for (const StageInfo &stage : kStages)
    if (name == stage.name)
      return &stage;
  return nullptr;
}

std::string stageList() {
  std::string list;
  for (const StageInfo &stage : kStages)
    list += (list.empty() ? "" : ",") + std::string(stage.name);
  return list;
}

[[noreturn]] void optionError(const std::string &message) {
  throw CompileFailure{"options", message, {}, {}, {}};
}

Options parseOptions(const char *text) {
  Options options;
  options.codegen.name = "module";
  const char *cudaHome = std::getenv("CUDA_HOME");
  options.codegen.cudaHome = cudaHome && *cudaHome ? cudaHome : "/usr/local/cuda";
  if (!text || !*text)
    return options;
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed)
    optionError("options are not valid JSON: " + llvm::toString(parsed.takeError()));
  const llvm::json::Object *object = parsed->getAsObject();
  if (!object)
    optionError("options must be a JSON object");
  static const std::set<std::string> known = {
      "arch",      "opt_level",     "fmad",           "ptxas_options", "line_info",
      "cuda_home", "cubin_backend", "nvjitlink_path", "nvdisasm_path", "keep",
      "dump_dir",  "name",          "source_name",    "parse_only"};
  for (const auto &entry : *object)
    if (!known.count(entry.first.str()))
      optionError("unknown option '" + entry.first.str() + "'");
  auto string = [&](const char *key, std::string &into) {
    if (const llvm::json::Value *value = object->get(key)) {
      if (!value->getAsString())
        optionError(std::string("option '") + key + "' must be a string");
      into = value->getAsString()->str();
    }
  };
  auto strings = [&](const char *key, std::vector<std::string> &into) {
    if (const llvm::json::Array *array = object->getArray(key))
      for (const llvm::json::Value &value : *array) {
        if (!value.getAsString())
          optionError(std::string("option '") + key + "' must be a list of strings");
        into.push_back(value.getAsString()->str());
      }
  };
  CodegenOptions &codegen = options.codegen;
  string("arch", codegen.arch);
  string("cuda_home", codegen.cudaHome);
  string("cubin_backend", codegen.cubinBackend);
  string("nvjitlink_path", codegen.nvJitLinkPath);
  string("nvdisasm_path", codegen.nvdisasmPath);
  string("dump_dir", codegen.dumpDir);
  string("name", codegen.name);
  string("source_name", options.sourceName);
  strings("ptxas_options", codegen.ptxasOptions);
  strings("keep", options.keep);
  if (const llvm::json::Value *level = object->get("opt_level")) {
    if (!level->getAsInteger() || *level->getAsInteger() < 0 || *level->getAsInteger() > 3)
      optionError("opt_level must be 0..3");
    codegen.optLevel = int(*level->getAsInteger());
  }
  auto boolean = [&](const char *key, bool &into) {
    if (const llvm::json::Value *value = object->get(key)) {
      if (!value->getAsBoolean())
        optionError(std::string("option '") + key + "' must be true or false");
      into = *value->getAsBoolean();
    }
  };
  boolean("line_info", codegen.lineInfo);
  boolean("fmad", codegen.fmad);
  boolean("parse_only", options.parseOnly);
  for (const std::string &stage : options.keep)
    if (!findStage(stage))
      optionError("unknown stage '" + stage + "' in keep; stages: " + stageList());
  codegen.keepLLVM = options.keeps("llvm");
  return options;
}

/// Collects every diagnostic of a compilation, notes included, with its location.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(mlir::MLIRContext &context)
      : handler(&context, [this](mlir::Diagnostic &diag) {
          record(diag);
          for (mlir::Diagnostic &note : diag.getNotes())
            record(note);
          return mlir::success();
        }) {}

  [[noreturn]] void fail(const std::string &kind, const std::string &what) {
    std::string message = what;
    for (const Diagnostic &d : diagnostics)
      message += "\n" + d.file + ":" + std::to_string(d.line) + ":" + std::to_string(d.col) + ": " +
                 d.severity + ": " + d.message;
    throw CompileFailure{kind, message, diagnostics, {}, {}};
  }

private:
  void record(mlir::Diagnostic &diag) {
    Diagnostic entry;
    if (auto file = fileLocation(diag.getLocation())) {
      entry.file = file.getFilename().str();
      entry.line = int(file.getLine());
      entry.col = int(file.getColumn());
    }
    switch (diag.getSeverity()) {
    case mlir::DiagnosticSeverity::Error:
      entry.severity = "error";
      break;
    case mlir::DiagnosticSeverity::Warning:
      entry.severity = "warning";
      break;
    case mlir::DiagnosticSeverity::Note:
      entry.severity = "note";
      break;
    case mlir::DiagnosticSeverity::Remark:
      entry.severity = "remark";
      break;
    }
    entry.message = diag.str();
    diagnostics.push_back(entry);
  }

  std::vector<Diagnostic> diagnostics;
  mlir::ScopedDiagnosticHandler handler;
};

std::string print(mlir::Operation *op) {
  std::string text;
  llvm::raw_string_ostream stream(text);
  op->print(stream);
  return stream.str();
}

void runPasses(mlir::ModuleOp module, DiagnosticCollector &diagnostics, const char *stage,
               mlir::PassManager &pm) {
  if (mlir::failed(pm.run(module)))
    diagnostics.fail("pass", std::string("the ") + stage + " stage of the pipeline failed");
}

/// What the launch sites say of a kernel's block and cluster dims, when they are constants
/// and all sites agree (otherwise the metadata says null).
struct LaunchShape {
  bool seen = false;
  std::optional<std::array<int64_t, 3>> block, cluster;
};

std::map<std::string, LaunchShape> collectLaunchShapes(mlir::ModuleOp module) {
  std::map<std::string, LaunchShape> shapes;
  module.walk([&](mlir::gpu::LaunchFuncOp launch) {
    std::optional<std::array<int64_t, 3>> block = std::array<int64_t, 3>{};
    mlir::gpu::KernelDim3 dims = launch.getBlockSizeOperandValues();
    int i = 0;
    for (mlir::Value v : {dims.x, dims.y, dims.z}) {
      auto cst = v.getDefiningOp<mlir::arith::ConstantIndexOp>();
      if (!cst) {
        block.reset();
        break;
      }
      (*block)[i++] = cst.value();
    }
    std::optional<std::array<int64_t, 3>> cluster = std::array<int64_t, 3>{1, 1, 1};
    if (auto attr = launch->getAttrOfType<mlir::DenseI32ArrayAttr>("cute.cluster"))
      if (attr.size() == 3)
        cluster = {attr[0], attr[1], attr[2]};
    LaunchShape &shape =
        shapes[launch.getKernelModuleName().str() + "::" + launch.getKernelName().str()];
    if (!shape.seen) {
      shape = {true, block, cluster};
      return;
    }
    if (shape.block != block)
      shape.block.reset();
    if (shape.cluster != cluster)
      shape.cluster.reset();
  });
  return shapes;
}

/// A number the assembler's report gave, or null when it gave none.
llvm::json::Value unknownUnless(bool known, int value) {
  return known ? llvm::json::Value(value) : llvm::json::Value(nullptr);
}

llvm::json::Value dimsJson(const std::optional<std::array<int64_t, 3>> &dims) {
  if (!dims)
    return nullptr;
  return llvm::json::Array{(*dims)[0], (*dims)[1], (*dims)[2]};
}

/// SASS of a CUBIN by `nvdisasm` (the given one, else the toolkit's) or the toolkit's
/// `cuobjdump`; a comment line where there is neither.
std::string disassemble(const std::string &cubin, const std::string &cudaHome,
                        const std::string &nvdisasm) {
  std::string tool;
  std::vector<std::string> flags;
  if (!nvdisasm.empty() && llvm::sys::fs::can_execute(nvdisasm)) {
    tool = nvdisasm;
    flags = {"-c"};
  } else if (llvm::sys::fs::can_execute(cudaHome + "/bin/nvdisasm")) {
    tool = cudaHome + "/bin/nvdisasm";
    flags = {"-c"};
  } else if (llvm::sys::fs::can_execute(cudaHome + "/bin/cuobjdump")) {
    tool = cudaHome + "/bin/cuobjdump";
    flags = {"--dump-sass"};
  } else {
    return "// no nvdisasm or cuobjdump under " + cudaHome + "/bin: SASS unavailable\n";
  }
  llvm::SmallString<128> in, out;
  llvm::sys::fs::createTemporaryFile("cute", "cubin", in);
  llvm::sys::fs::createTemporaryFile("cute", "sass", out);
  {
    std::error_code ec;
    llvm::raw_fd_ostream stream(in, ec);
    stream << cubin;
  }
  std::vector<llvm::StringRef> args = {tool};
  for (const std::string &flag : flags)
    args.push_back(flag);
  args.push_back(in);
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(out),
                                                llvm::StringRef(out)};
  llvm::sys::ExecuteAndWait(tool, args, std::nullopt, redirects);
  auto buffer = llvm::MemoryBuffer::getFile(out);
  std::string sass = buffer ? (*buffer)->getBuffer().str() : "";
  llvm::sys::fs::remove(in);
  llvm::sys::fs::remove(out);
  return sass;
}

void dumpStages(const CuteArtifact &artifact, const Options &options) {
  const std::string &dir = options.codegen.dumpDir;
  if (dir.empty())
    return;
  llvm::sys::fs::create_directories(dir);
  for (const auto &[stage, text] : artifact.stages) {
    std::error_code ec;
    llvm::raw_fd_ostream out(dir + "/" + options.codegen.name + findStage(stage)->extension, ec);
    if (!ec)
      out << text;
  }
}

const mlir::DialectRegistry &dialectRegistry() {
  static mlir::DialectRegistry *registry = [] {
    auto *r = new mlir::DialectRegistry();
    registerDialects(*r);
    return r;
  }();
  return *registry;
}

/// What a compilation runs in: a context and the pass managers of the stages, one set per
/// thread, reused. Loading the dialects into a fresh context, and building and freezing the
/// conversion patterns, were most of the parse and pass time on MLIR 19 (its NVVM and LLVM
/// dialects register hundreds of ops). Nothing of a compilation outlives it (codegen and the
/// JIT have their own LLVM contexts); it is renewed every kCompilesPerContext compilations so
/// that what they leave uniqued in the context (types, attributes, locations) stays bounded.
struct Compilation {
  mlir::MLIRContext context{dialectRegistry(), mlir::MLIRContext::Threading::DISABLED};
  mlir::PassManager common{&context}, device{&context}, deviceWithLineInfo{&context},
      host{&context};

  Compilation() {
    context.loadAllAvailableDialects();
    buildCommonPipeline(common);
    buildDevicePipeline(device, /*lineInfo=*/false);
    buildDevicePipeline(deviceWithLineInfo, /*lineInfo=*/true);
    buildHostPipeline(host);
  }
};

Compilation &compilation() {
  constexpr int kCompilesPerContext = 256;
  thread_local std::unique_ptr<Compilation> current;
  thread_local int compiles = 0;
  if (!current || ++compiles > kCompilesPerContext) {
    current.reset(); // the old context goes before the new one is built
    current = std::make_unique<Compilation>();
    compiles = 1;
  }
  return *current;
}

/// Name, argument and result types of every public host function (an llvm.func by now).
llvm::json::Array describeHostFunctions(mlir::ModuleOp module) {
  llvm::json::Array hostFunctions;
  auto spell = [](mlir::Type type) {
    std::string name;
    llvm::raw_string_ostream stream(name);
    type.print(stream);
    return stream.str();
  };
  for (auto func : module.getOps<mlir::LLVM::LLVMFuncOp>()) {
    if (func.isExternal() || func.isPrivate())
      continue;
    llvm::json::Array args;
    for (mlir::Type type : func.getFunctionType().getParams())
      args.push_back(spell(type));
    mlir::Type result = func.getFunctionType().getReturnType();
    hostFunctions.push_back(llvm::json::Object{
        {"name", func.getName().str()},
        {"args", std::move(args)},
        {"result", mlir::isa<mlir::LLVM::LLVMVoidType>(result) ? std::string() : spell(result)}});
  }
  return hostFunctions;
}

/// JIT-compiles the host module (LLVM dialect) and records its public functions' entries.
/// Host code only computes launch shapes and calls the runtime, so it is compiled without
/// optimization: that halves JIT time and costs nothing measurable per call.
void jitHostEntries(mlir::ModuleOp module, CuteArtifact &artifact,
                    const std::map<std::string, void *> &symbols) {
  std::vector<std::string> names;
  for (auto func : module.getOps<mlir::LLVM::LLVMFuncOp>())
    if (!func.isExternal() && !func.isPrivate())
      names.push_back(func.getName().str());
  if (names.empty())
    return;
  artifact.host = jitHostModule(module, names, symbols);
  artifact.entries = artifact.host->entries;
  artifact.stages["host_object"] = artifact.host->object; // what a disk-cache entry keeps
}

/// One compilation in progress: what the steps read and fill in.
struct Compile {
  const Options &options;
  const std::map<std::string, void *> &symbols;
  Compilation &stages;
  DiagnosticCollector diagnostics;
  std::unique_ptr<CuteArtifact> artifact = std::make_unique<CuteArtifact>();
  llvm::StringRef text;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::vector<KernelRef> kernels;
  std::map<std::string, LaunchShape> launches;
  llvm::json::Array kernelInfo, hostFunctions;
  llvm::json::Object timings;
  std::string cubinBackend;

  Compile(llvm::StringRef text, const Options &options,
          const std::map<std::string, void *> &symbols, Compilation &stages)
      : options(options), symbols(symbols), stages(stages), diagnostics(stages.context),
        text(text) {}
  void keep(const char *stage, std::string bytes) {
    if (options.keeps(stage))
      artifact->stages[stage] = std::move(bytes);
  }
  /// Keeps the module as printed now, printing it only where the stage is kept: a GEMM's
  /// module is a megabyte of text, and printing it cost each compile 20-30 ms a stage.
  void keepModule(const char *stage) {
    if (options.keeps(stage))
      artifact->stages[stage] = print(*module);
  }
};

void parseInput(Compile &c) {
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(c.text, c.options.sourceName),
                               llvm::SMLoc());
  mlir::ParserConfig config(&c.stages.context);
  c.module = mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, config);
  if (!c.module)
    c.diagnostics.fail("parse", "the MLIR input is invalid");
  c.keepModule("mlir");
  c.kernels = collectKernels(*c.module);
  c.launches = collectLaunchShapes(*c.module);
}

void runDevicePasses(Compile &c) {
  runPasses(*c.module, c.diagnostics, "common", c.stages.common);
  const std::string &arch = c.options.codegen.arch;
  if (mlir::failed(checkArchSupport(*c.module, arch)))
    c.diagnostics.fail("codegen", "the module uses instructions " + arch + " does not have");
  runPasses(*c.module, c.diagnostics, "device",
            c.options.codegen.lineInfo ? c.stages.deviceWithLineInfo : c.stages.device);
  c.keepModule("nvvm");
}

/// The metadata of one kernel of a compiled gpu.module.
/// A kernel the backend reported nothing for gets defaults (unknown resources, no params).
llvm::json::Object describeKernel(Compile &c, mlir::gpu::GPUModuleOp gpuModule,
                                  const std::string &name, DeviceModule &device) {
  size_t index = 0;
  while (!(c.kernels[index].module == gpuModule.getName() && c.kernels[index].name == name))
    ++index;
  llvm::json::Array params;
  for (const ParamInfo &param : device.params[name])
    params.push_back(
        llvm::json::Object{{"type", param.type}, {"size", param.size}, {"align", param.align}});
  const KernelResources &res = device.resources[name];
  const LaunchShape &shape = c.launches[gpuModule.getName().str() + "::" + name];
  return llvm::json::Object{
      {"index", int64_t(index)},
      {"module", gpuModule.getName().str()},
      {"name", name},
      {"params", std::move(params)},
      {"registers", res.registers},
      {"spill_stores", unknownUnless(res.reported, res.spillStores)},
      {"spill_loads", unknownUnless(res.reported, res.spillLoads)},
      {"stack_frame", unknownUnless(res.reported, res.stackFrame)},
      {"static_smem", res.staticSmem},
      {"block_dims", dimsJson(shape.block)},
      {"cluster_dims", dimsJson(shape.cluster)},
  };
}

/// LLVM IR, PTX and a CUBIN for each gpu.module; times its own parts (llvm, ptx, cubin).
void generateDeviceCode(Compile &c) {
  double llvmMs = 0, ptxMs = 0, cubinMs = 0;
  std::string llvmIR, ptx;
  for (auto gpuModule : c.module->getOps<mlir::gpu::GPUModuleOp>()) {
    std::vector<std::string> names;
    for (const KernelRef &kernel : c.kernels)
      if (kernel.module == gpuModule.getName())
        names.push_back(kernel.name);
    DeviceModule device;
    try {
      device = compileDeviceModule(gpuModule, names, c.options.codegen);
    } catch (CompileFailure &failure) {
      if (failure.diagnostics.empty() && failure.kind == "codegen")
        c.diagnostics.fail("codegen", failure.message);
      throw;
    }
    llvmMs += device.llvmMs;
    ptxMs += device.ptxMs;
    cubinMs += device.cubinMs;
    c.cubinBackend = device.cubinBackend;
    llvmIR += device.llvmIR;
    ptx += device.ptx;
    if (c.options.keeps("cubin") && !c.artifact->stages.count("cubin"))
      c.artifact->stages["cubin"] = device.cubin;
    if (c.options.keeps("sass"))
      c.artifact->stages["sass"] +=
          disassemble(device.cubin, c.options.codegen.cudaHome, c.options.codegen.nvdisasmPath);
    for (const std::string &name : names)
      c.kernelInfo.push_back(describeKernel(c, gpuModule, name, device));
    c.artifact->cubins.emplace_back(gpuModule.getName().str(), std::move(device.cubin));
  }
  c.keep("llvm", std::move(llvmIR));
  c.keep("ptx", std::move(ptx));
  c.timings["llvm"] = llvmMs;
  c.timings["ptx"] = ptxMs;
  c.timings["cubin"] = cubinMs;
}

void buildHost(Compile &c) {
  runPasses(*c.module, c.diagnostics, "host", c.stages.host);
  c.keepModule("host");
  c.hostFunctions = describeHostFunctions(*c.module);
  jitHostEntries(*c.module, *c.artifact, c.symbols);
}

/// The steps of a compilation in order, and the timing each reports under (none: it reports
/// its parts itself). The passes each step runs are in Pipeline.cpp.
struct Step {
  const char *timing;
  void (*run)(Compile &);
};
constexpr Step kSteps[] = {
    {"parse", parseInput},
    {"device_passes", runDevicePasses},
    {nullptr, generateDeviceCode},
    {"host", buildHost},
};

std::unique_ptr<CuteArtifact> compile(llvm::StringRef text, const Options &options,
                                      const std::map<std::string, void *> &symbols) {
  auto total = Clock::now();
  Compile c(text, options, symbols, compilation());
  for (const Step &step : kSteps) {
    auto start = Clock::now();
    step.run(c);
    if (step.timing)
      c.timings[step.timing] = msSince(start);
    if (options.parseOnly)
      break; // the printed module is all a parse-only compile asks for
  }
  c.timings["total"] = msSince(total);

  llvm::json::Array kept;
  for (const auto &entry : c.artifact->stages)
    kept.push_back(entry.first);
  llvm::json::Object metadata{
      {"arch", options.codegen.arch},       {"cubin_backend", c.cubinBackend},
      {"kernels", std::move(c.kernelInfo)}, {"host_functions", std::move(c.hostFunctions)},
      {"timings_ms", std::move(c.timings)}, {"stages", std::move(kept)},
  };
  c.artifact->metadata = llvm::formatv("{0}", llvm::json::Value(std::move(metadata))).str();
  dumpStages(*c.artifact, options);
  return std::move(c.artifact);
}

/// The names of the host functions the metadata lists.
std::vector<std::string> hostFunctionNames(const char *metadata) {
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(metadata);
  if (!parsed)
    throw CompileFailure{"parse",
                         "the cached metadata is invalid: " + llvm::toString(parsed.takeError()),
                         {},
                         {},
                         {}};
  std::vector<std::string> names;
  const llvm::json::Object *object = parsed->getAsObject();
  if (const llvm::json::Array *functions = object ? object->getArray("host_functions") : nullptr)
    for (const llvm::json::Value &function : *functions)
      if (const llvm::json::Object *fn = function.getAsObject())
        if (auto name = fn->getString("name"))
          names.push_back(name->str());
  return names;
}

/// Rebuilds an artifact from what the disk cache stored: the host code (its object, or the
/// host stage in the LLVM dialect, which is JIT-compiled again), the CUBINs and the metadata.
std::unique_ptr<CuteArtifact> load(llvm::StringRef hostCode, const char *metadata,
                                   std::vector<std::pair<std::string, std::string>> cubins,
                                   const std::map<std::string, void *> &symbols) {
  auto artifact = std::make_unique<CuteArtifact>();
  if (hostCode.starts_with("\x7f"
                           "ELF")) {
    artifact->host = loadHostObject(hostCode, hostFunctionNames(metadata), symbols);
    artifact->entries = artifact->host->entries;
    artifact->stages["host_object"] = hostCode.str();
  } else {
    // A context of its own, dialects loaded lazily: parsing the host module needs only the
    // LLVM dialect, and a disk hit (often a process's first) should not pay for
    // compilation()'s setup.
    mlir::MLIRContext context(dialectRegistry(), mlir::MLIRContext::Threading::DISABLED);
    DiagnosticCollector diagnostics(context);
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(hostCode, mlir::ParserConfig(&context));
    if (!module)
      diagnostics.fail("parse", "the cached host code is invalid");
    jitHostEntries(*module, *artifact, symbols);
    artifact->stages["host"] = hostCode.str();
  }
  artifact->metadata = metadata;
  artifact->cubins = std::move(cubins);
  return artifact;
}

char *copyString(const std::string &text) {
  char *copy = static_cast<char *>(std::malloc(text.size() + 1));
  std::memcpy(copy, text.c_str(), text.size() + 1);
  return copy;
}

std::string failureJson(const CompileFailure &failure) {
  llvm::json::Array diagnostics;
  for (const Diagnostic &d : failure.diagnostics)
    diagnostics.push_back(llvm::json::Object{{"file", d.file},
                                             {"line", d.line},
                                             {"col", d.col},
                                             {"severity", d.severity},
                                             {"message", d.message}});
  llvm::json::Object object{{"kind", failure.kind},
                            {"message", failure.message},
                            {"diagnostics", std::move(diagnostics)},
                            {"ptx_path", failure.ptxPath},
                            {"command", failure.command}};
  return llvm::formatv("{0}", llvm::json::Value(std::move(object))).str();
}

} // namespace

extern "C" {

CuteArtifact *cute_compile(const char *mlir, size_t mlirSize, const char *optionsJson,
                           const char *const *symbolNames, void *const *symbolAddresses,
                           size_t numSymbols, char **errorJson) {
  try {
    Options options = parseOptions(optionsJson);
    std::map<std::string, void *> symbols;
    for (size_t i = 0; i < numSymbols; ++i)
      symbols[symbolNames[i]] = symbolAddresses[i];
    return compile(llvm::StringRef(mlir, mlirSize), options, symbols).release();
  } catch (const CompileFailure &failure) {
    if (errorJson)
      *errorJson = copyString(failureJson(failure));
  } catch (const std::exception &e) {
    if (errorJson)
      *errorJson = copyString(failureJson({"internal", e.what(), {}, {}, {}}));
  }
  return nullptr;
}

CuteArtifact *cute_load_artifact(const char *hostMlir, size_t hostSize, const char *metadataJson,
                                 const void *const *cubins, const size_t *cubinSizes,
                                 const char *const *moduleNames, size_t numCubins,
                                 const char *const *symbolNames, void *const *symbolAddresses,
                                 size_t numSymbols, char **errorJson) {
  try {
    std::map<std::string, void *> symbols;
    for (size_t i = 0; i < numSymbols; ++i)
      symbols[symbolNames[i]] = symbolAddresses[i];
    std::vector<std::pair<std::string, std::string>> blobs;
    for (size_t i = 0; i < numCubins; ++i)
      blobs.emplace_back(moduleNames[i],
                         std::string(static_cast<const char *>(cubins[i]), cubinSizes[i]));
    return load(llvm::StringRef(hostMlir, hostSize), metadataJson, std::move(blobs), symbols)
        .release();
  } catch (const CompileFailure &failure) {
    if (errorJson)
      *errorJson = copyString(failureJson(failure));
  } catch (const std::exception &e) {
    if (errorJson)
      *errorJson = copyString(failureJson({"internal", e.what(), {}, {}, {}}));
  }
  return nullptr;
}

const char *cute_artifact_metadata(const CuteArtifact *artifact) {
  return artifact->metadata.c_str();
}

size_t cute_artifact_num_cubins(const CuteArtifact *artifact) { return artifact->cubins.size(); }

const void *cute_artifact_cubin(const CuteArtifact *artifact, size_t index, size_t *size,
                                const char **moduleName) {
  if (index >= artifact->cubins.size())
    return nullptr;
  const auto &[name, bytes] = artifact->cubins[index];
  if (size)
    *size = bytes.size();
  if (moduleName)
    *moduleName = name.c_str();
  return bytes.data();
}

const char *cute_artifact_stage(const CuteArtifact *artifact, const char *stage, size_t *size) {
  auto found = artifact->stages.find(stage);
  if (found == artifact->stages.end())
    return nullptr;
  if (size)
    *size = found->second.size();
  return found->second.data();
}

void *cute_artifact_host_entry(const CuteArtifact *artifact, const char *function) {
  auto found = artifact->entries.find(function);
  return found == artifact->entries.end() ? nullptr : found->second;
}

void cute_artifact_destroy(CuteArtifact *artifact) { delete artifact; }

void cute_free_string(char *string) { std::free(string); }

const char *cute_compiler_version(void) { return "cute_torch-compiler 0.2 (LLVM/MLIR 19)"; }

const char *cute_compiler_stages(void) {
  static const std::string list = stageList();
  return list.c_str();
}

const char *cute_compiler_archs(void) {
  static const std::string list = supportedArchList();
  return list.c_str();
}

} // extern "C"
