//===- PtxUtils.cpp - PTX text and ptxas report helpers ------------------===//

#include "PtxUtils.h"

#include <regex>
#include <sstream>

namespace cute_torch {

std::string minimumPtxVersion(const std::string &arch) {
  // Architecture-specific ("a") targets need PTX 8.0; LLVM 16 stops at 7.8.
  if (arch == "sm_90a")
    return "8.0";
  return "";
}

static bool replaceDirective(std::string &ptx, const std::string &directive,
                             const std::string &value) {
  size_t pos = 0;
  while ((pos = ptx.find(directive, pos)) != std::string::npos) {
    // Only a directive at the start of a line counts.
    if (pos == 0 || ptx[pos - 1] == '\n') {
      size_t end = ptx.find('\n', pos);
      if (end == std::string::npos)
        end = ptx.size();
      ptx.replace(pos, end - pos, directive + " " + value);
      return true;
    }
    pos += directive.size();
  }
  return false;
}

bool retargetPtx(std::string &ptx, const std::string &version, const std::string &target) {
  bool ok = true;
  if (!version.empty())
    ok &= replaceDirective(ptx, ".version", version);
  if (!target.empty()) {
    // `.target sm_90` may carry more after a comma (e.g. `, debug`): keep it.
    size_t pos = ptx.find("\n.target ");
    if (pos == std::string::npos)
      return false;
    size_t begin = pos + 9, end = begin;
    while (end < ptx.size() && ptx[end] != ',' && ptx[end] != '\n')
      ++end;
    ptx.replace(begin, end - begin, target);
  }
  return ok;
}

std::map<std::string, KernelResources> parsePtxasReport(const std::string &report) {
  static const std::regex function(R"(Compiling entry function '([^']+)')");
  static const std::regex properties(R"(Function properties for ([^\s:]+))");
  static const std::regex stack(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex registers(R"(Used (\d+) registers)");
  static const std::regex smem(R"((\d+) bytes smem)");

  std::map<std::string, KernelResources> kernels;
  std::string current;
  std::istringstream lines(report);
  std::string line;
  std::smatch match;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, match, function) || std::regex_search(line, match, properties)) {
      current = match[1];
      kernels[current].reported = true;
      continue;
    }
    if (current.empty())
      continue;
    KernelResources &info = kernels[current];
    if (std::regex_search(line, match, stack)) {
      info.stackFrame = std::stoi(match[1]);
      info.spillStores = std::stoi(match[2]);
      info.spillLoads = std::stoi(match[3]);
    }
    if (std::regex_search(line, match, registers)) {
      info.registers = std::stoi(match[1]);
      if (std::regex_search(line, match, smem))
        info.staticSmem = std::stoi(match[1]);
    }
  }
  return kernels;
}

} // namespace cute_torch
