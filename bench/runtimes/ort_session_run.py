"""ONNX Runtime, CPU provider, 1 thread: one InferenceSession and one run on seeded input, for peak-RSS and wall
comparisons (BENCHMARKS.md, "Verification cost"). Usage: ort_session_run.py MODEL.onnx"""
import sys, numpy as np, onnxruntime as ort
o = ort.SessionOptions(); o.intra_op_num_threads = 1; o.inter_op_num_threads = 1
s = ort.InferenceSession(sys.argv[1], o, providers=["CPUExecutionProvider"])
i = s.get_inputs()[0]
s.run(None, {i.name: np.random.default_rng(0).standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32)})
