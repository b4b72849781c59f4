//===- DeviceCodegen.cpp - gpu.module -> LLVM IR -> PTX -------------------===//
//
// LLVM 19's NVPTX backend targets every supported arch natively, sm_90a included, and emits
// PTX 8.5 (what the NVVM dialect's Hopper ops need: wgmma, TMA, setmaxnreg, elect.sync).
// LLVM 19 knows no sm_100/sm_100a, so neither do we.
//
//===----------------------------------------------------------------------===//

#include "DeviceCodegen.h"

#include "Failure.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"

#include <chrono>
#include <mutex>
#include <set>
#include <tuple>

namespace cute_torch {

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

[[noreturn]] void fail(const std::string &kind, const std::string &message) {
  throw CompileFailure{kind, message, {}, {}, {}};
}

void initializeNVPTX() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

// The newest PTX ISA LLVM 19 emits; CUDA 12.5+ ptxas reads it for every arch we support.
constexpr const char *kPtxFeature = "+ptx85";

/// The archs we compile for (LLVM 19 knows no sm_100), in the order cute_compiler_archs()
/// lists them.
constexpr const char *kSupportedArchs[] = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"};

bool isSupportedArch(const std::string &arch) { return llvm::is_contained(kSupportedArchs, arch); }

std::unique_ptr<llvm::TargetMachine> createTargetMachine(const std::string &arch, int optLevel,
                                                         bool fmad) {
  initializeNVPTX();
  if (!isSupportedArch(arch))
    fail("options", "unsupported arch '" + arch + "'; supported: " + supportedArchList());
  std::string triple = "nvptx64-nvidia-cuda", error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    fail("codegen", "NVPTX target unavailable: " + error);
  auto level = optLevel <= 0   ? llvm::CodeGenOptLevel::None
               : optLevel == 1 ? llvm::CodeGenOptLevel::Less
               : optLevel == 2 ? llvm::CodeGenOptLevel::Default
                               : llvm::CodeGenOptLevel::Aggressive;
  // fmad: a float multiply and the add of its result may fuse into one fma (one rounding), as
  // nvcc and Triton compile by default; otherwise NVPTX writes mul.rn / add.rn, which ptxas
  // keeps apart. Off by default: docs/language.md says what it measured.
  llvm::TargetOptions targetOptions;
  targetOptions.AllowFPOpFusion = fmad ? llvm::FPOpFusion::Fast : llvm::FPOpFusion::Standard;
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, arch, kPtxFeature, targetOptions, std::nullopt, std::nullopt, level));
}

/// The NVPTX target machine for (arch, opt level, fmad), made once per thread: building one
/// (its subtarget's feature tables) cost more than the PTX emission of a small kernel. A
/// target machine serves any number of modules one after another.
llvm::TargetMachine &targetMachine(const std::string &arch, int optLevel, bool fmad) {
  thread_local std::map<std::tuple<std::string, int, bool>, std::unique_ptr<llvm::TargetMachine>>
      machines;
  std::unique_ptr<llvm::TargetMachine> &machine = machines[{arch, optLevel, fmad}];
  if (!machine)
    machine = createTargetMachine(arch, optLevel, fmad);
  return *machine;
}

/// Links the functions of libdevice the module calls (`__nv_*`, emitted for math ops) and
/// makes them internal so that the optimizer drops what is not used.
void linkLibdevice(llvm::Module &module, const std::string &cudaHome) {
  bool needed = false;
  std::set<std::string> ownDefinitions;
  for (llvm::Function &fn : module) {
    if (fn.isDeclaration() && fn.getName().starts_with("__nv_"))
      needed = true;
    else if (!fn.isDeclaration())
      ownDefinitions.insert(fn.getName().str());
  }
  if (!needed)
    return;
  std::string path = cudaHome + "/nvvm/libdevice/libdevice.10.bc";
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    fail("toolkit", "the module uses math functions from libdevice, but " + path +
                        " cannot be read; set CUDA_HOME to the CUDA toolkit root");
  auto libdevice = llvm::parseBitcodeFile((*buffer)->getMemBufferRef(), module.getContext());
  if (!libdevice)
    fail("toolkit", "cannot parse " + path + ": " + llvm::toString(libdevice.takeError()));
  (*libdevice)->setTargetTriple(module.getTargetTriple());
  (*libdevice)->setDataLayout(module.getDataLayout());
  if (llvm::Linker::linkModules(module, std::move(*libdevice), llvm::Linker::Flags::LinkOnlyNeeded))
    fail("codegen", "linking libdevice failed");
  for (llvm::Function &fn : module)
    if (!fn.isDeclaration() && !ownDefinitions.count(fn.getName().str()))
      fn.setLinkage(llvm::GlobalValue::InternalLinkage);
  // libdevice asks __nvvm_reflect("__CUDA_FTZ"); answer "no flush to zero".
  module.addModuleFlag(llvm::Module::Override, "nvvm-reflect-ftz", uint32_t(0));
}

void optimize(llvm::Module &module, llvm::TargetMachine &machine, int optLevel) {
  if (optLevel <= 0)
    return;
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder builder(&machine);
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::OptimizationLevel level = optLevel == 1   ? llvm::OptimizationLevel::O1
                                  : optLevel == 2 ? llvm::OptimizationLevel::O2
                                                  : llvm::OptimizationLevel::O3;
  builder.buildPerModuleDefaultPipeline(level).run(module, mam);
}

/// bf16 -> f32 extends of a vector's lanes become integer operations on the vector's 32-bit
/// words: the high lane of a word is already the top half of its float (and 0xffff0000), the
/// low lane shifts there (shl 16). LLVM would unpack each word (mov.b32 {lo, hi}) and select
/// cvt.f32.bf16 per lane, which ptxas makes PRMT + SHF for every high lane: 1.5 instructions a
/// lane instead of one, and the norm backwards convert x, dy and w twice a value (LayerNorm's
/// over 32768 bf16 columns: 27 SASS instructions a value in its loop, 24 so). Exact, NaNs
/// included.
void widenBf16Lanes(llvm::Module &module) {
  for (llvm::Function &fn : module) {
    llvm::SmallVector<llvm::FPExtInst *> extends;
    for (llvm::Instruction &inst : llvm::instructions(fn))
      if (auto *ext = llvm::dyn_cast<llvm::FPExtInst>(&inst))
        if (ext->getSrcTy()->isBFloatTy() && ext->getDestTy()->isFloatTy())
          extends.push_back(ext);
    // One bitcast of a vector to words per block that extends its lanes.
    llvm::DenseMap<std::pair<llvm::Value *, llvm::BasicBlock *>, llvm::Value *> words;
    for (llvm::FPExtInst *ext : extends) {
      auto *lane = llvm::dyn_cast<llvm::ExtractElementInst>(ext->getOperand(0));
      if (!lane)
        continue;
      auto *type = llvm::dyn_cast<llvm::FixedVectorType>(lane->getVectorOperandType());
      auto *index = llvm::dyn_cast<llvm::ConstantInt>(lane->getIndexOperand());
      if (!type || !index || type->getNumElements() % 2)
        continue;
      llvm::IRBuilder<> builder(ext);
      llvm::Value *&vector = words[{lane->getVectorOperand(), ext->getParent()}];
      if (!vector)
        vector = builder.CreateBitCast(
            lane->getVectorOperand(),
            llvm::FixedVectorType::get(builder.getInt32Ty(), type->getNumElements() / 2));
      uint64_t i = index->getZExtValue();
      llvm::Value *word = builder.CreateExtractElement(vector, i / 2);
      llvm::Value *bits =
          i % 2 ? builder.CreateAnd(word, 0xFFFF0000u) : builder.CreateShl(word, 16);
      ext->replaceAllUsesWith(builder.CreateBitCast(bits, builder.getFloatTy()));
      ext->eraseFromParent();
      if (lane->use_empty())
        lane->eraseFromParent();
    }
  }
}

std::string emitPtx(llvm::Module &module, llvm::TargetMachine &machine) {
  llvm::SmallString<0> ptx;
  llvm::raw_svector_ostream stream(ptx);
  llvm::legacy::PassManager pm;
  if (machine.addPassesToEmitFile(pm, stream, nullptr, llvm::CodeGenFileType::AssemblyFile))
    fail("codegen", "the NVPTX backend cannot emit assembly");
  pm.run(module);
  return std::string(ptx.str());
}

std::string printType(llvm::Type *type) {
  std::string text;
  llvm::raw_string_ostream stream(text);
  type->print(stream);
  return stream.str();
}

/// Registers, stack frame and static shared memory straight from the CUBIN (ELF), whatever the
/// assembler's report says (some nvJitLink builds report nothing). `.text.<kernel>` names the
/// kernel's symbol in sh_info; `.nv.info` holds (format 4, attribute, size, {symbol, value})
/// records, of which EIATTR_REGCOUNT (0x2f) and EIATTR_FRAME_SIZE (0x11) are read;
/// `.nv.shared.<kernel>` is the kernel's static shared memory.
void readCubinResources(const std::string &cubin,
                        std::map<std::string, KernelResources> &resources) {
  auto object = llvm::object::ELF64LEObjectFile::create(
      llvm::MemoryBufferRef(llvm::StringRef(cubin.data(), cubin.size()), "cubin"));
  if (!object) {
    llvm::consumeError(object.takeError());
    return;
  }
  constexpr uint8_t kFormatSized = 4, kRegCount = 0x2f, kFrameSize = 0x11;
  std::map<uint32_t, std::string> kernelBySymbol;
  llvm::StringRef info;
  for (const llvm::object::SectionRef &section : object->sections()) {
    llvm::Expected<llvm::StringRef> name = section.getName();
    if (!name) {
      llvm::consumeError(name.takeError());
      continue;
    }
    if (name->starts_with(".text.")) {
      auto header = object->getSection(section.getRawDataRefImpl());
      kernelBySymbol[header->sh_info] = name->drop_front(6).str();
    } else if (name->starts_with(".nv.shared.")) {
      resources[name->drop_front(11).str()].staticSmem = int(section.getSize());
    } else if (*name == ".nv.info") {
      if (llvm::Expected<llvm::StringRef> contents = section.getContents())
        info = *contents;
      else
        llvm::consumeError(contents.takeError());
    }
  }
  auto u16 = [&](size_t at) { return uint16_t(uint8_t(info[at]) | uint8_t(info[at + 1]) << 8); };
  auto u32 = [&](size_t at) { return uint32_t(u16(at)) | uint32_t(u16(at + 2)) << 16; };
  for (size_t at = 0; at + 4 <= info.size();) {
    uint8_t format = uint8_t(info[at]), attribute = uint8_t(info[at + 1]);
    size_t size = format == kFormatSized ? u16(at + 2) : 0;
    if (format == kFormatSized && size == 8 && at + 12 <= info.size()) {
      auto kernel = kernelBySymbol.find(u32(at + 4));
      if (kernel != kernelBySymbol.end()) {
        if (attribute == kRegCount)
          resources[kernel->second].registers = int(u32(at + 8));
        else if (attribute == kFrameSize)
          resources[kernel->second].stackFrame = int(u32(at + 8));
      }
    }
    at += 4 + size;
  }
}

/// Op-name prefixes and the first arch that has them. sm_90a features exist on sm_90a only.
struct ArchFeature {
  llvm::StringLiteral prefix, arch, what;
};
constexpr ArchFeature kArchFeatures[] = {
    {"nvvm.wgmma.", "sm_90a", "warpgroup MMA (wgmma)"},
    {"nvvm.setmaxregister", "sm_90a", "setmaxnreg"},
    {"nvgpu.warpgroup.", "sm_90a", "warpgroup MMA (wgmma)"},
    {"nvvm.cp.async.bulk.", "sm_90", "bulk and TMA copies"},
    {"nvvm.prefetch.tensormap", "sm_90", "TMA descriptor prefetch"},
    {"nvgpu.tma.", "sm_90", "TMA"},
    {"nvvm.mbarrier.arrive.expect_tx", "sm_90", "mbarrier transaction counts"},
    {"nvvm.mbarrier.try_wait", "sm_90", "mbarrier.try_wait"},
    {"nvvm.elect.sync", "sm_90", "elect.sync"},
    {"nvvm.stmatrix", "sm_90", "stmatrix"},
    {"nvvm.fence.proxy", "sm_90", "proxy fences"},
    {"nvvm.fence.mbarrier_init", "sm_90", "fence.mbarrier_init"},
    {"nvvm.fence.sc.cluster", "sm_90", "cluster fences"},
    {"nvvm.cluster.", "sm_90", "cluster barriers"},
    {"nvvm.read.ptx.sreg.cluster", "sm_90", "cluster registers"},
    {"nvvm.read.ptx.sreg.nclusterid", "sm_90", "cluster registers"},
    {"gpu.cluster_", "sm_90", "cluster registers"},
};

bool archHas(const std::string &arch, llvm::StringRef needed) {
  if (needed == "sm_90a")
    return arch == "sm_90a";
  return arch.compare(0, 5, needed.str()) >= 0; // sm_80 < sm_86 < sm_89 < sm_90 <= sm_90a
}

} // namespace

std::string supportedArchList() {
  std::string list;
  for (const char *arch : kSupportedArchs)
    list += (list.empty() ? "" : ",") + std::string(arch);
  return list;
}

mlir::LogicalResult checkArchSupport(mlir::ModuleOp module, const std::string &arch) {
  bool ok = true;
  for (auto gpuModule : module.getOps<mlir::gpu::GPUModuleOp>())
    gpuModule.walk([&](mlir::Operation *op) {
      llvm::StringRef name = op->getName().getStringRef();
      for (const ArchFeature &feature : kArchFeatures)
        if (name.starts_with(feature.prefix) && !archHas(arch, feature.arch)) {
          op->emitError() << feature.what << " (" << name << ") needs "
                          << (feature.arch == "sm_90a" ? "sm_90a, Hopper's arch-specific target"
                                                       : feature.arch.str() + " or newer")
                          << "; this module is compiled for " << arch;
          ok = false;
          break;
        }
    });
  return mlir::success(ok);
}

DeviceModule compileDeviceModule(mlir::gpu::GPUModuleOp gpuModule,
                                 const std::vector<std::string> &kernelNames,
                                 const CodegenOptions &options) {
  DeviceModule result;
  auto start = Clock::now();
  llvm::TargetMachine *machine = &targetMachine(options.arch, options.optLevel, options.fmad);

  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module =
      mlir::translateModuleToLLVMIR(gpuModule, context, gpuModule.getName());
  if (!module)
    fail("codegen", "translating gpu.module @" + gpuModule.getName().str() +
                        " to LLVM IR failed (see diagnostics)");
  module->setTargetTriple(machine->getTargetTriple().str());
  module->setDataLayout(machine->createDataLayout());
  linkLibdevice(*module, options.cudaHome);
  optimize(*module, *machine, options.optLevel);
  widenBf16Lanes(*module);
  if (options.keepLLVM) {
    llvm::raw_string_ostream stream(result.llvmIR);
    module->print(stream, nullptr);
  }
  const llvm::DataLayout &layout = module->getDataLayout();
  for (const std::string &name : kernelNames) {
    llvm::Function *fn = module->getFunction(name);
    if (!fn)
      fail("codegen", "kernel @" + name + " vanished during lowering");
    std::vector<ParamInfo> &params = result.params[name];
    for (llvm::Argument &arg : fn->args())
      params.push_back({printType(arg.getType()), unsigned(layout.getTypeAllocSize(arg.getType())),
                        unsigned(layout.getABITypeAlign(arg.getType()).value())});
  }
  result.llvmMs = msSince(start);

  start = Clock::now();
  result.ptx = emitPtx(*module, *machine);
  result.ptxMs = msSince(start);

  start = Clock::now();
  std::string report;
  result.cubin = assembleCubin(result.ptx, options, result.cubinBackend, report);
  result.resources = parsePtxasReport(report);
  readCubinResources(result.cubin, result.resources);
  result.cubinMs = msSince(start);
  return result;
}

} // namespace cute_torch
