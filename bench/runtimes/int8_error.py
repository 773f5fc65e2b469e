"""How far each model's int8 conversion is from the fp32 original, on a runtime: tells quantisation error from
rewrite error when `--verify --precision int8` fails a deep model (BENCHMARKS.md, "Every target at 1 and 2 threads").

    python bench/runtimes/int8_error.py MODEL.onnx --runtime executorch [--target T] [--work DIR]

Rewrites MODEL with the tool (--target, default the runtime's own), then has the tool's runtime module
(`python -m dwdeconv_rewrite.runtimes check`, as `--runtime` runs it) convert and run both models at fp32 and at int8
(calibrated on 8 seeded input sets, the same for both) on one seeded input, and prints, per graph output, each int8
model's largest and mean error against the fp32 original, in output units and in the int8 output's steps, and the
two int8 models' difference. Run it with the runtime's interpreter (bench/runtimes/README.md). A measuring tool: the
tool's build and tests never need it.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

REPO = Path(__file__).resolve().parents[2]


def tensor_dir(folder: Path, arrays: dict) -> Path:
    """The runtime module's input folder: one .pb per graph input and inputs.json listing them in order
    (python/dwdeconv_rewrite/runtimes/bridge.schema.json's tensor_list)."""
    folder.mkdir(parents=True, exist_ok=True)
    listed = []
    for k, (name, x) in enumerate(arrays.items()):
        (folder / f"{k}.pb").write_bytes(numpy_helper.from_array(x, name).SerializeToString())
        listed.append({"name": name, "file": f"{k}.pb"})
    (folder / "inputs.json").write_text(json.dumps({"tensors": listed}))
    return folder


def seeded_inputs(model: onnx.ModelProto, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    initializers = {t.name for t in model.graph.initializer}
    out = {}
    for i in model.graph.input:
        if i.name in initializers:
            continue
        dims = [d.dim_value for d in i.type.tensor_type.shape.dim]
        if not dims or any(d <= 0 for d in dims):
            sys.exit(f"int8_error.py: input '{i.name}' has no static shape ({dims}); give a model with static inputs")
        out[i.name] = rng.uniform(-1, 1, dims).astype(np.float32)  # as the tool's seeded inputs (tensor_io.cpp)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--runtime", required=True, choices=["litert", "executorch"])
    parser.add_argument("--target", help="the rewrite's --target (default: the runtime's own)")
    parser.add_argument("--tool", type=Path, default=REPO / "build/cli/dwdeconv-rewrite")
    parser.add_argument("--work", type=Path, help="keep the conversions here (default: a temporary directory)")
    args = parser.parse_args()
    model = onnx.load(str(args.model), load_external_data=False)
    with tempfile.TemporaryDirectory() as tmp:
        d = args.work or Path(tmp)
        d.mkdir(parents=True, exist_ok=True)
        rewritten = d / "rewritten.onnx"
        subprocess.run([str(args.tool), str(args.model), "-o", str(rewritten), "--target", args.target or args.runtime,
                        "-q"], check=True)
        inputs = tensor_dir(d / "inputs", seeded_inputs(model, 0))
        calibration = d / "calibration"
        for k in range(8):
            tensor_dir(calibration / str(k), seeded_inputs(model, k + 1))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "python"),
                                                                        os.environ.get("PYTHONPATH")])))
        outputs, steps = {}, {}
        for precision in ("fp32", "int8"):
            out = d / f"out-{precision}"
            out.mkdir(exist_ok=True)
            argv = [sys.executable, "-m", "dwdeconv_rewrite.runtimes", "check", "--runtime", args.runtime, "--work",
                    str(d / "work"), "--original", str(args.model), "--rewritten", str(rewritten), "--inputs",
                    str(inputs), "--out", str(out), "--threads", "1", "--runs", "0", "--profile-runs", "0",
                    "--precision", precision]
            argv += ["--calibration", str(calibration)] if precision == "int8" else []
            r = subprocess.run(argv, capture_output=True, text=True, env=env)
            result = out / "result.jsonl"
            if r.returncode != 0 or not result.exists():
                sys.exit(f"int8_error.py: the {precision} check failed (exit {r.returncode}): {r.stderr[-1500:]}")
            lines = [json.loads(line) for line in result.read_text().splitlines()]
            for line in lines:
                if line["kind"] in ("note", "error"):
                    print(f"{precision} {line['kind']} {line.get('side', '-')}: {line.get('text') or line.get('message')}")
            outputs[precision] = {(line["side"], line["name"]): np.load(line["file"]) for line in lines
                                  if line["kind"] == "output"}
            if precision == "int8":
                steps = {(line["side"], line["name"]): (line["scale"], line["zero_point"]) for line in lines
                         if line["kind"] == "quant"}
    for (side, name), reference in sorted(outputs["fp32"].items()):
        if side != "original":
            continue
        step = max([q[0] for (_, n), q in steps.items() if n == name] or [0.0])
        in_steps = (lambda e: f" = {e / step:.2f} steps" if step > 0 else " (not quantised)")
        print(f"output '{name}': fp32 range [{reference.min():.4g}, {reference.max():.4g}], int8 step {step:.4g}")
        for s in ("original", "rewritten"):
            # As the tool judges a float side against an int8 one: the fp32 output clamped to the range this int8
            # output can hold, so saturation, int8's own, is not counted as error.
            scale, zero = steps.get((s, name), (0.0, 0.0))
            ref = np.clip(reference, (-128 - zero) * scale, (127 - zero) * scale) if scale > 0 else reference
            saturated = float(np.mean(ref != reference))
            diff = np.abs(outputs["int8"][(s, name)].astype(np.float64) - ref)
            print(f"  int8 {s} vs fp32 original: max {diff.max():.4g}{in_steps(diff.max())}, mean {diff.mean():.4g}"
                  f" ({saturated:.2%} of the fp32 values outside its int8 range, clamped)")
        # The two int8 runs as `--verify --precision int8` judges them: a side that left the output in float clamped
        # to the other's int8 range.
        pair = {s: outputs["int8"][(s, name)].astype(np.float64) for s in ("original", "rewritten")}
        for s, other in (("original", "rewritten"), ("rewritten", "original")):
            if (s, name) not in steps and (other, name) in steps:
                scale, zero = steps[(other, name)]
                pair[s] = np.clip(pair[s], (-128 - zero) * scale, (127 - zero) * scale)
        both = float(np.max(np.abs(pair["original"] - pair["rewritten"])))
        print(f"  int8 original vs int8 rewritten: max {both:.4g}{in_steps(both)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
