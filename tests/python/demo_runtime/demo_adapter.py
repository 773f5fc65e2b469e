"""A runtime added through the registry alone (tests/python/demo_runtime_test.py): ONNX Runtime's CPU provider under
another name. It is copied with its registry row into a copy of the package; the shipped package and binary never
hold it."""
from __future__ import annotations

from .ort_adapter import OrtRuntime


class DemoRuntime(OrtRuntime):
    """OrtRuntime's conversion, runner and profile, with a label of its own: what the report names shows which
    adapter ran."""

    name = "demo"

    def label(self) -> str:
        return "Demo Runtime over " + super().label()
