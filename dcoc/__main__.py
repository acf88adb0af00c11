"""``python -m dcoc``: the dcoc command, run by :mod:`dcoc.cli.__main__` (which also turns a
Ctrl-C during the start-up imports into ``dcoc: interrupted``, exit 130)."""
import runpy

runpy.run_module("dcoc.cli.__main__", run_name="__main__")
