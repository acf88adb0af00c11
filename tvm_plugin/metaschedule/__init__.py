"""dcoc inside TVM MetaSchedule: the search strategy, the knob view of design-space traces,
program features, the fast builder and runners, and whole-model tuning.

Modules are imported on use (``import tvm_plugin.metaschedule`` does not load TVM).
"""
