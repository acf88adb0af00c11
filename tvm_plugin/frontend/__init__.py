"""Interim step of the frontend split: the old module, moved whole into the package."""
from tvm_plugin.frontend.accel import *  # noqa: F401,F403
from tvm_plugin.frontend.accel import __all__, _is_lowered, classify_primfunc  # noqa: F401
