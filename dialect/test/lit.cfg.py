# lit configuration for the cute dialect, passes and the compile pipeline.
import os

import lit.formats

config.name = "cute"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["lit.cfg.py", "lit.site.cfg.py.in"]
config.environment["PATH"] = os.pathsep.join(
    [config.cute_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")]
)
for name in ("CUDA_HOME", "HOME", "TMPDIR"):
    if name in os.environ:
        config.environment[name] = os.environ[name]
