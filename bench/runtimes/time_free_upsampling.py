"""Interleaved timing on LiteRT (XNNPACK delegate, 1 thread) of MI-GAN form (a-img) as written, with its six
main-path upsamplers replaced by nearest Resize (the free-upsampling bound, make_free_upsampling.py), and --target
litert's rewrite, from the .tflite files bench_runtimes.py converted under WORK/litert.

Usage: time_free_upsampling.py WORK [ROUNDS]  (from the LiteRT venv, bench/runtimes/README.md; convert the free model first with
bench_runtimes.py _onnx2tf WORK/litert WORK/models/migan256a-free.onnx)"""
import glob
import os
import statistics
import sys
import time

import numpy as np
from ai_edge_litert.interpreter import Interpreter

work = sys.argv[1]
paths = {"original": glob.glob(work + "/litert/migan256a-img-*/*_float32.tflite")[0],
         "free": glob.glob(work + "/litert/migan256a-free-*/*_float32.tflite")[0],
         "rewritten": glob.glob(work + "/litert/migan256a.xnn.target-litert-*/*_float32.tflite")[0]}
runs = {}
for k, p in paths.items():
    it = Interpreter(model_path=p, num_threads=1)
    it.allocate_tensors()
    rng = np.random.default_rng(1)
    for d in it.get_input_details():
        it.set_tensor(d["index"], rng.uniform(-1, 1, d["shape"]).astype(np.float32))
    runs[k] = it
for _ in range(2):
    for it in runs.values():
        it.invoke()
times = {k: [] for k in runs}
cpu = {k: [] for k in runs}
pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 15
load0 = os.getloadavg()
for _ in range(pairs):
    for k, it in runs.items():
        c0, t0 = time.thread_time(), time.perf_counter()
        it.invoke()
        t1, c1 = time.perf_counter(), time.thread_time()
        times[k].append((t1 - t0) * 1e3)
        cpu[k].append((c1 - c0) * 1e3)
med = {k: statistics.median(v) for k, v in times.items()}
cmed = {k: statistics.median(v) for k, v in cpu.items()}
for k in runs:
    print("%-10s median %8.1f ms [%.1f-%.1f], cpu %8.1f ms" % (k, med[k], min(times[k]), max(times[k]), cmed[k]))
print("load %s -> %s, %d rounds" % ([round(x, 1) for x in load0], [round(x, 1) for x in os.getloadavg()], pairs))
print("rewritten vs original %.2fx; free bound %.2fx; rewritten takes %.3f of the free model's time (cpu %.3f)" % (
    med["original"] / med["rewritten"], med["original"] / med["free"], med["rewritten"] / med["free"], cmed["rewritten"] / cmed["free"]))
