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

/// Parses ptxas's "Compiling entry function 'k'" / "Used N registers" / "spill stores" lines
/// and nvJitLink's link summary ("Function properties for 'k':" / "used N registers, ..., S
/// stack"). The summary alone (nvJitLink took the kernel from its own cache and ran no ptxas)
/// gives no spill counts: a kernel without a stack frame is reported (it cannot spill), one with
/// a stack frame is not (`stackFrame` set, its spills unknown).
std::map<std::string, KernelResources> parsePtxasReport(const std::string &report);

/// The bytes of spill stores over every kernel of a ptxas (or nvJitLink) -v report.
int totalSpillStores(const std::string &report);

/// Whether some kernel of the report has a stack frame whose spills the report does not give.
bool spillsUnknown(const std::string &report);

} // namespace cute_torch

#endif // CUTE_TORCH_PTXUTILS_H
