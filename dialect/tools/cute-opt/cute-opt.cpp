//===- cute-opt.cpp - mlir-opt with the cute dialect and our passes -------===//

#include "Pipeline.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  cute_torch::registerDialects(registry);
  cute_torch::registerPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "cute optimizer driver\n", registry));
}
