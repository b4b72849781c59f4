//===- HostJit.cpp - host code to native entry points --------------------===//

#include "HostJit.h"

#include "Failure.h"

#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ExecutionEngine/Orc/CompileUtils.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/Host.h"

#include <atomic>
#include <mutex>

namespace cute_torch {
namespace {

[[noreturn]] void fail(const std::string &message) {
  throw CompileFailure{"jit", "JIT compilation of the host code failed: " + message, {}, {}, {}};
}

/// The target of host code: this process's triple, its generic CPU.
llvm::orc::JITTargetMachineBuilder hostTarget() {
  llvm::orc::JITTargetMachineBuilder builder{llvm::Triple(llvm::sys::getProcessTriple())};
  builder.setCodeGenOptLevel(llvm::CodeGenOptLevel::None);
  return builder;
}

/// The process's JIT, made on first use (never destroyed: artifacts may outlive statics).
llvm::orc::LLJIT &processJit() {
  static llvm::orc::LLJIT *jit = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto created = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(hostTarget()).create();
    if (!created)
      fail(llvm::toString(created.takeError()));
    return created->release();
  }();
  return *jit;
}

/// For each public function `f` of `names`, `_cute_packed_f(void **args)`: loads argument i
/// from *args[i], calls f and stores its result (if any) through args[n].
void addPackedEntries(llvm::Module &module, const std::vector<std::string> &names) {
  llvm::LLVMContext &context = module.getContext();
  llvm::IRBuilder<> b(context);
  for (const std::string &name : names) {
    llvm::Function *fn = module.getFunction(name);
    if (!fn)
      fail("no function '" + name + "' in the translated module");
    auto *type = llvm::FunctionType::get(b.getVoidTy(), b.getPtrTy(), /*isVarArg=*/false);
    auto *packed = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage,
                                          "_cute_packed_" + name, module);
    b.SetInsertPoint(llvm::BasicBlock::Create(context, "entry", packed));
    llvm::Value *argv = packed->getArg(0);
    auto slot = [&](unsigned i) {
      return b.CreateLoad(b.getPtrTy(), b.CreateConstGEP1_64(b.getPtrTy(), argv, i));
    };
    std::vector<llvm::Value *> args;
    for (llvm::Argument &arg : fn->args())
      args.push_back(b.CreateLoad(arg.getType(), slot(arg.getArgNo())));
    llvm::Value *result = b.CreateCall(fn, args);
    if (!result->getType()->isVoidTy())
      b.CreateStore(result, slot(unsigned(args.size())));
    b.CreateRetVoid();
  }
}

} // namespace

HostCode::~HostCode() {
  // The code goes with its JITDylib; an error here (the session ending) has nothing to free.
  llvm::consumeError(processJit().getExecutionSession().removeJITDylib(dylib));
}

std::unique_ptr<HostCode> jitHostModule(mlir::ModuleOp module,
                                        const std::vector<std::string> &names,
                                        const std::map<std::string, void *> &symbols) {
  llvm::orc::LLJIT &jit = processJit();
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> llvmModule = mlir::translateModuleToLLVMIR(module, context);
  if (!llvmModule)
    fail("the host module does not translate to LLVM IR");
  llvmModule->setDataLayout(jit.getDataLayout());
  llvmModule->setTargetTriple(jit.getTargetTriple().str());
  addPackedEntries(*llvmModule, names);
  // A machine per thread: code generation may run on several threads at once.
  thread_local std::unique_ptr<llvm::TargetMachine> machine;
  if (!machine) {
    auto created = hostTarget().createTargetMachine();
    if (!created)
      fail(llvm::toString(created.takeError()));
    machine = std::move(*created);
  }
  auto object = llvm::orc::SimpleCompiler(*machine)(*llvmModule);
  if (!object)
    fail(llvm::toString(object.takeError()));
  return loadHostObject((*object)->getBuffer(), names, symbols);
}

std::unique_ptr<HostCode> loadHostObject(llvm::StringRef object,
                                         const std::vector<std::string> &names,
                                         const std::map<std::string, void *> &symbols) {
  llvm::orc::LLJIT &jit = processJit();
  static std::atomic<uint64_t> modules{0};
  auto dylib = jit.createJITDylib("cute_host_" + std::to_string(modules++));
  if (!dylib)
    fail(llvm::toString(dylib.takeError()));
  auto code = std::make_unique<HostCode>(*dylib);
  code->object = object.str();
  llvm::orc::MangleAndInterner mangle(jit.getExecutionSession(), jit.getDataLayout());
  llvm::orc::SymbolMap runtime;
  for (const auto &[name, address] : symbols)
    runtime[mangle(name)] = {llvm::orc::ExecutorAddr::fromPtr(address),
                             llvm::JITSymbolFlags::Exported};
  if (auto error = dylib->define(llvm::orc::absoluteSymbols(std::move(runtime))))
    fail(llvm::toString(std::move(error)));
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      jit.getDataLayout().getGlobalPrefix());
  if (!process)
    fail(llvm::toString(process.takeError()));
  dylib->addGenerator(std::move(*process));
  if (auto error = jit.addObjectFile(
          *dylib, llvm::MemoryBuffer::getMemBuffer(code->object, "cute_host", false)))
    fail(llvm::toString(std::move(error)));
  for (const std::string &name : names) {
    auto entry = jit.lookup(*dylib, "_cute_packed_" + name);
    if (!entry)
      fail("host entry " + name + " not found: " + llvm::toString(entry.takeError()));
    code->entries[name] = entry->toPtr<void *>();
  }
  return code;
}

} // namespace cute_torch
