#!/usr/bin/env python3
"""Times original against rewritten ONNX models on the runtimes users deploy with.

Not part of dwdeconv-rewrite, its build or its tests: a measuring tool, run from a virtual environment set up
as bench/runtimes/README.md says. For each pair (original ONNX, rewritten ONNX) and each runtime it
  1. converts both models the way a user would (onnx2tf to .tflite; onnx2torch + torch.export to an ExecuTorch
     .pte lowered to XNNPACK; ONNX Runtime loads the ONNX file itself) and records the converted graph's op list,
  2. runs both on the same seeded input and checks they agree (max abs error, and that error relative to the
     output's largest magnitude); a pair that disagrees is reported and never timed,
  3. times them interleaved, A B A B, in one run, and reports medians, spread (min-max; p10/p90 in the JSON), their
     ratio and the load average, in one table format for every runtime.

Runtimes (each needs its own packages; see bench/runtimes/README.md):
  litert      onnx2tf (float32) -> ai-edge-litert Interpreter, XNNPACK delegate applied by default
  ort         onnxruntime, CPUExecutionProvider, ORT_ENABLE_ALL
  executorch  onnx2torch -> torch.export -> to_edge_transform_and_lower(XnnpackPartitioner) -> .pte (in a child
              process), run by executorch.runtime; reports the ops left outside the XNNPACK delegate
  openvino    openvino.Core().compile_model on "CPU" from the ONNX file, f32 (or --precision bf16) inference hint
--precision P (default fp32) converts and runs both models at P on every --runtime that lists it (registry.json).

Suites:
  layers   one depthwise ConvTranspose per model, the executor's layer table (bench/layer_bench.cpp)
  handwritten  one hand-written x2 upsampler per model (nearest x mask, nearest + 3x3 Conv depthwise and dense),
           as bench/layer_bench.cpp builds them; --layer-filter and --channels/--sizes pick them
  migan    the MI-GAN-like generator at 256, form (a) (and form (b) with --migan-forms a b)
  dla      the DLA-style detection decoder (examples/make_examples.cpp --dla)
  sr       BasicSR's RRDBNet (ESRGAN's generator, x4, nearest + 3x3 Conv upsamplers; examples/export_rrdbnet.py)
  targets  what the targets' rules are measured on, on every runtime: k4s2p1 layers (C 16-512, H 32-128), k6s3p2op1 at
           H=64, nearest + 3x3 depthwise and dense layers, MI-GAN forms (a) and (b), the DLA decoder, RRDBNet
  reach    the upsamplers beyond clean xs on both axes, one per model: dilated stride 1 (GTCRN), strides that differ
           per axis (DeepFilterNet3, MobileStyleGAN's IDWT), group 1 zero off the diagonal (FCN-8s, C 21 and 64)
  --pair ORIGINAL.onnx REWRITTEN.onnx   any pair of your own, on every runtime

--respell gather_crd|batch_d2s_b rewrites the tool's DCR DepthToSpace into a spelling that reaches ExecuTorch;
--et-static-resize lets a nearest Resize with constant scales through onnx2torch and torch.export; --rewrite-args
passes extra arguments to dwdeconv-rewrite. README.md says what each table holds.

Examples (from the repository root, after building the tool):
  python bench/runtimes/bench_runtimes.py --runtime ort --threads 1 2 --suite layers migan dla --work /tmp/rt
  python bench/runtimes/bench_runtimes.py --runtime litert --threads 1 --suite migan --profile --work /tmp/rt
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The conversion, run and timing code is the tool's own runtime module (dwdeconv-rewrite --runtime uses it too).
sys.path.insert(0, str(REPO / "python"))
from dwdeconv_rewrite.runtimes import NAMES as RUNTIME_NAMES, PRECISIONS, load_runtime  # noqa: E402
from dwdeconv_rewrite.runtimes.common import (  # noqa: E402
    StageError, compare, machine_state, model_key, onnx_inputs, time_interleaved)

# The cases (bench_models.py: Python puts a script's own folder on sys.path, so it imports from beside this file).
from bench_models import CHANNELS, RESPELLINGS, SIZES, SUITES, Case, build_cases  # noqa: E402

# A rewritten output must agree with the original to this, relative to the output's largest magnitude, at each
# --precision: fp32 1e-4; fp16 (10-bit mantissa) and bf16 (8-bit: a relative step of 2^-8 = 0.0039) their rounding
# through a layer or a network, at the binary's rtol for FLOAT16 and BFLOAT16 (runtime_check/compare.cpp); bf16
# above that rtol: here both models run at bf16 and each is that far from f32, so they may differ by twice it (the
# MI-GAN-like model at bf16 on OpenVINO: 2.15e-2).
REL_TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 3e-2}


# ---------------------------------------------------------------------------------------------------------------
# Checking and timing


def measure(runtime, case: Case, threads: int, args, reference=None) -> dict:
    row = {"case": case.name, "runtime": runtime.name, "threads": threads}
    inputs = onnx_inputs(case.original, seed=1)
    runners = []
    for path in (case.original, case.rewritten):
        runner = runtime.load(path, threads)
        runner.feed(inputs)
        runner.invoke()
        runners.append(runner)
    outs = [r.outputs() for r in runners]  # {ONNX output name: array}: compared by name
    row["max_abs"], row["max_rel"] = compare(outs[0], outs[1])
    if reference is not None:
        row["vs_onnx_max_abs"], row["vs_onnx_max_rel"] = compare(reference, outs[0])
    tolerance = REL_TOLERANCE[runtime.precision]
    if not row["max_rel"] <= tolerance and not args.not_equivalent:
        row["error"] = f"original and rewritten disagree: max rel {row['max_rel']:.2e} > {tolerance:g}; not timed"
        return row
    row["loadavg_before"] = os.getloadavg()
    a, b, pairs = time_interleaved(runners[0].invoke, runners[1].invoke, args.budget, args.min_pairs, args.max_pairs)
    row["loadavg_after"] = os.getloadavg()
    row.update(original_ms=a["median"], rewritten_ms=b["median"], ratio=a["median"] / b["median"], pairs=pairs,
               original_spread=a, rewritten_spread=b)
    return row


def ort_reference(case: Case):
    """The original ONNX model's outputs from ONNX Runtime without graph optimisations, for the conversion check."""
    try:
        import onnxruntime
    except ImportError:
        return None
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(str(case.original), options, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, onnx_inputs(case.original, seed=1))))


# ---------------------------------------------------------------------------------------------------------------
# Reports


def fmt_ops(ops: dict) -> str:
    return ", ".join(f"{k} x{v}" if v > 1 else k for k, v in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])))


def fmt_ms(v: float) -> str:
    return f"{v:.3f}" if v < 10 else f"{v:.2f}" if v < 100 else f"{v:.1f}"


def time_cell(row: dict, side: str) -> str:
    """'median [min-max]' in ms (the median alone for rows from JSON files written before spreads were kept)."""
    sp = row.get(f"{side}_spread")
    median = fmt_ms(row[f"{side}_ms"])
    return f"{median} [{fmt_ms(sp['min'])}-{fmt_ms(sp['max'])}]" if sp else median


def cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


LEFT_TO = {"litert": "TFLite's kernels", "executorch": "ExecuTorch's portable kernels"}


def runtime_heading(rt: str, block: dict, results: dict) -> str:
    before = block.get("machine_before") or results["machine"]
    after = block.get("machine_after") or results.get("machine_after") or before
    versions = ", ".join(f"{k} {v}" for k, v in block["versions"].items())
    cpu = f"{before['cpu_model']}, " if before.get("cpu_model") else ""
    # A table at another precision than fp32 says so (the JSON also keeps the runtime's label, e.g. OpenVINO's
    # inference precision as the plugin reported it).
    at = f" at {block['precision']}" if block.get("precision", "fp32") != "fp32" else ""
    return (f"{rt}{at}, {versions}; {before['date_utc']} UTC, {cpu}load average {before['loadavg'][0]:.1f} before, "
            f"{after['loadavg'][0]:.1f} after")


def timing_table(block: dict) -> list[str]:
    """One row per case, each thread count's original and rewritten time (median [min-max] ms) and ratio side by
    side; then agreement, pairs, the 1-min load average before the case's first timing and after its last, and
    for a delegating runtime the ops each side leaves outside XNNPACK."""
    threads = sorted({r["threads"] for r in block["rows"]})
    delegating = any("xnnpack_partitions" in g for g in block["graphs"].values())
    head = ("| case |" + "".join(f" {t}T original ms | {t}T rewritten ms | {t}T ratio |" for t in threads)
            + " max abs (rel) | vs ONNX (rel) | pairs | load |")
    rule = "|---|" + "---:|---:|---:|" * len(threads) + "---:|---:|---:|---:|"
    if delegating:
        head += " outside XNNPACK: original; rewritten |"
        rule += "---|"
    lines = [head, rule]
    rows = collections.OrderedDict()
    for r in block["rows"]:
        rows.setdefault(r["case"], {})[r["threads"]] = r

    def outside(name):
        info = block["graphs"].get(name) if name else None
        if not info or "xnnpack_partitions" not in info:
            return "-"
        return fmt_ops(info["not_delegated"]) or "none"

    for case, by_t in rows.items():
        cells, agree, ref, pairs, loads = [], "-", "-", [], []
        for t in threads:
            r = by_t.get(t)
            if r is None:
                cells.append(" - | - | not run |")
                continue
            if "ratio" in r:
                cells.append(f" {time_cell(r, 'original')} | {time_cell(r, 'rewritten')} | **{r['ratio']:.2f}x** |")
                pairs.append(str(r["pairs"]))
            else:
                cells.append(f" - | - | {cell(r.get('error', 'not run'))} |")
            if "max_abs" in r:
                agree = f"{r['max_abs']:.1e} ({r['max_rel']:.0e})"
            if "vs_onnx_max_rel" in r:
                ref = f"{r['vs_onnx_max_abs']:.1e} ({r['vs_onnx_max_rel']:.0e})"
            if "loadavg_before" in r:
                loads.append((r["loadavg_before"][0], r["loadavg_after"][0]))
        load = f"{loads[0][0]:.1f}-{loads[-1][1]:.1f}" if loads else "-"
        line = f"| {case} |" + "".join(cells) + f" {agree} | {ref} | {'/'.join(pairs) or '-'} | {load} |"
        if delegating:
            first = next(iter(by_t.values()))
            line += f" {cell(outside(first.get('original_graph')))}; {cell(outside(first.get('rewritten_graph')))} |"
        lines.append(line)
    return lines


def case_notes(results: dict) -> list[str]:
    """What the tool did to each case's model, any respelling, and cases that could not be made."""
    lines = []
    for name, c in results.get("cases", {}).items():
        parts = []
        if "error" in c:
            parts.append(f"**not measured**: {c['error']}")
        if c.get("tool_rewrote") is not None:
            forms = ", ".join(f"{f} x{n}" for f, n in c.get("rewritten_forms", {}).items())
            parts.append(f"the tool rewrote {c['tool_rewrote']} upsampler(s) ({forms or 'none'}), kept {c['tool_kept']}"
                         + (f" ({'; '.join(c['kept_reasons'])})" if c.get("kept_reasons") else ""))
        if c.get("respelled"):
            check = (f"ONNX Runtime max abs vs the tool's output {c['respell_max_abs_vs_dcr']:.1e}"
                     if "respell_max_abs_vs_dcr" in c else c.get("respell_check", ""))
            parts.append(f"{c['depth_to_space_respelled']} DepthToSpace respelled as {c['respelled']} ({check})")
        if parts:
            lines.append(f"- `{name}`: " + "; ".join(parts))
    return lines


def markdown(results: dict) -> str:
    lines = []
    notes = case_notes(results)
    if notes:
        lines += ["### Cases\n"] + notes + [""]
    for rt, block in results["runtimes"].items():
        lines.append(f"### {rt}\n")
        lines.append(runtime_heading(rt, block, results) + "\n")
        lines += timing_table(block)
        lines.append("")
        lines.append("Converted graphs (op: count):\n")
        for name, info in block["graphs"].items():
            if "failed" in info:
                lines.append(f"- `{name}`: **did not convert**: {info['failed']}")
                continue
            extra = ""
            if "xnnpack_partitions" in info:
                left = fmt_ops(info["not_delegated"]) or "none"
                extra = (f"; XNNPACK partitions: {info['xnnpack_partitions']}, "
                         f"ops left to {LEFT_TO.get(rt, 'the runtime')}: {left}")
            lines.append(f"- `{name}`: {fmt_ops(info['ops'])}{extra}")
        if block.get("profiles"):
            lines.append("\nProfiles (ms per run by op type):\n")
            for name, prof in block["profiles"].items():
                if "failed" in prof:
                    top = prof["failed"]
                elif "percent_by_symbol" in prof:
                    top = f"{prof['ms_per_run']:.2f} ms/run; " + ", ".join(
                        f"{sym} {pct:.1f}%" for sym, pct in list(prof["percent_by_symbol"].items())[:12])
                else:
                    top = ", ".join(f"{op} {ms:.2f}" for op, ms in list(prof.items())[:12])
                lines.append(f"- `{name}`: {top}")
        lines.append("")
    return "\n".join(lines)


def run_child(runtime_name: str, work: Path, path: Path, threads: int, runs: int):
    """Runs one model `runs` times after a warm-up; with perf's control FIFO in the environment (see
    perf_profile), samples only those runs, not Python's start-up or the model's loading."""
    runtime = load_runtime(runtime_name, work)
    runtime.set_precision(os.environ.get("BENCH_PRECISION", "fp32"))  # perf_profile's, the run's --precision
    if runtime_name == "executorch" and not runtime.converted(path):
        runtime.convert_all([path])
        runtime.prepare(path)
    runner = runtime.load(path, threads)
    runner.feed(onnx_inputs(path, seed=1))
    for _ in range(2):
        runner.invoke()
    ctl, ack = os.environ.get("BENCH_PERF_CTL"), os.environ.get("BENCH_PERF_ACK")

    def perf_control(command):
        if ctl:
            with open(ctl, "w") as c:
                c.write(command + "\n")
            with open(ack) as a:
                a.readline()

    perf_control("enable")
    start = time.perf_counter()
    for _ in range(runs):
        runner.invoke()
    elapsed = time.perf_counter() - start
    perf_control("disable")
    print(json.dumps({"ms_per_run": elapsed / runs * 1e3}))


def perf_profile(runtime_name: str, work: Path, path: Path, threads: int, runs: int, precision: str = "fp32") -> dict:
    """Where a runtime spends a run of `path`: Linux perf samples of the timed runs, by symbol (XNNPACK's
    microkernels and TFLite's kernels are named in ai-edge-litert's shared library)."""
    folder = Path(tempfile.mkdtemp(prefix="perf-", dir=work))
    ctl, ack, data = folder / "ctl", folder / "ack", folder / "perf.data"
    os.mkfifo(ctl)
    os.mkfifo(ack)
    env = dict(os.environ, BENCH_PERF_CTL=str(ctl), BENCH_PERF_ACK=str(ack), BENCH_PRECISION=precision)
    child = [sys.executable, str(Path(__file__).resolve()), "_run", runtime_name, str(work), str(path), str(threads),
             str(runs)]
    done = subprocess.run(["perf", "record", "-F", "999", "-D", "-1", f"--control=fifo:{ctl},{ack}", "-o", str(data),
                           "--"] + child, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"perf record failed: {done.stderr.strip()[-400:]}")
    ms = json.loads([l for l in done.stdout.splitlines() if l.startswith("{")][-1])["ms_per_run"]
    report = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children", "--sort", "symbol",
                             "--percent-limit", "1", "-q"], capture_output=True, text=True, check=True).stdout
    symbols = {}
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[[.k]\]\s+(.+?)(\s+-)*\s*$", line)
        if m:
            symbols[m.group(2)[:90]] = float(m.group(1))
    shutil.rmtree(folder)
    return {"ms_per_run": ms, "percent_by_symbol": symbols}


def benchmarks_tables(paths: list[str]) -> str:
    """BENCHMARKS.md's tables from one or more --json files: per runtime, the heading line (versions, date, CPU,
    load before and after) and timing_table()."""
    out = []
    for path in paths:
        results = json.loads(Path(path).read_text())
        for rt, block in results["runtimes"].items():
            out.append(runtime_heading(rt, block, results) + "\n")
            out += timing_table(block)
            out.append("")
    return "\n".join(out)



def make_parser() -> argparse.ArgumentParser:
    """The command line of a measuring run (the module docstring is its --help)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runtime", nargs="+", choices=list(RUNTIME_NAMES), required=True)
    parser.add_argument("--threads", nargs="+", type=int, default=[1])
    parser.add_argument("--suite", nargs="*", choices=SUITES, default=[])
    parser.add_argument("--pair", nargs=2, action="append", metavar=("ORIGINAL", "REWRITTEN"),
                        help="a pair of your own (fixed input shapes); repeat for several")
    parser.add_argument("--channels", nargs="+", type=int, default=CHANNELS)
    parser.add_argument("--sizes", nargs="+", type=int, default=SIZES)
    parser.add_argument("--layer-filter", help="only layers whose name matches this regex, e.g. 'k4s2p1op0_C64'")
    parser.add_argument("--migan-size", type=int, default=256)
    parser.add_argument("--migan-forms", nargs="+", choices=["a", "b", "a-img"],
                        help="a: stock deconvs; b: hand-written; a-img: (a) with its 3-channel image upsamplers "
                             "rewritten (default: a; a b with --suite targets)")
    parser.add_argument("--dla-size", type=int, default=512)
    parser.add_argument("--sr-num-feat", type=int, default=32, help="RRDBNet (--suite sr): num_feat (default 32)")
    parser.add_argument("--sr-num-block", type=int, default=2, help="RRDBNet: RRDB blocks (default 2)")
    parser.add_argument("--sr-num-grow-ch", type=int, default=32, help="RRDBNet: num_grow_ch (default 32)")
    parser.add_argument("--sr-size", type=int, default=64, help="RRDBNet: input height and width (default 64)")
    parser.add_argument("--export-python", default="/usr/bin/python3",
                        help="the Python with PyTorch that runs examples/export_rrdbnet.py (default Debian's)")
    parser.add_argument("--rewrite-args", type=shlex.split, metavar="'ARGS'",
                        help="extra arguments for dwdeconv-rewrite, one shell-quoted string after '=', e.g. "
                             "--rewrite-args='--target executorch'; the rewritten files and case names get them as a "
                             "suffix, and the tool's kept upsamplers are reported, not warned about")
    parser.add_argument("--et-static-resize", action="store_true",
                        help="ExecuTorch: convert a nearest Resize with constant scales to F.interpolate with fixed "
                             "scales (onnx2torch's own Resize cannot pass torch.export, so without this no model with "
                             "a Resize converts); cached apart from stock conversions")
    parser.add_argument("--respell", choices=RESPELLINGS,
                        help="respell every DCR DepthToSpace of each rewritten model (pairs too) in this form before "
                             "converting, checked on ONNX Runtime (exact): a stand-in for the tool's coming "
                             "--target executorch")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds of timed pairs per case (default 1)")
    parser.add_argument("--not-equivalent", action="store_true",
                        help="time --pair models whose outputs differ by design (a bound: every upsampler made free, "
                             "make_free_upsample1d.py); their difference is still reported")
    parser.add_argument("--min-pairs", type=int, default=5)
    parser.add_argument("--max-pairs", type=int, default=200)
    parser.add_argument("--profile", action="store_true",
                        help="also profile each model case: ORT's profiler by op type; perf by symbol for the others")
    parser.add_argument("--profile-layers", help="also profile the layers whose name matches this regex")
    parser.add_argument("--profile-runs", type=int, default=10)
    parser.add_argument("--convert-jobs", type=int, default=1, help="onnx2tf conversions run in parallel")
    parser.add_argument("--convert-timeout", type=float, default=1800,
                        help="ExecuTorch: seconds one model's conversion may take before it is recorded as failed "
                             "at the stage it was in (default 1800; 0 for no limit)")
    parser.add_argument("--prepare-only", action="store_true", help="convert, list ops and check; do not time")
    parser.add_argument("--precision", default="fp32",
                        help="what both models are converted to and run at on every --runtime (registry.json's "
                             "precisions: fp32, the default, everywhere; fp16 on litert and executorch; bf16 on "
                             "openvino); int8 needs calibration samples: bench_precision.sh runs it through the tool")
    parser.add_argument("--work", type=Path, default=Path("bench-runtimes-work"))
    parser.add_argument("--tool", type=Path, default=REPO / "build/cli/dwdeconv-rewrite")
    parser.add_argument("--make-examples", type=Path, default=REPO / "build/examples/dwdeconv-make-examples")
    parser.add_argument("--json", type=Path, help="write the results here (default WORK/results-RUNTIMES.json)")
    return parser


def check_precision(parser: argparse.ArgumentParser, args):
    """Refuses, before any model is made, a --precision some --runtime's registry row does not list."""
    for rt_name in args.runtime:
        if args.precision not in PRECISIONS[rt_name] or args.precision not in REL_TOLERANCE:
            parser.error(f"--precision {args.precision}: --runtime {rt_name} converts to "
                         f"{', '.join(p for p in PRECISIONS[rt_name] if p in REL_TOLERANCE)} here"
                         + (" (int8 needs calibration samples: bench_precision.sh)" if args.precision == "int8" else ""))


def prepare_graphs(runtime, rt_name: str, paths: list[Path], names: dict, block: dict):
    """Converts every model on one runtime and records each graph's ops, or why it did not convert, in block."""
    if hasattr(runtime, "convert_all"):
        try:
            runtime.convert_all(paths)
        except RuntimeError as e:
            print(f"{rt_name}: {e}", file=sys.stderr)
    for path in paths:
        try:
            block["graphs"][names[path]] = runtime.prepare(path)
        except Exception as e:  # noqa: BLE001 - a conversion that fails is a finding, reported in the table
            message = str(e) if isinstance(e, StageError) else f"{type(e).__name__}: {e}"
            block["graphs"][names[path]] = {"failed": message.removeprefix("did not convert: ")}


def measure_case(runtime, rt_name: str, case: Case, names: dict, block: dict, args):
    """One case's rows on one runtime, per --threads, printed as they come; False (not profiled) when either side failed."""
    base = {"case": case.name, "runtime": rt_name}
    if not case.error:
        base.update(original_graph=names[case.original], rewritten_graph=names[case.rewritten])
    failed = case.error or "; ".join(
        f"{side} did not convert: {block['graphs'][names[p]]['failed']}"
        for side, p in (("original", case.original), ("rewritten", case.rewritten))
        if "failed" in block["graphs"][names[p]])
    if failed:
        for threads in args.threads:
            block["rows"].append(dict(base, threads=threads, error=failed))
        print(json.dumps(block["rows"][-1]), flush=True)
        return False
    try:
        reference = ort_reference(case) if rt_name != "ort" else None
    except Exception as e:  # noqa: BLE001
        reference = None
        print(f"{case.name}: no ONNX Runtime reference: {type(e).__name__}: {e}", file=sys.stderr)
    for threads in args.threads:
        try:
            row = measure(runtime, case, threads, args if not args.prepare_only else _no_timing(args), reference)
        except Exception as e:  # noqa: BLE001
            row = {"threads": threads, "error": f"{type(e).__name__}: {e}"}
        row = dict(base, **row)
        block["rows"].append(row)
        print(json.dumps(row), flush=True)
    return True


def profile_case(runtime, rt_name: str, case: Case, names: dict, block: dict, args):
    """Where both models of a case spend their runs: ORT's profiler by op type, perf by symbol elsewhere."""
    for path in (case.original, case.rewritten):
        try:
            if rt_name == "ort":
                block["profiles"][names[path]] = runtime.profile(path, args.threads[0],
                                                                 onnx_inputs(path, 1), args.profile_runs)
            else:
                block["profiles"][names[path]] = perf_profile(rt_name, args.work, path, args.threads[0],
                                                              args.profile_runs, args.precision)
        except Exception as e:  # noqa: BLE001
            block["profiles"][names[path]] = {"failed": f"{type(e).__name__}: {e}"}


def measure_runtime(rt_name: str, cases: list[Case], names: dict, args, results: dict):
    """Every case on one runtime into results["runtimes"][rt_name]: versions, load before and after, graphs, rows, profiles."""
    runtime = load_runtime(rt_name, args.work)
    runtime.set_precision(args.precision)  # before any conversion, as check.py does
    runtime.jobs = args.convert_jobs
    runtime.timeout = args.convert_timeout
    block = {"versions": runtime.versions(), "precision": args.precision, "label": runtime.label(),
             "machine_before": machine_state(), "rows": [], "graphs": {}, "profiles": {}}
    results["runtimes"][rt_name] = block
    paths = list(dict.fromkeys(p for c in cases if not c.error for p in (c.original, c.rewritten)))
    prepare_graphs(runtime, rt_name, paths, names, block)
    for case in cases:
        if not measure_case(runtime, rt_name, case, names, block, args):
            continue
        if (args.profile and case.kind != "layer") or (args.profile_layers and re.search(args.profile_layers, case.name)):
            profile_case(runtime, rt_name, case, names, block, args)
    block["machine_after"] = machine_state()


def main(argv=None):
    """The command: `_tables JSON...` and `_run ...` (perf_profile's child), else a measuring run of --runtime."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_tables":
        print(benchmarks_tables(argv[1:]))
        return 0
    if argv and argv[0] == "_run":
        return run_child(argv[1], Path(argv[2]), Path(argv[3]), int(argv[4]), int(argv[5]))
    parser = make_parser()
    args = parser.parse_args(argv)
    if not args.suite and not args.pair:
        parser.error("nothing to measure: give --suite and/or --pair")
    check_precision(parser, args)
    args.work.mkdir(parents=True, exist_ok=True)
    if args.et_static_resize:
        os.environ["BENCH_ET_STATIC_RESIZE"] = "1"

    cases = build_cases(args)
    names = graph_names(cases)
    results = {"machine": machine_state(), "command": [sys.executable] + sys.argv, "runtimes": {},
               "cases": {c.name: {"original": str(c.original), "rewritten": str(c.rewritten), **c.info,
                                  **({"error": c.error} if c.error else {})} for c in cases}}
    for case in cases:
        if case.error:
            print(f"{case.name}: {case.error}", file=sys.stderr)
    for rt_name in args.runtime:
        measure_runtime(rt_name, cases, names, args, results)
    results["machine_after"] = machine_state()
    out = args.json or args.work / f"results-{'-'.join(args.runtime)}.json"
    out.write_text(json.dumps(results, indent=1))
    print(markdown(results))
    print(f"results: {out}")
    return 0


def graph_names(cases: list[Case]) -> dict:
    """Each model's name in the tables: its file stem, or stem@hash where two different files share a stem."""
    paths = list(dict.fromkeys(p for c in cases if not c.error for p in (c.original, c.rewritten)))
    stems = collections.Counter(p.stem for p in {p.resolve() for p in paths})
    return {p: p.stem if stems[p.stem] == 1 else f"{p.stem}@{model_key(p).rsplit('-', 1)[1][:6]}" for p in paths}


def _no_timing(args):
    quick = argparse.Namespace(**vars(args))
    quick.budget, quick.min_pairs, quick.max_pairs = 0.0, 1, 1
    return quick


if __name__ == "__main__":
    sys.exit(main())
