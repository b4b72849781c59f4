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
  bool reported = false;       // the assembler's report named this kernel (spills are known)
  bool summarizedOnly = false; // only nvJitLink's link summary named it (spills unknown unless
                               // it gave a stack frame of 0)
  int registers = -1;
  int spillStores = 0, spillLoads = 0, stackFrame = 0;
  int staticSmem = 0;
};

/// Parses ptxas's "Compiling entry function 'k'" / "Used N registers" / "spill stores" lines
/// and nvJitLink's link summary ("Function properties for 'k':" / "used N registers, ..., S
/// stack"). The summary alone (no ptxas lines for the kernel) gives no spill counts: a kernel
/// whose summary gives a stack frame of 0 is reported (it cannot spill), any other is not.
std::map<std::string, KernelResources> parsePtxasReport(const std::string &report);

/// The bytes of spill stores over every kernel of a ptxas (or nvJitLink) -v report.
int totalSpillStores(const std::string &report);

/// Whether some kernel of the report may spill and the report does not say how much (named by
/// nvJitLink's summary only, with a stack frame or none given).
bool spillsUnknown(const std::string &report);

} // namespace cute_torch

#endif // CUTE_TORCH_PTXUTILS_H
