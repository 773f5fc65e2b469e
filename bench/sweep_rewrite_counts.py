#!/usr/bin/env python3
"""Rewrite counts per model and target for two builds of the tool, and each rewrite checked on ONNX Runtime.

What a change that narrows or widens what is rewritten is judged by ("nothing that rewrote before is lost"): every
model in examples/, tests/fixtures/ and tests/fixtures/upstream/, and the PyTorch exporters' models
(examples/export_*.py, run with --export-python, an interpreter with torch and onnx, at the opsets they are exported
at), each rewritten by both binaries (--dry-run) under every target; then the NEW binary's output for each target run
beside its original on ONNX Runtime on seeded inputs (symbolic dims as 1, or the --input-shape a model needs), which
must agree.

Usage (an interpreter with onnxruntime, onnx and numpy):
  python bench/sweep_rewrite_counts.py --old OLD_BINARY --new NEW_BINARY --export-python /usr/bin/python3 \\
      --work /tmp/sweep [--markdown table.md]
Prints one Markdown table: model, then per target 'old -> new' rewritten counts (of the upsamplers found), and the
largest ONNX Runtime difference of the new outputs. Exit 1 when a count went down or a rewrite disagrees.
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ["default", "xnnpack", "litert", "ort", "executorch", "openvino", "mnn", "ncnn"]

# (file name, exporter, its arguments): small sizes, the opsets the exporters are used at.
EXPORTS = [
    ("export_pytorch_o17.onnx", "export_pytorch.py", ["--size", "16"]),
    ("nearest_conv_o13", "export_nearest_conv.py", ["--opset", "13"]),
    ("nearest_mask_buffer_o13.onnx", "export_nearest_mask.py", ["--mask", "buffer"]),
    ("nearest_mask_computed_o13.onnx", "export_nearest_mask.py", ["--mask", "computed"]),
    ("zero_insertion_o13.onnx", "export_zero_insertion.py", []),
    ("upfirdn2d_o13.onnx", "export_upfirdn2d.py", []),
    ("upfirdn2d_literal_o13.onnx", "export_upfirdn2d.py", ["--slice-ends", "literal"]),
    ("upfirdn2d_unfolded_o13.onnx", "export_upfirdn2d.py", ["--no-constant-folding"]),
    ("migan_scatternd_32_o13.onnx", "export_migan_nearest_scatternd.py", []),
    ("migan_sizes_32_o13.onnx", "export_migan_nearest_scatternd.py", ["--upsample", "size"]),
    ("migan_recompute_32_o11.onnx", "export_migan_nearest_scatternd.py", ["--upsample", "recompute", "--opset", "11"]),
    ("fastdepth_o13.onnx", "export_fastdepth_upconv.py", []),
    ("fastdepth_o9.onnx", "export_fastdepth_upconv.py", ["--opset", "9"]),
    ("fast_neural_style_o13.onnx", "export_fast_neural_style.py", ["--size", "32", "--channels-div", "4"]),
    ("rrdbnet_small.onnx", "export_rrdbnet.py", ["--num-feat", "16", "--num-block", "1", "--num-grow-ch", "8", "--size", "16"]),
    ("sd_vae_decoder_l8.onnx", "export_sd_vae_decoder.py", ["--latent", "8"]),
    ("gtcrn_decoder_o13.onnx", "export_gtcrn_decoder.py", ["--frames", "31"]),
    ("fcn8s_o13.onnx", "export_fcn8s.py", ["--size", "32", "--width-divisor", "32"]),
    ("deepfilternet_erb_o13.onnx", "export_deepfilternet_erb_decoder.py", ["--channels", "16", "--frames", "20"]),
    ("idwt_upsampler_o13.onnx", "export_idwt_upsampler.py", []),
    ("conv1d_upsampler_o13.onnx", "export_conv1d_upsampler.py", ["--length", "32"]),
    ("bigvgan_small_o17.onnx", "export_bigvgan.py", ["--what", "generator", "--preset", "small", "--frames", "8"]),
    ("bigvgan_amp_o17.onnx", "export_bigvgan.py", ["--what", "amp", "--channels", "24", "--length", "200"]),
    ("mimi_o17.onnx", "export_mimi.py", ["--frames", "25"]),
    ("kokoro_o17.onnx", "export_kokoro.py", ["--frames", "32"]),
]


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def export_models(python, work):
    out = []
    for name, script, args in EXPORTS:
        target = work / name
        if not target.exists():
            r = run([python, ROOT / "examples" / script, target] + args, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
            if r.returncode != 0:
                print(f"export {name} failed: {r.stderr.strip()[-300:]}", file=sys.stderr)
                continue
        out += sorted(target.glob("*.onnx")) if target.is_dir() else [target]
    return [p for p in out if ".xnn" not in p.name]


def counts(binary, model, target, shapes, work):
    """(rewritten, rows) of the plan `binary` makes of `model` for `target`, or None with the error's last line."""
    report = work / "report.json"
    r = run([binary, model, "--dry-run", "--target", target, "--report", report] + shapes)
    if r.returncode not in (0, 1) or not report.exists():
        return None, r.stderr.strip().splitlines()[-1:]
    data = json.loads(report.read_text())
    report.unlink()
    return (data.get("rewritten", 0), len(data.get("nodes", []))), None


def ort_difference(original, rewritten, only_input_dims):
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    a = ort.InferenceSession(str(original), opts, providers=["CPUExecutionProvider"])
    b = ort.InferenceSession(str(rewritten), opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    types = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64}
    feeds = {}
    for i in a.get_inputs():
        dims = only_input_dims or [d if isinstance(d, int) else 1 for d in i.shape]
        feeds[i.name] = rng.uniform(-1, 1, dims).astype(types.get(i.type, np.float32))
    ya = dict(zip([o.name for o in a.get_outputs()], a.run(None, feeds)))
    yb = dict(zip([o.name for o in b.get_outputs()], b.run(None, feeds)))
    return max(float(np.max(np.abs(ya[k].astype(np.float64) - yb[k].astype(np.float64)))) if ya[k].size else 0.0 for k in ya)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old", required=True)
    p.add_argument("--new", required=True)
    p.add_argument("--export-python", default="/usr/bin/python3")
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--markdown", type=Path)
    a = p.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    models = sorted((ROOT / "examples").glob("*.onnx")) + sorted((ROOT / "tests" / "fixtures").glob("*.onnx"))
    models += sorted((ROOT / "tests" / "fixtures" / "upstream").glob("*.onnx"))
    models += export_models(a.export_python, a.work)
    # Extra arguments a model needs (--input-shape for symbolic dims); every shipped model is static today.
    shapes_of = {}
    rows, lost, wrong = [], [], []
    for model in models:
        shapes = shapes_of.get(model.name, [])
        cells, worst = [], 0.0
        for target in TARGETS:
            old, old_err = counts(a.old, model, target, shapes, a.work)
            new, new_err = counts(a.new, model, target, shapes, a.work)
            cell = f"{old[0] if old else 'err'} -> {new[0] if new else 'err'}" + (f" of {new[1]}" if new else "")
            if old and new and new[0] < old[0]:
                lost.append(f"{model.name} {target}")
                cell += " (LOST)"
            cells.append(cell)
            if new and new[0] > 0:
                out = a.work / "out" / f"{model.stem}.{target}.onnx"
                out.parent.mkdir(exist_ok=True)
                r = run([a.new, model, "-o", out, "--target", target] + shapes)
                if r.returncode != 0:
                    wrong.append(f"{model.name} {target}: exit {r.returncode}")
                    continue
                dims = [int(x) for x in shapes[1].split(",")] if shapes else None
                try:
                    d = ort_difference(model, out, dims)
                except Exception as e:  # noqa: BLE001 - reported in the table
                    wrong.append(f"{model.name} {target}: {type(e).__name__}: {str(e)[:200]}")
                    continue
                worst = max(worst, d)
                if not d <= 1e-4:
                    wrong.append(f"{model.name} {target}: ORT difference {d:.3g}")
        rows.append(f"| {model.relative_to(ROOT) if ROOT in model.parents else model.name} | " + " | ".join(cells) +
                    f" | {worst:.2g} |")
    table = ("| model | " + " | ".join(TARGETS) + " | max ORT diff |\n|---|" + "---|" * (len(TARGETS) + 1) + "\n" +
             "\n".join(rows) + "\n")
    print(table)
    if a.markdown:
        a.markdown.write_text(table)
    for what, items in (("count went down", lost), ("rewrite disagrees or fails", wrong)):
        for item in items:
            print(f"{what}: {item}")
    return 1 if lost or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
