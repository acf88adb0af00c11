"""``dcoc.export``: what a tuning run produced, in a form that lives without dcoc.

* llvm / cuda: the tuned model compiled into one shared library (``export_library``) that
  stock TVM loads with ``tvm.runtime.load_module`` + ``relax.VirtualMachine``
  (:mod:`tvm_plugin.export`), with a ``README.md`` and ``export.json`` saying its inputs,
  its target (``mcpu``) and how to load it.
* accelerators (vta, systolic): a directory with the hardware config in the target's own
  format, a resource / clock report, the per-layer schedules and the commands that
  reproduce the latency (:mod:`dcoc.results.export`).

:func:`export` takes a :class:`~dcoc.results.result.TuneResult` or a finished run's work
dir and picks one of the two; :func:`check` re-simulates an exported accelerator
directory from its files alone; :func:`check_export_path` checks a destination before
any work.  See docs/export.md.
"""
from __future__ import annotations

import os

from dcoc.results.export import check, check_export_path, export_accelerator, read_source

__all__ = ["export", "check", "check_export_path"]


def export(source, path: str, wait: bool = False) -> dict:
    """Export a TuneResult or a finished run's work dir to ``path``; returns the export's
    metadata (what ``export.json`` holds, plus ``files``).  A run still writing the work
    dir: a one-line error naming its PID, or, with ``wait``, wait for it to finish."""
    from dcoc.workdir import reading_work_dir

    if isinstance(source, (str, os.PathLike)) and os.path.isdir(source):
        with reading_work_dir(os.fspath(source), wait):
            return _export(source, path)
    return _export(source, path)


def _export(source, path: str) -> dict:
    data, work_dir, executable = read_source(source)
    from dcoc.targets import available, is_accelerator

    target = str(data.get("target") or "")
    if data.get("mix"):  # one accelerator for several models (dcoc.api.mix)
        from dcoc.results.mix import export_mix

        return export_mix(data, work_dir, os.fspath(path))
    if target in available() and is_accelerator(target):
        if os.fspath(path).endswith(".so"):
            from dcoc.errors import ConfigError

            raise ConfigError(f"export path {os.fspath(path)}: a {target} run exports a directory "
                              "(hardware config, schedules, reports), not a .so library; give a "
                              "directory name")
        return export_accelerator(data, work_dir, os.fspath(path))
    from tvm_plugin.export import export_tvm

    return export_tvm(data, work_dir, os.fspath(path), executable=executable)
