//===- cute-compile.cpp - compile an MLIR file and print a stage ----------===//
//
//   cute-compile input.mlir [--arch=sm_90a] [--emit=ptx|llvm|nvvm|host|mlir|sass|metadata]
//                [--backend=auto|ptxas|nvjitlink] [-O<n>] [--dump-dir=DIR] [--line-info]
//
// Uses the compiler library's C API, exactly as the Python module does. Errors go to stderr
// as the JSON the API returns; the exit code is 1.
//
//===----------------------------------------------------------------------===//

#include "cute_torch/compiler.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

static std::string quote(const std::string &text) {
  std::string out = "\"";
  for (char c : text)
    out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return out + "\"";
}

// Host code calls the runtime to launch; this tool never runs it, only links it.
extern "C" int cute_rt_launch(int, long, long, long, long, long, long, int, int, int, int,
                              void **) {
  std::fprintf(stderr, "cute-compile compiles only; it does not launch kernels\n");
  return 1;
}
extern "C" int cute_rt_encode_tma(void *, int, int, void *, const long *, const long *, const int *,
                                  int) {
  std::fprintf(stderr, "cute-compile compiles only; it does not build TMA descriptors\n");
  return 1;
}

int main(int argc, char **argv) {
  std::string input, arch = "sm_90a", emit = "ptx", backend = "auto", dumpDir, opt = "3";
  bool lineInfo = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char *prefix) { return arg.substr(std::string(prefix).size()); };
    if (arg.rfind("--arch=", 0) == 0)
      arch = value("--arch=");
    else if (arg.rfind("--emit=", 0) == 0)
      emit = value("--emit=");
    else if (arg.rfind("--backend=", 0) == 0)
      backend = value("--backend=");
    else if (arg.rfind("--dump-dir=", 0) == 0)
      dumpDir = value("--dump-dir=");
    else if (arg == "--line-info")
      lineInfo = true;
    else if (arg.rfind("-O", 0) == 0)
      opt = value("-O");
    else if (arg == "-h" || arg == "--help") {
      std::cout << "usage: cute-compile input.mlir [--arch=sm_90a] "
                   "[--emit=ptx|llvm|nvvm|host|mlir|sass|metadata] "
                   "[--backend=auto|ptxas|nvjitlink] [-O<n>] [--line-info] [--dump-dir=DIR]\n";
      return 0;
    } else
      input = arg;
  }
  std::stringstream text;
  if (input.empty() || input == "-") {
    input = "<stdin>";
    text << std::cin.rdbuf();
  } else {
    std::ifstream file(input);
    if (!file) {
      std::cerr << "cute-compile: cannot read " << input << "\n";
      return 1;
    }
    text << file.rdbuf();
  }
  std::string keep = emit == "metadata" ? "" : quote(emit);
  std::string options = "{\"arch\": " + quote(arch) + ", \"cubin_backend\": " + quote(backend) +
                        ", \"opt_level\": " + opt +
                        ", \"line_info\": " + (lineInfo ? "true" : "false") + ", \"keep\": [" +
                        keep + "], \"source_name\": " + quote(input) +
                        (dumpDir.empty() ? "" : ", \"dump_dir\": " + quote(dumpDir)) + "}";
  std::string source = text.str();
  char *error = nullptr;
  const char *symbolNames[] = {"cute_rt_launch", "cute_rt_encode_tma"};
  void *symbolAddresses[] = {reinterpret_cast<void *>(&cute_rt_launch),
                             reinterpret_cast<void *>(&cute_rt_encode_tma)};
  CuteArtifact *artifact = cute_compile(source.data(), source.size(), options.c_str(), symbolNames,
                                        symbolAddresses, 2, &error);
  if (!artifact) {
    std::cerr << error << "\n";
    cute_free_string(error);
    return 1;
  }
  if (emit == "metadata") {
    std::cout << cute_artifact_metadata(artifact) << "\n";
  } else {
    size_t size = 0;
    const char *stage = cute_artifact_stage(artifact, emit.c_str(), &size);
    if (stage)
      std::cout.write(stage, size);
  }
  cute_artifact_destroy(artifact);
  return 0;
}
