//===- HostJit.cpp - host code to a native entry point --------------------===//

#include "HostJit.h"

#include "Failure.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "llvm/Support/TargetSelect.h"

#include <mutex>

namespace cute_torch {

std::unique_ptr<mlir::ExecutionEngine> jitHostModule(mlir::ModuleOp module, int optLevel,
                                                     const std::map<std::string, void *> &symbols) {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  mlir::ExecutionEngineOptions options;
  unsigned level = unsigned(std::clamp(optLevel, 0, 3));
  if (level > 0) // at O0 the IR goes to codegen as it is (an O0 pipeline would only cost time)
    options.transformer = mlir::makeOptimizingTransformer(level, 0, nullptr);
  options.jitCodeGenOptLevel = static_cast<llvm::CodeGenOptLevel>(level);
  options.enableGDBNotificationListener = false;
  options.enablePerfNotificationListener = false;
  auto engine = mlir::ExecutionEngine::create(module, options);
  if (!engine)
    throw CompileFailure{"jit",
                         "JIT compilation of the host code failed: " +
                             llvm::toString(engine.takeError()),
                         {},
                         {},
                         {}};
  (*engine)->registerSymbols([&](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap map;
    for (const auto &[name, address] : symbols)
      map[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(address),
                             llvm::JITSymbolFlags::Exported};
    return map;
  });
  return std::move(*engine);
}

} // namespace cute_torch
