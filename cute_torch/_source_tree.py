"""From a source checkout, `cute_torch.kernels` is the repository's top-level `kernels/` folder
(the DSL kernel library, written with the public API like user code). An installed package has
it at cute_torch/kernels (setup.py's package_dir), and this finder then does nothing."""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_KERNELS = os.path.join(os.path.dirname(_PACKAGE), "kernels")


class _KernelLibraryFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "cute_torch.kernels":
            return None
        return importlib.util.spec_from_file_location(name, os.path.join(_KERNELS, "__init__.py"),
                                                      submodule_search_locations=[_KERNELS])


def install() -> None:
    installed = os.path.isdir(os.path.join(_PACKAGE, "kernels"))
    in_source_tree = os.path.isfile(os.path.join(_KERNELS, "__init__.py"))
    if not installed and in_source_tree and not any(isinstance(f, _KernelLibraryFinder) for f in sys.meta_path):
        sys.meta_path.append(_KernelLibraryFinder())
