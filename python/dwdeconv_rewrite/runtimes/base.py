"""The interface every runtime adapter implements: a Runtime converts and loads models, a Runner feeds, runs and
reads one loaded model. check.py and bench/runtimes/bench_runtimes.py use only what is declared here (plus the
optional hooks named below), so a new runtime is a subclass of each and a row in registry.json."""
from __future__ import annotations

import abc
from pathlib import Path


class Runner(abc.ABC):
    """One loaded model. Inputs and outputs are matched to the ONNX graph's by name, never by position: a runner
    that cannot tell which of its runtime's tensors is which ONNX input or output raises."""

    @abc.abstractmethod
    def feed(self, inputs: dict) -> None:
        """Sets the inputs, a dict ONNX input name -> array; a missing or extra name raises."""

    @abc.abstractmethod
    def invoke(self) -> None:
        """Runs the model once on the inputs fed: what is timed."""

    @abc.abstractmethod
    def outputs(self) -> dict:
        """The last run's results: a dict ONNX output name -> array in ONNX layout, in graph output order."""


class Runtime(abc.ABC):
    """A deployment runtime: converts an ONNX model the way its users do and loads it. Caches conversions under
    `work`. Optional hooks: `convert_all(paths)` (converters that run in a child process convert every model in one),
    `profile_nodes(path, threads, inputs, runs)` (per-node times from the runtime's profiler)."""

    name: str = ""

    @abc.abstractmethod
    def __init__(self, work: Path):
        """Imports the runtime's packages (a missing one raises ImportError)."""

    @abc.abstractmethod
    def versions(self) -> dict:
        """Package name -> version of what converts and runs the models."""

    @abc.abstractmethod
    def label(self) -> str:
        """The summary line's name of the runtime, with its version ("ONNX Runtime 1.32.0 (CPU provider)")."""

    @abc.abstractmethod
    def prepare(self, path: Path) -> dict:
        """Converts the model at `path` and returns the converted graph's op counts (and what it leaves outside the
        XNNPACK delegate, where the runtime has one); raises StageError naming the converter's stage."""

    @abc.abstractmethod
    def load(self, path: Path, threads: int) -> Runner:
        """The converted model at `path`, ready to run on `threads` threads."""
