"""dcoc model zoo (installed as the package ``dcoc_models``).

Four networks are built from code on first use and cached as ONNX files, with fixed-seed
weights (see :mod:`dcoc_models._netbuilder` for the initialisation), so every machine gets
bit-identical models and nothing large is committed:

============  ==================================================================
resnet18      ResNet-18, 1x3x224x224 -- the VTA reference network
mobilenetv2   MobileNetV2 1.0, 1x3x224x224 (depthwise convs)
vgg16         VGG-16, 1x3x224x224 (138 M parameters; weights as ONNX external data)
transformer   BERT-style encoder: 4 layers, d_model 256, 4 heads, seq 128
============  ==================================================================

The nine ``light_*`` models that ship inside the onnx wheel (real CNN topologies whose
weights are ``ConstantOfShape`` nodes) are available by name as well, e.g.
``light_resnet50``.

Cache: ``$DCOC_CACHE/models`` if the environment variable ``DCOC_CACHE`` is set, else
``$XDG_CACHE_HOME/dcoc/models``, else ``~/.cache/dcoc/models`` (:func:`dcoc.paths.cache_root`).
A cached file's name carries a digest of the builder source, so editing a builder
rebuilds the model; stale versions are removed.  A ``<file>.sha256`` next to it holds the
digest of the built content (the ``.onnx`` and its ``.data``); a cached model whose
content no longer matches (truncated, overwritten, bit rot) is rebuilt.  Builds are
atomic and serialized with a file lock (parallel test workers are safe).  A cache
directory that cannot be written is a one-line :class:`~dcoc.errors.ModelError`.

API: :func:`list_models`, :func:`get`, :func:`resolve`, :func:`info`, :func:`cache_dir`.
"""
from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import os
import time
from dataclasses import dataclass, field
from typing import Callable

from dcoc.errors import ModelError

from . import cnn, transformer
from ._netbuilder import NetBuilder

__all__ = ["ModelInfo", "list_models", "get", "resolve", "info", "cache_dir", "zoo_names",
           "light_names", "light_dir", "build"]


@dataclass(frozen=True)
class ModelInfo:
    """What ``dcoc models`` shows for one model (no weights are generated to compute it)."""

    name: str
    description: str
    params: int
    macs: int
    input_shapes: dict = field(hash=False)
    source: str = "zoo"  # "zoo" (built by dcoc) or "onnx-light" (shipped in the onnx wheel)


@dataclass(frozen=True)
class _ZooEntry:
    builder: Callable[[NetBuilder], None]
    description: str
    seed: int
    external_data: bool = False  # write the weights to "<file>.onnx.data"


_ZOO: dict[str, _ZooEntry] = {
    "resnet18": _ZooEntry(cnn.resnet18, "ResNet-18 (VTA reference net), 224x224", seed=18),
    "mobilenetv2": _ZooEntry(cnn.mobilenetv2, "MobileNetV2 1.0, 224x224, depthwise convs",
                             seed=2),
    "vgg16": _ZooEntry(cnn.vgg16, "VGG-16, 224x224 (weights as external data)", seed=16,
                       external_data=True),
    "transformer": _ZooEntry(transformer.transformer,
                             "BERT-style encoder: 4 layers, d256, 4 heads, seq 128", seed=4),
}

_LIGHT_DESCRIPTIONS = {
    "light_bvlc_alexnet": "AlexNet (onnx wheel, constant weights)",
    "light_densenet121": "DenseNet-121 (onnx wheel, constant weights)",
    "light_inception_v1": "Inception v1 / GoogLeNet (onnx wheel, constant weights)",
    "light_inception_v2": "Inception v2 (onnx wheel, constant weights)",
    "light_resnet50": "ResNet-50 (onnx wheel, constant weights)",
    "light_shufflenet": "ShuffleNet (onnx wheel, constant weights)",
    "light_squeezenet": "SqueezeNet 1.0 (onnx wheel, constant weights)",
    "light_vgg19": "VGG-19 (onnx wheel, constant weights)",
    "light_zfnet512": "ZFNet-512 (onnx wheel, constant weights)",
}


def zoo_names() -> list[str]:
    """Names of the models dcoc builds."""
    return list(_ZOO)


def light_dir() -> str:
    """Directory of the ``light_*`` models inside the installed onnx wheel."""
    import onnx

    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def light_names() -> list[str]:
    """Names of the ``light_*`` models present in the installed onnx wheel."""
    d = light_dir()
    if not os.path.isdir(d):
        return []
    return sorted(f[:-5] for f in os.listdir(d) if f.startswith("light_") and f.endswith(".onnx"))


def cache_dir() -> str:
    """``$DCOC_CACHE/models``, ``$XDG_CACHE_HOME/dcoc/models`` or ``~/.cache/dcoc/models``
    (created on demand)."""
    from dcoc.paths import cache_root

    return cache_root("models")


def _content_digest(path: str) -> str:
    """sha256 over the model file and its external data file (if any)."""
    h = hashlib.sha256()
    for p in (path, path + ".data"):
        if os.path.exists(p):
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


_VERIFIED: dict = {}  # path -> (size, mtime_ns) of the content last found intact


def _stamp(path: str) -> tuple:
    st = [os.stat(p) for p in (path, path + ".data") if os.path.exists(p)]
    return tuple((s.st_size, s.st_mtime_ns) for s in st)


def _intact(path: str) -> bool:
    """True if ``path`` exists and its content matches the digest recorded when it was built."""
    if not os.path.exists(path):
        return False
    try:
        stamp = _stamp(path)
        if _VERIFIED.get(path) == stamp:
            return True
        with open(path + ".sha256", encoding="ascii") as f:
            want = f.read().split()[0]
        ok = _content_digest(path) == want
    except (OSError, IndexError, UnicodeDecodeError):
        return False
    if ok:
        _VERIFIED[path] = stamp
    return ok


def _digest() -> str:
    """Digest of the builder sources: part of the cached file name (edits force a rebuild)."""
    here = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    for f in ("_netbuilder.py", "cnn.py", "transformer.py"):
        with open(os.path.join(here, f), "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()[:10]


def _dry_run(name: str) -> NetBuilder:
    entry = _ZOO[name]
    nb = NetBuilder(name, seed=entry.seed, materialize=False)
    entry.builder(nb)
    return nb


def build(name: str, path: str) -> str:
    """Build zoo model ``name`` into ``path`` (and ``path + '.data'`` for external data).

    Writes to temporary names first and renames at the end, so ``path`` only ever exists
    complete.  Returns ``path``.
    """
    import onnx

    entry = _ZOO[name]
    tmp = f"{path}.partial{os.getpid()}"
    data_path = path + ".data"
    with contextlib.ExitStack() as stack:
        ext = None
        if entry.external_data:
            ext = stack.enter_context(open(tmp + ".data", "wb"))
        nb = NetBuilder(name, seed=entry.seed, materialize=True, external_data=ext,
                        external_location=os.path.basename(data_path))
        entry.builder(nb)
    model = nb.model(doc=f"dcoc zoo model {name}: {entry.description}")
    onnx.save_model(model, tmp)
    if entry.external_data:
        os.replace(tmp + ".data", data_path)
    os.replace(tmp, path)
    with open(path + ".sha256.partial", "w", encoding="ascii") as f:
        f.write(_content_digest(path) + "\n")
    os.replace(path + ".sha256.partial", path + ".sha256")
    return path


@contextlib.contextmanager
def _locked(directory: str, name: str):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f".{name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def get(name: str) -> str:
    """Path of the ``.onnx`` file of a zoo or ``light_*`` model, building it if needed."""
    if name in _ZOO:
        directory = cache_dir()
        path = os.path.join(directory, f"{name}-{_digest()}.onnx")
        if _intact(path):
            return path
        hint = "set DCOC_CACHE (or XDG_CACHE_HOME) to a writable directory"
        try:
            with _locked(directory, name):
                if not _intact(path):  # another process may have built it meanwhile
                    if os.path.exists(path):
                        _log(f"dcoc: cached zoo model '{name}' ({path}) does not match its "
                             "recorded digest (damaged or incomplete): rebuilding it")
                    t0 = time.perf_counter()
                    build(name, path)
                    _log_build(name, time.perf_counter() - t0)
                    for old in glob.glob(os.path.join(directory, f"{name}-*.onnx*")):
                        if not old.startswith(path):
                            with contextlib.suppress(OSError):
                                os.remove(old)
        except OSError as exc:
            raise ModelError(f"cannot build zoo model '{name}' in cache directory {directory}: "
                             f"{exc.strerror or exc} ({hint})") from None
        return path
    if name in light_names():
        return os.path.join(light_dir(), name + ".onnx")
    raise ModelError(_unknown(name))


def _log(text: str) -> None:
    import sys

    if not os.environ.get("DCOC_QUIET"):
        print(text, file=sys.stderr)


def _log_build(name: str, seconds: float) -> None:
    _log(f"dcoc: built zoo model '{name}' in {seconds:.1f} s (cached in {cache_dir()})")


def _unknown(name: str) -> str:
    known = ", ".join(zoo_names() + light_names())
    return f"unknown model '{name}'; not a file and not in the zoo ({known})"


def resolve(name_or_path: str | os.PathLike) -> str:
    """An existing file is returned as is; otherwise a zoo/light name is built/located.

    Raises :class:`dcoc.errors.ModelError` for anything else.
    """
    s = os.fspath(name_or_path)
    if os.path.isfile(s):
        return s
    if s in _ZOO or s in light_names():  # a zoo name wins over a same-named directory
        return get(s)
    if os.path.exists(s):
        return s  # a directory: the caller's preflight reports it
    if s.endswith(".onnx") or os.sep in s:
        raise ModelError(f"model file '{s}' does not exist")
    raise ModelError(_unknown(s))


def info(name: str) -> ModelInfo:
    """:class:`ModelInfo` of one zoo or light model (zoo: computed by a dry run, no weights)."""
    if name in _ZOO:
        nb = _dry_run(name)
        return ModelInfo(name, _ZOO[name].description, nb.params, nb.macs,
                         dict(nb.input_shapes), "zoo")
    if name in light_names():
        import onnx

        from ._stats import onnx_stats

        params, macs, shapes = onnx_stats(onnx.load(get(name)))
        return ModelInfo(name, _LIGHT_DESCRIPTIONS.get(name, "onnx wheel light model"), params,
                         macs, shapes, "onnx-light")
    raise ModelError(_unknown(name))


def list_models(include_light: bool = True) -> list[ModelInfo]:
    """All zoo models (then the ``light_*`` ones), with parameter and MAC counts."""
    names = zoo_names() + (light_names() if include_light else [])
    return [info(n) for n in names]
