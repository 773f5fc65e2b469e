"""ONNX Runtime, CPU provider, 1 thread: one InferenceSession and one run on seeded input, for peak-RSS and wall
comparisons (BENCHMARKS.md, "Verification cost"). Prints the session's and the run's seconds on stderr.
Usage: ort_session_run.py MODEL.onnx [RUNS]   (RUNS > 1: more runs after the first, each printed)"""
import sys
import time
import numpy as np
import onnxruntime as ort
o = ort.SessionOptions()
o.intra_op_num_threads = 1
o.inter_op_num_threads = 1
t0 = time.perf_counter()
s = ort.InferenceSession(sys.argv[1], o, providers=["CPUExecutionProvider"])
t1 = time.perf_counter()
i = s.get_inputs()[0]
x = {i.name: np.random.default_rng(0).standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32)}
for r in range(int(sys.argv[2]) if len(sys.argv) > 2 else 1):
    t2 = time.perf_counter()
    s.run(None, x)
    print(f"ort {ort.__version__}: session {t1 - t0:.2f} s, run {r + 1} {time.perf_counter() - t2:.2f} s", file=sys.stderr)
