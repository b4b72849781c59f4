"""The caches of compiled specializations: each @cute.jit function's in-memory LRU, and the disk
cache.

An entry is content-addressed by (DSL source fingerprint, specialization key, compiler version
and build, options, arch) and holds what the compiler's `load` needs: the host code's object
(linked on a hit, nothing compiled), the metadata and the CUBINs. Writes go to a temporary file
renamed into place (atomic on POSIX, so concurrent processes and ranks never see half an
entry); every read verifies a SHA-256 of the payload, and a corrupt entry is deleted and
recompiled, never trusted.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import struct
import tempfile
import warnings

from . import dispatch

MAGIC = b"CUTECACHE2\n"  # 2: the host code is an object, not MLIR text
_HEADER = struct.Struct("<32sQ")  # sha256 of payload, length of the JSON part


def _path(root: str, digest: str) -> str:
    return os.path.join(root, digest[:2], digest + ".bin")


def load(root: str, digest: str) -> tuple[bytes, str, list[tuple[str, bytes]], dict[str, str], bytes] | None:
    """(host object, metadata JSON, [(module, CUBIN)], {stage: text}, the traced module
    zlib-compressed or b"") or None on a miss or a corrupt entry."""
    path = _path(root, digest)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    try:
        if not data.startswith(MAGIC):
            raise ValueError("bad magic")
        checksum, json_len = _HEADER.unpack_from(data, len(MAGIC))
        payload = memoryview(data)[len(MAGIC) + _HEADER.size:]
        if hashlib.sha256(payload).digest() != checksum:
            raise ValueError("checksum mismatch")
        header = json.loads(bytes(payload[:json_len]))
        host = bytes(payload[json_len:json_len + header["host"]])
        offset = json_len + header["host"]
        cubins = []
        for name, size in header["cubins"]:
            cubins.append((name, bytes(payload[offset:offset + size])))
            offset += size
        source = bytes(payload[offset:offset + header.get("source", 0)])
        return host, header["metadata"], cubins, header.get("stages", {}), source
    except (ValueError, KeyError, struct.error, json.JSONDecodeError) as e:
        warnings.warn(f"cute_torch: discarding corrupt cache entry {path} ({e}); recompiling", stacklevel=3)
        try:
            os.unlink(path)
        except OSError:
            pass
        return None


def store(root: str, digest: str, host: bytes, metadata: str, cubins: list[tuple[str, bytes]],
          stages: dict[str, str], source: bytes = b"") -> None:
    """`source`: the traced module, zlib-compressed, from which `__mlir__` is printed on a hit
    (kept as a stage in the JSON header instead, a GEMM's megabyte cost each hit 5 ms to parse)."""
    header = json.dumps({"host": len(host), "metadata": metadata, "stages": stages, "source": len(source),
                         "cubins": [(name, len(blob)) for name, blob in cubins]}).encode()
    payload = header + host + b"".join(blob for _, blob in cubins) + source
    data = MAGIC + _HEADER.pack(hashlib.sha256(payload).digest(), len(header)) + payload
    path = _path(root, digest)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as e:  # a read-only or full disk must not fail the compile
        warnings.warn(f"cute_torch: could not write cache entry {path}: {e}", stacklevel=3)


def digest(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


_BUILD_ID: str | None = None


def compiler_build_id() -> str:
    """Which build of libcute_compiler.so this is (its size and modification time): a rebuilt
    compiler (a new pass, a fixed lowering) must not load entries the old one wrote."""
    global _BUILD_ID
    if _BUILD_ID is None:
        path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib", "libcute_compiler.so")
        try:
            st = os.stat(path)
            _BUILD_ID = f"{st.st_size}-{st.st_mtime_ns}"
        except OSError:
            _BUILD_ID = "unknown"
    return _BUILD_ID


class MemoryCache:
    """A @cute.jit function's compiled specializations by key, the least recently used evicted
    past `limit` (CUTE_TORCH_MEMORY_CACHE_SIZE). An evicted specialization frees its CUDA
    modules and host code once nothing else holds it (a CompiledFunction from cute.compile keeps
    its own), and a later call loads it back from the disk cache."""

    def __init__(self):
        self._entries: collections.OrderedDict = collections.OrderedDict()
        self._last = (None, None)   # the most recent (key, spec): a repeated call skips hash and reorder
        self.fast: dispatch.Dispatch | None = None  # the C++ side of hits (made on the first add_fast)
        self._fast_made = False

    def add_fast(self, args: tuple, key, spec) -> None:
        """Lets calls keyed like `args` hit `spec` (kept under `key`) in C++ (dispatch.py)."""
        if not self._fast_made:
            self._fast_made = True
            self.fast = dispatch.make(self._entries.move_to_end)
        if self.fast is not None:
            self.fast.add(args, key, spec)

    def get(self, key):
        last_key, last_spec = self._last
        if key == last_key:
            return last_spec
        spec = self._entries.get(key)
        if spec is not None:
            self._entries.move_to_end(key)
            self._last = (key, spec)
        return spec

    def put(self, key, spec, limit: int) -> None:
        self._entries[key] = spec
        self._entries.move_to_end(key)
        self._last = (key, spec)
        while len(self._entries) > limit:
            evicted, _ = self._entries.popitem(last=False)
            if self.fast is not None:
                self.fast.remove(evicted)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key) -> bool:
        return key in self._entries
