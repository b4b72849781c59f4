//===- PtxUtils.h - PTX text and ptxas report helpers ------------*- C++ -*-===//
//
// Plain string functions (no LLVM) so they can be unit tested on their own.
//
//===----------------------------------------------------------------------===//

#ifndef CUTE_TORCH_PTXUTILS_H
#define CUTE_TORCH_PTXUTILS_H

#include <map>
#include <string>

namespace cute_torch {

/// Per-kernel resource usage read off `ptxas -v` (or nvJitLink's info log).
struct KernelResources {
  bool reported = false; // the assembler's report named this kernel (spills are known)
  int registers = -1;
  int spillStores = 0, spillLoads = 0, stackFrame = 0;
  int staticSmem = 0;
};

/// Parses the "Compiling entry function 'k'" / "Used N registers" / "spill stores" lines.
std::map<std::string, KernelResources> parsePtxasReport(const std::string &report);

/// The bytes of spill stores over every kernel of a ptxas (or nvJitLink) -v report.
int totalSpillStores(const std::string &report);

} // namespace cute_torch

#endif // CUTE_TORCH_PTXUTILS_H
