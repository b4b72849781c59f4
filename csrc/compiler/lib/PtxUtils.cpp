//===- PtxUtils.cpp - ptxas report helpers --------------------------------===//

#include "PtxUtils.h"

#include <regex>
#include <sstream>

namespace cute_torch {

std::map<std::string, KernelResources> parsePtxasReport(const std::string &report) {
  static const std::regex function(R"(Compiling entry function '([^']+)')");
  static const std::regex properties(R"(Function properties for ([^\s:']+))");
  static const std::regex linked(R"(Function properties for '([^']+)')");
  static const std::regex stack(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex registers(R"(Used (\d+) registers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  static const std::regex summary(R"(used (\d+) registers,.* (\d+) stack,)");

  std::map<std::string, KernelResources> kernels;
  std::string current;
  bool inSummary = false;
  std::istringstream lines(report);
  std::string line;
  std::smatch match;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, match, linked)) {
      current = match[1];
      inSummary = true;
      KernelResources &info = kernels[current];
      info.summarizedOnly = !info.reported;
      continue;
    }
    if (std::regex_search(line, match, function) || std::regex_search(line, match, properties)) {
      current = match[1];
      inSummary = false;
      kernels[current].reported = true;
      kernels[current].summarizedOnly = false;
      continue;
    }
    if (current.empty())
      continue;
    KernelResources &info = kernels[current];
    if (inSummary) {
      if (info.summarizedOnly && std::regex_search(line, match, summary)) {
        info.stackFrame = std::stoi(match[2]);
        info.reported = info.stackFrame == 0;
        info.summarizedOnly = !info.reported;
      }
      continue;
    }
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

int totalSpillStores(const std::string &report) {
  int total = 0;
  for (const auto &[name, info] : parsePtxasReport(report))
    total += info.spillStores;
  return total;
}

bool spillsUnknown(const std::string &report) {
  for (const auto &[name, info] : parsePtxasReport(report))
    if (info.summarizedOnly)
      return true;
  return false;
}

} // namespace cute_torch
