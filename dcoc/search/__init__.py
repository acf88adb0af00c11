"""Search infrastructure shared by every tuner: spaces, tasks, measurers, records."""
from dcoc.search.measure import (
    FunctionMeasurer,
    MeasureErrorNo,
    MeasureInput,
    Measurer,
    MeasureResult,
    ReplayMeasurer,
    create_measurer,
    measure_option,
    measurer_names,
)
from dcoc.search.records import Records
from dcoc.search.space import Knob, Space, product
from dcoc.search.tuning_task import TuningTask

__all__ = [
    "FunctionMeasurer", "Knob", "MeasureErrorNo", "MeasureInput", "MeasureResult", "Measurer",
    "Records", "ReplayMeasurer", "Space", "TuningTask", "create_measurer", "measure_option",
    "measurer_names", "product",
]
