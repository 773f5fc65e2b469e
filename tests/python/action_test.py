"""action/run.py, the action's script, run locally with the INPUT_* variables and the GitHub files a workflow
gives it (GITHUB_ACTIONS, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY), on copies of examples/*.onnx: a glob, a
directory, a sidecar .input-shapes, a Git LFS pointer, nothing matched, and the speed gate's plumbing; file names,
node names and input values that try to forge workflow commands, step outputs or summary rows (the output read as
GitHub's runner reads it), names that look like options, and output-dir ".". And action.yml (with PyYAML; else
those cases are skipped): its install step (action/install.sh), run with a stand-in python3, for each runtime's
extra, its cache steps' wiring, its outputs and its artifact's paths. action_cache_test.py tests the cache itself.

ctest supplies DWDECONV_REWRITE (the built binary), DWDECONV_SOURCE_DIR and PYTHONPATH=<source>/python.
"""

import glob
import html
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

try:
    import onnx
except ImportError:
    onnx = None

from action_support import (ActionScriptCase, ActionYamlCase, EXAMPLES, SCRIPT, SOURCE, cell_text,
                            read_github_output, summary_rows, workflow_commands)


class ActionScriptTest(ActionScriptCase):
    def test_a_glob_rewrites_and_verifies_each_model_and_a_model_without_its_shapes_fails(self):
        # xnnpack rewrites MI-GAN's ConvTransposes, which the default keeps: a rewrite for --verify to check.
        code, err, out, outputs = self.run_action({"INPUT_MODELS": "models/**/*.onnx", "INPUT_TARGET": "xnnpack"})
        # upsampler_small has symbolic dims: without a sidecar its --verify cannot run (could not verify, exit 4, not
        # a failed verification's 1); the others pass.
        self.assertEqual(code, 4)
        report = self.report()
        self.assertEqual([r["input"] for r in report], ["models/nested/" + m.name for m in EXAMPLES])
        self.assertEqual([r["exit_code"] for r in report], [0, 0, 4])
        self.assertTrue(report[0]["verify"]["passed"])
        written = self.work / "dwdeconv-rewrite-out/models/nested/migan_tiny_deconv.xnn.onnx"
        self.assertTrue(written.is_file())
        # The output is the rewrite, not a copy of the model: MI-GAN's 8 ConvTransposes became 8 DepthToSpace joins.
        self.assertFalse(written.read_bytes() == (self.work / "models/nested/migan_tiny_deconv.onnx").read_bytes(),
                         "the output is a copy of the model")
        if onnx is not None:
            ops = [n.op_type for n in onnx.load(str(written)).graph.node]
            self.assertEqual((ops.count("ConvTranspose"), ops.count("DepthToSpace")), (0, 8))
        self.assertFalse((self.work / "dwdeconv-rewrite-out/models/nested/upsampler_small.xnn.onnx").exists())
        self.assertIn("::error file=models/nested/upsampler_small.onnx,title=dwdeconv-rewrite::", out)
        self.assertIn("::group::models/nested/migan_tiny_deconv.onnx", out)
        self.assertEqual(outputs, {"report": "dwdeconv-rewrite-report.json", "output-dir": "dwdeconv-rewrite-out",
                                   "failed": "1"})
        summary = (self.work / "gh-summary").read_text()
        self.assertIn("2 of 3 models passed", summary)
        self.assertIn("| ` models/nested/migan_tiny_deconv.onnx ` | 8 | 0 | pass |  | ok |", summary)
        self.assertIn("2 of 3 models passed; report in dwdeconv-rewrite-report.json", err)

    def test_a_directory_with_a_sidecar_passes_and_earlier_outputs_are_left_out(self):
        (self.work / "models/nested/upsampler_small.input-shapes").write_text("image=1x8x16x16\n")
        (self.work / "models/nested/old.xnn.onnx").write_bytes(EXAMPLES[0].read_bytes())
        code, err, out, outputs = self.run_action(
            {"INPUT_MODELS": "models", "INPUT_TARGET": "xnnpack", "INPUT_REPORT": "reports/all.json",
             "INPUT_OUTPUT_DIR": "rewritten"})
        self.assertEqual(code, 0, err)
        report = self.report("reports/all.json")
        self.assertEqual(len(report), 3)
        self.assertTrue(all(r["exit_code"] == 0 and r["verify"]["passed"] for r in report))
        self.assertTrue(all(r["target"] == "xnnpack" for r in report))
        self.assertTrue((self.work / "rewritten/models/nested/upsampler_small.xnn.onnx").is_file())
        self.assertEqual(outputs["failed"], "0")
        self.assertNotIn("::error", out)
        # Run again: the outputs now under the output directory are not taken as models.
        code, err, _, _ = self.run_action({"INPUT_MODELS": ". models", "INPUT_TARGET": "xnnpack", "INPUT_OUTPUT_DIR": "rewritten"})
        self.assertEqual(code, 0, err)
        self.assertEqual(len(self.report()), 3)

    def test_explicit_arguments_work_without_github(self):
        code, err, out, _ = self.run_action({"GITHUB_ACTIONS": "", "GITHUB_OUTPUT": "", "GITHUB_STEP_SUMMARY": ""},
                                            ["--models", "models/nested/migan_tiny_deconv.onnx", "--verify", "false",
                                             "--target", "xnnpack", "--args", "--forms conv_transpose"])
        self.assertEqual(code, 0, err)
        self.assertEqual(out, "")  # no annotations off GitHub
        [r] = self.report()
        self.assertNotIn("verify", r)
        self.assertEqual(r["rewritten"], 8)

    def test_a_git_lfs_pointer_is_named_as_one_and_the_others_still_run(self):
        shutil.copy(SOURCE / "tests/bad_inputs/lfs_pointer.onnx", self.work / "models/pointer.onnx")
        code, err, out, _ = self.run_action({"INPUT_MODELS": "models/pointer.onnx\nmodels/nested/migan_tiny_deconv.onnx"})
        self.assertEqual(code, 3)
        self.assertIn("::error file=models/pointer.onnx,title=dwdeconv-rewrite::models/pointer.onnx "
                      "is a Git LFS pointer, not an ONNX model; check out with lfs: true", out)
        self.assertEqual([r["exit_code"] for r in self.report()], [3, 0])

    def test_nothing_matched_is_a_usage_error(self):
        code, err, out, _ = self.run_action({"INPUT_MODELS": "nowhere/*.onnx"})
        self.assertEqual(code, 2)
        self.assertIn("no ONNX model found in 'nowhere/*.onnx'", err)
        self.assertIn("::warning title=dwdeconv-rewrite::'nowhere/*.onnx' matches no .onnx file", out)
        self.assertEqual(self.run_action({"INPUT_MODELS": ""})[0], 2)
        self.assertEqual(self.run_action({"INPUT_MODELS": "m.onnx", "INPUT_MIN_SPEEDUP": "fast"})[0], 2)

    def test_the_speed_gate_compares_each_rewrite_on_the_runtime(self):
        # The gate is the rewrite's own call: --verify --bench --min-speedup on the runtime. A stand-in tool rewrites
        # and verifies through the real binary, and answers the gate as the binary does (bench.speedup in the report;
        # below the minimum, exit 1 and no output written), with an answer that depends on what it is given: the
        # speedup is the one `speedups` sets for the model's file name (1.5 unless set). A stand-in answering 1.5x
        # to every call passed a gate that ignored it, or that showed another model's figure. A model with nothing
        # rewritten goes to the real binary whole, gate and all.
        stub = self.work / "stub-tool"
        speedups = self.work / "speedups.json"
        stub.write_text(textwrap.dedent("""\
            #!%s
            import json, os, subprocess, sys
            real, args = %r, sys.argv[1:]
            gate = [float(a.split("=", 1)[1]) for a in args if a.startswith("--min-speedup=")]
            if not gate:
                os.execv(real, [real] + args)
            own = ("--bench", "--min-speedup=", "--runtime=", "--python=", "--precision=", "--threads=")
            code = subprocess.run([real] + [a for a in args if not a.startswith(own)]).returncode
            path = [a.split("=", 1)[1] for a in args if a.startswith("--report=")][0]
            report = json.load(open(path))
            if code != 0 or report["rewritten"] == 0:
                os.execv(real, [real] + args)
            speedup = json.load(open(%r)).get(os.path.basename(args[-1]), 1.5) if os.path.exists(%r) else 1.5
            passed = report["verify"]["passed"] and speedup >= gate[0]
            report.update(exit_code=0 if passed else 1, argv=args, bench={"speedup": speedup},
                          error=None if passed else "speedup %%.2fx below %%s" %% (speedup, gate[0]))
            if not passed:  # below the minimum the binary writes nothing
                os.unlink([a.split("=", 1)[1] for a in args if a.startswith("--output=")][0])
            json.dump(report, open(path, "w"))
            sys.exit(0 if passed else 1)
            """ % (sys.executable, os.environ["DWDECONV_REWRITE"], str(speedups), str(speedups))))
        stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
        # xnnpack rewrites MI-GAN's ConvTransposes, which the default keeps: a rewrite for the gate to compare.
        env = {"DWDECONV_REWRITE": str(stub), "INPUT_MODELS": "models/nested/migan_tiny_deconv.onnx",
               "INPUT_TARGET": "xnnpack"}
        code, err, out, _ = self.run_action(dict(env, INPUT_MIN_SPEEDUP="1.2", INPUT_RUNTIME="litert"))
        self.assertEqual(code, 0, err)
        [r] = self.report()
        argv = r["argv"]  # one call: the model, its output and the gate
        self.assertEqual(argv[-2:], ["--", "models/nested/migan_tiny_deconv.onnx"])
        self.assertIn("--output=dwdeconv-rewrite-out/models/nested/migan_tiny_deconv.xnn.onnx", argv)
        for option in ("--bench", "--min-speedup=1.2", "--runtime=litert", "--verify", "--python=" + sys.executable):
            self.assertIn(option, argv)
        self.assertIn("| 1.50x | ok |", (self.work / "gh-summary").read_text())
        # The summary says where the speedup was measured, and why there.
        self.assertIn("The speedup column: speed gate (min-speedup 1.2) on litert, the runtime input.",
                      (self.work / "gh-summary").read_text())
        rewritten = self.work / "dwdeconv-rewrite-out/models/nested/migan_tiny_deconv.xnn.onnx"
        self.assertTrue(rewritten.exists())
        # With no runtime input the gate runs on the target's runtime: LiteRT for --target tflite (any case).
        (self.work / "gh-summary").unlink()
        code, err, out, _ = self.run_action(dict(env, INPUT_MIN_SPEEDUP="1.2", INPUT_TARGET="TFLite"))
        self.assertEqual(code, 0, err)
        self.assertIn("--runtime=litert", self.report()[0]["argv"])
        self.assertIn("on litert, the runtime of --target litert.", (self.work / "gh-summary").read_text())
        # The default target has no runtime of its own: the tool's executor, and the summary says so. It keeps
        # MI-GAN's every ConvTranspose, so the gate times nothing (the binary's own gate, which the stand-in hands the
        # call to) and passes min-speedup 2: nothing to rewrite, the output is the input.
        (self.work / "gh-summary").unlink()
        code, err, out, _ = self.run_action(dict(env, INPUT_MIN_SPEEDUP="2", INPUT_TARGET=""))
        self.assertEqual(code, 0, err)
        [r] = self.report()
        self.assertEqual((r["target"], r["rewritten"], r["kept"]), ("default", 0, 8))
        self.assertNotIn("bench", r)
        self.assertEqual(r["exit_code"], 0)
        self.assertIn("--min-speedup 2 passes: nothing to rewrite", err + out)
        self.assertIn("ok: nothing to rewrite", (self.work / "gh-summary").read_text())
        self.assertIn("on xnnpack, this tool's executor: the default target is meant for every runtime",
                      (self.work / "gh-summary").read_text())
        # The precision and threads users ship: passed to the comparison, and said in the summary.
        (self.work / "gh-summary").unlink()
        code, err, out, _ = self.run_action(dict(env, INPUT_MIN_SPEEDUP="1.2", INPUT_TARGET="litert",
                                                 INPUT_PRECISION="INT8", INPUT_THREADS="2"))
        self.assertEqual(code, 0, err)
        argv = self.report()[0]["argv"]
        for option in ("--runtime=litert", "--precision=int8", "--threads=2"):
            self.assertIn(option, argv)
        self.assertIn("speed gate (min-speedup 1.2) on litert at int8, 2 threads, the runtime of --target litert.",
                      (self.work / "gh-summary").read_text())
        # Two models in one run, each gated on its own figure: the one at 1.1x fails min-speedup 1.2 and loses its
        # output; the one at 1.3x passes and keeps it; the summary shows each model's own figure and verdict.
        shutil.copy(self.work / "models/nested/migan_tiny_deconv.onnx", self.work / "models/nested/slow.onnx")
        speedups.write_text(json.dumps({"migan_tiny_deconv.onnx": 1.3, "slow.onnx": 1.1}))
        (self.work / "gh-summary").unlink()
        code, err, out, _ = self.run_action(dict(env, INPUT_MIN_SPEEDUP="1.2",
                                                 INPUT_MODELS="models/nested/migan_tiny_deconv.onnx\nmodels/nested/slow.onnx"))
        self.assertEqual(code, 1, err)
        gated = {Path(r["input"]).name: r for r in self.report()}
        self.assertEqual({n: (r["bench"]["speedup"], r["exit_code"]) for n, r in gated.items()},
                         {"migan_tiny_deconv.onnx": (1.3, 0), "slow.onnx": (1.1, 1)})
        self.assertIn("speedup 1.10x below 1.2", out)
        self.assertNotIn("speedup 1.30x below", out)
        rows = {cell_text(row[0]): row for row in summary_rows((self.work / "gh-summary").read_text())}
        self.assertEqual(sorted(rows), ["models/nested/migan_tiny_deconv.onnx", "models/nested/slow.onnx"])
        self.assertIn("1.30x", rows["models/nested/migan_tiny_deconv.onnx"])
        self.assertIn("ok", rows["models/nested/migan_tiny_deconv.onnx"])
        self.assertIn("1.10x", rows["models/nested/slow.onnx"])
        self.assertNotIn("ok", rows["models/nested/slow.onnx"])
        self.assertTrue(rewritten.exists())
        self.assertFalse((self.work / "dwdeconv-rewrite-out/models/nested/slow.xnn.onnx").exists())

    def test_a_model_with_nothing_rewritten_passes_the_gate_untimed_and_says_nothing_to_rewrite(self):
        # The output is the input: the tool did the right thing, and what ships is the original, so the gate passes
        # at any min-speedup and the summary says "nothing to rewrite" (before, 1.00x failed any gate over 1).
        # Timing one model twice is noise, so nothing is timed: the one call's report has no bench, and the tool says
        # there was nothing to time.
        env = {"INPUT_MODELS": "models/nested/migan_tiny_deconv.onnx",
               "INPUT_ARGS": "--forms nearest_mask"}  # none of its upsamplers is of that form: 0 rewritten
        output = self.work / "dwdeconv-rewrite-out/models/nested/migan_tiny_deconv.xnn.onnx"
        for gate in ("1.1", "1.02", "1", "0.5"):
            with self.subTest(min_speedup=gate):
                code, err, out, _ = self.run_action(dict(env, INPUT_MIN_SPEEDUP=gate))
                self.assertEqual(code, 0, err)
                self.assertIn("nothing to rewrite: no node was rewritten, so the output is the input; min-speedup %g "
                              "passes untimed" % float(gate), out)  # the tool's log: stdout on GitHub
                self.assertIn("models/nested/migan_tiny_deconv.onnx: ok: nothing to rewrite", err)
                self.assertIn("nothing to time: no node was rewritten", out)
                self.assertTrue(output.exists())
                [r] = self.report()
                self.assertEqual((r["rewritten"], r["exit_code"]), (0, 0))
                self.assertNotIn("bench", r, "the speed gate timed a model with nothing rewritten")
                self.assertIn("| 0 | 8 | pass |  | ` ok: nothing to rewrite ` |", (self.work / "gh-summary").read_text())

    def test_check_mode_gates_models_already_rewritten_and_writes_none(self):
        # "args: --check" was exit 2 (the Action always passed --output). check: true runs --check on each
        # model, writes no model, and reads the target each records (the rewrite records it) unless target is given.
        original = "models/nested/migan_tiny_deconv.onnx"
        out_dir = self.work / "dwdeconv-rewrite-out"
        code, err, out, _ = self.run_action({"INPUT_MODELS": original, "INPUT_TARGET": "xnnpack", "INPUT_CHECK": "true"})
        self.assertEqual(code, 1, err)
        self.assertIn("check failed: 8 of 8 ConvTranspose nodes would be rewritten", err)
        self.assertEqual([p for p in out_dir.rglob("*.onnx")], [], "check mode wrote a model")
        # Rewritten with --target ort, which keeps all 8 (the default would too): recorded, and check mode passes it.
        code, err, out, _ = self.run_action({"INPUT_MODELS": original, "INPUT_TARGET": "ort"})
        self.assertEqual(code, 0, err)
        written = out_dir / "models/nested/migan_tiny_deconv.xnn.onnx"
        self.assertTrue(written.exists())
        kept = self.work / "kept.onnx"
        shutil.copy(written, kept)
        shutil.rmtree(out_dir)
        code, err, out, _ = self.run_action({"INPUT_MODELS": "kept.onnx", "INPUT_CHECK": "true"})
        self.assertEqual(code, 0, err)
        self.assertIn("--check against --target ort, which the model records it was written for", out)
        self.assertEqual([p for p in out_dir.rglob("*.onnx")], [])
        # target given wins over the record: xnnpack would rewrite all 8.
        code, err, out, _ = self.run_action({"INPUT_MODELS": "kept.onnx", "INPUT_CHECK": "true", "INPUT_TARGET": "xnnpack"})
        self.assertEqual(code, 1, err)
        # Check mode times nothing: a speed gate with it is refused before any model runs.
        code, err, out, _ = self.run_action({"INPUT_MODELS": "kept.onnx", "INPUT_CHECK": "true", "INPUT_MIN_SPEEDUP": "1.1"})
        self.assertEqual(code, 2, err)
        self.assertIn("check mode writes and times nothing", err)
        code, err, out, _ = self.run_action({"INPUT_MODELS": "kept.onnx", "INPUT_CHECK": "yes"})
        self.assertEqual(code, 2, err)

    def test_an_interrupt_or_sigterm_ends_the_speed_gate_and_removes_its_unchecked_output(self):
        # Before: the KeyboardInterrupt SIGKILLed the gate's binary and left OUTPUT/...xnn.onnx, never gated, for
        # the artifact upload; SIGTERM ended the script alone, and the binary went on benching.
        output = self.work / "dwdeconv-rewrite-out/models/nested/migan_tiny_deconv.xnn.onnx"
        for sig, exit_code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
            with self.subTest(signal=sig.name):
                shutil.rmtree(self.work / "tmp", ignore_errors=True)
                code, err, seen, left, leftovers = self.interrupt_the_speed_gate(sig)
                self.assertTrue(seen, "the check's binary was running")
                self.assertEqual(left, [], "still running after %s: %s" % (sig.name, left))
                self.assertFalse(output.exists(), "the output whose speed gate did not finish is still there")
                self.assertEqual(leftovers, [])
                self.assertEqual(code, exit_code, err[-3000:])
                self.assertNotIn("Traceback", err)
                # The gate is the rewrite's own call: interrupted, it wrote neither the model nor its report, and
                # left no staged file.
                self.assertEqual(sorted(p.name for p in output.parent.iterdir()), [])


    # A hostile model file name, node name or input value.

    def test_a_file_name_forges_no_workflow_command(self):
        models = self.hostile_models()
        # xnnpack: a target that rewrites, so the model without its shapes fails its --verify.
        code, err, out, outputs = self.run_action({"INPUT_MODELS": "hostile", "INPUT_TARGET": "xnnpack"})
        self.assertEqual(code, 4)
        self.assert_only_these_commands(out, err, models, [m for m in models if m.name.startswith("fail ")])
        # Plain lines show control characters as \xNN and no legacy command.
        self.assertIn("dwdeconv-rewrite action: hostile/ok evil\\x0a::error title=forged::from a file name\\x0a  "
                      "::add-mask::x\\x0a::stop-commands::pwned\\x0d##\\x5bwarning]legacy;a:b,c %0A %25 \\x1b[31m", err)
        self.assertEqual(outputs["failed"], "1")
        self.assertEqual([r["exit_code"] for r in self.report()], [0, 4, 0])

    def test_a_node_name_in_the_tools_log_forges_no_workflow_command(self):
        # Node names holding a newline and a command each, which the tool logs (-v) escaped; the action's own guard
        # (stop-commands around the tool's log) holds for a tool that would not.
        data = EXAMPLES[0].read_bytes()
        for name, forged in ((b"syn.16.img_up", b"\n::error::XY\n"), (b"syn.16.conv1.up", b"\n##[error]abcd\n")):
            self.assertEqual(len(name), len(forged))
            data = data.replace(name, forged)
        (self.work / "nodes.onnx").write_bytes(data)
        code, err, out, _ = self.run_action({"INPUT_MODELS": "nodes.onnx", "INPUT_ARGS": "-v"})
        self.assertEqual(code, 0, err)
        self.assertIn("\\x0a::error::XY\\x0a", out + err)  # the log is shown, the tool escaping the name
        self.assert_only_these_commands(out, err, [Path("nodes.onnx")], [])
        # A tool that writes commands to stdout and ends its log without a newline forges nothing either, and the
        # error annotation after it still counts.
        stub = self.work / "stub-tool"
        stub.write_text("#!%s\nimport sys\nprint('::error::from stdout')\nsys.stderr.write('::warning::no newline')\n"
                        "sys.exit(3)\n" % sys.executable)
        stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
        code, err, out, _ = self.run_action({"INPUT_MODELS": "nodes.onnx", "DWDECONV_REWRITE": str(stub)})
        self.assertEqual(code, 3)
        self.assert_only_these_commands(out, err, [Path("nodes.onnx")], [Path("nodes.onnx")])

    def test_a_file_name_cannot_break_the_summary_table(self):
        models = self.hostile_models()
        self.run_action({"INPUT_MODELS": "hostile", "INPUT_TARGET": "xnnpack"})  # a target that rewrites: one fails
        summary = (self.work / "gh-summary").read_text()
        rows = summary_rows(summary)
        self.assertEqual(len(rows), len(models), summary)
        self.assertTrue(all(len(r) == 6 for r in rows), rows)
        self.assertEqual([cell_text(r[5]).split(":")[0] for r in rows], ["ok", "exit 4", "ok"])
        for row in rows:
            for cell in row:
                # A name or a message is one code span, which no backtick in it ends (nothing in one is markup).
                span = re.fullmatch(r"(`+) (.*) \1", cell, re.S)
                self.assertTrue(re.fullmatch(r"[0-9]*|pass|FAIL|ok", cell) or (span and span.group(1) not in span.group(2)),
                                "a cell that is not a code span: %r" % cell)
        self.assertIn("` hostile/ok evil\\x0a::error title=forged", summary)

    def test_a_name_in_the_summary_is_shown_as_it_is_and_formats_nothing(self):
        # '_' and GitHub's autolinks (www., URLs, e-mail addresses) were not escaped: "__bold__" rendered bold. Each
        # name cell is a code span now, whose fence is longer than any run of backticks in the name.
        d = self.work / "md" / "www.evil-link.com"
        d.mkdir(parents=True)
        names = ["__bold__ www.evil-link.com.onnx", "a|b`c``d.onnx", "me@evil.example *em* ~~s~~ :smile: @user #12.onnx",
                 "x\\|y https:__evil.example_x <b>&amp; $m$.onnx", "`tick.onnx"]
        for n in names:
            shutil.copy(EXAMPLES[0], d / n)
        models = sorted(str(Path("md/www.evil-link.com") / n) for n in names)
        code, err, _, _ = self.run_action({"INPUT_MODELS": "md", "INPUT_VERIFY": "false"})
        self.assertEqual(code, 0, err)
        summary = (self.work / "gh-summary").read_text()
        rows = summary_rows(summary)
        self.assertEqual([len(r) for r in rows], [6] * len(names), summary)
        for model, row in zip(models, rows):
            span = re.fullmatch(r"(`+) (.*) \1", row[0], re.S)
            self.assertIsNotNone(span, "not a code span: %r" % row[0])
            self.assertNotIn(span.group(1), span.group(2))
            self.assertEqual(span.group(2).replace("\\|", "|"), model)
        # As GitHub renders it (cmark-gfm), and as markdown-it does with its GFM tables and linkify, where installed.
        renderers = []
        try:
            import cmarkgfm
            renderers.append(("cmark-gfm", cmarkgfm.github_flavored_markdown_to_html))
        except ImportError:
            pass
        try:
            import linkify_it  # noqa: F401 - markdown-it's linkify needs it
            from markdown_it import MarkdownIt
            renderers.append(("markdown-it", MarkdownIt("gfm-like", {"linkify": True}).render))
        except ImportError:
            pass
        if not renderers:
            print("action_test: neither cmarkgfm nor markdown-it-py with linkify-it-py is importable: the summary's "
                  "rendering is not checked", file=sys.stderr)
        for what, render in renderers:
            with self.subTest(renderer=what):
                page = render(summary)
                self.assertNotRegex(page, r"<(a|strong|em|del|b|img)\b", page)
                cells = re.findall(r"<tr>\s*<td>(.*?)</td>", page, re.S)
                self.assertEqual([html.unescape(re.fullmatch(r"<code>(.*)</code>", c, re.S).group(1)) for c in cells],
                                 models, page)

    def test_a_model_name_starting_with_a_dash_is_a_file_not_options(self):
        # Given to the tool as an argument, "-v2.onnx" is -v and a model "-2.onnx": today's other file.
        shutil.copy(EXAMPLES[0], self.work / "-v2.onnx")
        shutil.copy(EXAMPLES[2], self.work / "-2.onnx")
        code, err, out, outputs = self.run_action({"INPUT_MODELS": "-v2.onnx", "INPUT_VERIFY": "false", "INPUT_TARGET": "xnnpack",
                                                   "INPUT_OUTPUT_DIR": "-out", "INPUT_REPORT": "-report.json"})
        self.assertEqual(code, 0, err)
        [r] = self.report("-report.json")
        self.assertIn(r["input"], ("-v2.onnx", "./-v2.onnx"))
        self.assertEqual(r["rewritten"], 8)  # migan_tiny_deconv's 8, not upsampler_small's 3
        self.assertTrue((self.work / "-out/-v2.xnn.onnx").is_file())
        self.assertEqual(outputs["output-dir"], "-out")

    def test_output_dir_dot_writes_each_output_beside_its_model(self):
        (self.work / "models/nested/upsampler_small.input-shapes").write_text("image=1x8x16x16\n")
        for _ in range(2):  # the second run leaves out the first one's outputs
            code, err, out, _ = self.run_action({"INPUT_MODELS": "models", "INPUT_OUTPUT_DIR": "."})
            self.assertEqual(code, 0, err)
            self.assertEqual([r["input"] for r in self.report()], ["models/nested/" + m.name for m in EXAMPLES])
        for m in EXAMPLES:
            self.assertTrue((self.work / "models/nested" / (m.stem + ".xnn.onnx")).is_file())
        # An output directory that holds the models.
        code, err, out, _ = self.run_action({"INPUT_MODELS": "models/nested", "INPUT_OUTPUT_DIR": "models"})
        self.assertEqual(code, 0, err)
        self.assertEqual(len(self.report()), 3)
        self.assertTrue((self.work / "models/models/nested/migan_tiny_deconv.xnn.onnx").is_file())


    def test_an_input_value_forges_no_step_output(self):
        # A report path with a newline: written as it is, and set as one output, not as a second line of them.
        report = "r.json\nfailed=0\nforged=1"
        code, err, out, outputs = self.run_action({"INPUT_MODELS": "models/nested/migan_tiny_deconv.onnx",
                                                   "INPUT_REPORT": report})
        self.assertEqual(code, 0, err)
        self.assertEqual(outputs, {"report": report, "output-dir": "dwdeconv-rewrite-out", "failed": "0"})
        self.assertEqual(len(self.report(report)), 1)
        self.assertIn("report in r.json\\x0afailed=0\\x0aforged=1", err)

    def test_a_file_name_that_is_not_utf8_is_shown_not_a_crash(self):
        name = os.fsdecode(b"bad\xff\xfe.onnx")
        shutil.copy(EXAMPLES[0], self.work / name)
        code, err, out, outputs = self.run_action({"INPUT_MODELS": ".", "INPUT_TARGET": "xnnpack"})
        self.assertEqual(code, 4, err)  # upsampler_small has no sidecar (xnnpack rewrites it): could not verify
        self.assertEqual(outputs["failed"], "1")
        self.assertIn("dwdeconv-rewrite action: bad\\xff\\xfe.onnx: ok", err)
        self.assertTrue((self.work / "dwdeconv-rewrite-out" / (os.fsdecode(b"bad\xff\xfe") + ".xnn.onnx")).is_file())
        self.assertIn("| ` bad\\xff\\xfe.onnx ` | 8 | 0 | pass |  | ok |", (self.work / "gh-summary").read_text())
        self.assertEqual(len(self.report()), 4)

    def test_an_output_path_taken_by_a_directory_fails_that_model_only(self):
        # models/a.onnx's output is OUT/models/a.xnn.onnx, which models/a.xnn.onnx/b.onnx's output needs as a directory.
        shutil.copy(EXAMPLES[0], self.work / "models/a.onnx")
        (self.work / "models/a.xnn.onnx").mkdir()
        shutil.copy(EXAMPLES[0], self.work / "models/a.xnn.onnx/b.onnx")
        code, err, out, outputs = self.run_action({"INPUT_MODELS": "models/a.onnx models/a.xnn.onnx"})
        self.assertEqual(code, 3, err)
        self.assertNotIn("Traceback", err)
        self.assertEqual([r["exit_code"] for r in self.report()], [0, 3])
        self.assertEqual(outputs["failed"], "1")
        self.assertIn("::error file=models/a.xnn.onnx/b.onnx,title=dwdeconv-rewrite::", out)

    def test_an_earlier_report_is_not_taken_for_this_runs(self):
        # The tool fails before it writes a report: the one an earlier run left there is not this run's.
        stale = self.work / "dwdeconv-rewrite-out/models/nested/migan_tiny_deconv.xnn.report.json"
        stale.parent.mkdir(parents=True)
        stale.write_text('{"input": "stale", "exit_code": 0, "error": "a stale report", "rewritten": 99}')
        code, err, out, _ = self.run_action({"INPUT_MODELS": "models/nested/migan_tiny_deconv.onnx",
                                             "INPUT_ARGS": "--no-such-option"})
        self.assertEqual(code, 2)
        [r] = self.report()
        self.assertNotIn("stale", json.dumps(r))
        self.assertIn("--no-such-option", r["error"])
        stale.parent.mkdir(parents=True, exist_ok=True)
        stale.write_text("[]")  # not even a report
        code, err, out, _ = self.run_action({"INPUT_MODELS": "models/nested/migan_tiny_deconv.onnx",
                                             "INPUT_ARGS": "--no-such-option"})
        self.assertEqual(code, 2)
        self.assertNotIn("Traceback", err)

    def test_an_output_that_would_overwrite_a_model_is_refused(self):
        # With output-dir ".", a.onnx's output is a.xnn.onnx: the next model, which it must not replace.
        shutil.copy(EXAMPLES[0], self.work / "a.onnx")
        shutil.copy(EXAMPLES[2], self.work / "a.xnn.onnx")
        before = (self.work / "a.xnn.onnx").read_bytes()
        code, err, out, _ = self.run_action({"INPUT_MODELS": "a.onnx\na.xnn.onnx", "INPUT_OUTPUT_DIR": ".",
                                             "INPUT_VERIFY": "false"})
        self.assertEqual(code, 2, err)
        self.assertEqual((self.work / "a.xnn.onnx").read_bytes(), before)
        self.assertEqual([r["exit_code"] for r in self.report()], [2, 0])
        self.assertIn("would overwrite the model a.xnn.onnx", self.report()[0]["error"])
        # Nor does the report replace a model.
        code, err, out, _ = self.run_action({"INPUT_MODELS": "a.onnx", "INPUT_REPORT": "./a.onnx"})
        self.assertEqual(code, 2, err)
        self.assertIn("report: './a.onnx' is one of the models", err)
        self.assertEqual((self.work / "a.onnx").read_bytes(), EXAMPLES[0].read_bytes())

    def test_the_report_replaces_only_an_earlier_report(self):
        # INPUT_REPORT naming a model's external data replaced it with JSON, and naming where a rewritten model goes
        # replaced that model with the report; both passed (exit 0).
        (self.work / "models2").mkdir()
        shutil.copy(EXAMPLES[0], self.work / "models2/ext.onnx")
        data = self.work / "models2/ext.onnx.data"
        data.write_bytes(b"\x00\x01 tensor bytes")
        (self.work / "notes.txt").write_text("not a report\n")
        env = {"INPUT_MODELS": "models2/ext.onnx", "INPUT_OUTPUT_DIR": "out3", "INPUT_VERIFY": "false"}
        for report, fragment in (("models2/ext.onnx.data", "exists and is not a report"),
                                 ("notes.txt", "exists and is not a report"),
                                 ("out3/models2/ext.xnn.onnx", "is where the rewritten model of models2/ext.onnx goes"),
                                 ("out3/models2/ext.xnn.onnx.data", "is where the external data of the rewritten model of"),
                                 ("out3/models2/ext.xnn.report.json", "is where the report of the rewrite of")):
            with self.subTest(report=report):
                code, err, out, _ = self.run_action(dict(env, INPUT_REPORT=report))
                self.assertEqual(code, 2, err)
                self.assertIn("report: '%s' %s" % (report, fragment), err)
                self.assertIn("::error title=dwdeconv-rewrite::report: ", out)
                self.assertFalse((self.work / "out3").exists(), "a model ran")
        self.assertEqual(data.read_bytes(), b"\x00\x01 tensor bytes")
        self.assertEqual((self.work / "notes.txt").read_text(), "not a report\n")
        # Once the outputs exist, the same: the rewritten model is not replaced by the report.
        code, err, _, _ = self.run_action(env)
        self.assertEqual(code, 0, err)
        rewritten = (self.work / "out3/models2/ext.xnn.onnx").read_bytes()
        code, err, _, _ = self.run_action(dict(env, INPUT_REPORT="out3/models2/ext.xnn.onnx"))
        self.assertEqual(code, 2, err)
        self.assertEqual((self.work / "out3/models2/ext.xnn.onnx").read_bytes(), rewritten)
        # An earlier report is replaced.
        for _ in range(2):
            code, err, _, _ = self.run_action(dict(env, INPUT_REPORT="reports/r.json"))
            self.assertEqual(code, 0, err)
            self.assertEqual([r["input"] for r in self.report("reports/r.json")], ["models2/ext.onnx"])

    def test_a_name_holding_a_unicode_line_separator_is_one_entry(self):
        # U+2028, U+0085, form feed and the like end no line in YAML or the runner, so none ends an entry of MODELS.
        names = ["a\u2028b.onnx", "c\x85d.onnx", "e\x0cf.onnx", "g\x1ch.onnx"]
        for n in names:
            shutil.copy(EXAMPLES[0], self.work / n)
        code, err, out, _ = self.run_action({"INPUT_MODELS": "\n".join(names), "INPUT_VERIFY": "false",
                                             "INPUT_TARGET": "xnnpack"})
        self.assertEqual(code, 0, err)
        self.assertEqual([r["rewritten"] for r in self.report()], [8, 8, 8, 8])
        self.assertIn("dwdeconv-rewrite action: a\\u2028b.onnx: ok", err)

    def test_a_named_file_whose_name_holds_glob_characters_is_that_file(self):
        # "net[v2].onnx" was taken for a glob, which matches "netv.onnx" or "net2.onnx" but not itself: the model
        # was skipped with a warning and the run passed on the other one (exit 0).
        (self.work / "m6").mkdir()
        for name in ("net[v2].onnx", "other.onnx", "w*ld?.onnx"):
            shutil.copy(EXAMPLES[0], self.work / "m6" / name)
        shutil.copy(EXAMPLES[0], self.work / "m6" / "net2.onnx")  # what the glob would match
        code, err, out, _ = self.run_action({"INPUT_MODELS": "m6/net[v2].onnx m6/other.onnx m6/w*ld?.onnx",
                                             "INPUT_VERIFY": "false"})
        self.assertEqual(code, 0, err)
        self.assertNotIn("matches no", err)
        self.assertEqual([r["input"] for r in self.report()], ["m6/net[v2].onnx", "m6/other.onnx", "m6/w*ld?.onnx"])
        self.assertIn("3 of 3 models passed", err)
        self.assertTrue((self.work / "dwdeconv-rewrite-out/m6/net[v2].xnn.onnx").is_file())
        # A pattern that names no file is still a glob.
        code, err, out, _ = self.run_action({"INPUT_MODELS": "m6/net[2].onnx", "INPUT_VERIFY": "false"})
        self.assertEqual(code, 0, err)
        self.assertEqual([r["input"] for r in self.report()], ["m6/net2.onnx"])

    def test_a_glob_does_not_follow_a_link_to_a_directory(self):
        # A link to an ancestor made glob.glob repeat every model below it until ELOOP (two links: 2**40 paths).
        os.symlink("..", self.work / "models/nested/up")
        code, err, out, _ = self.run_action({"INPUT_MODELS": "models/**/*.onnx"}, timeout=120)
        self.assertEqual([r["input"] for r in self.report()], ["models/nested/" + m.name for m in EXAMPLES])
        os.symlink("..", self.work / "models/nested/up2")
        os.symlink("/", self.work / "models/root")
        code, err, out, _ = self.run_action({"INPUT_MODELS": "models/**/*.onnx"}, timeout=120)
        self.assertEqual(len(self.report()), 3)

    def test_bad_inputs_are_refused_before_any_rewrite_and_shown_escaped(self):
        for env, fragment in (({"INPUT_MIN_SPEEDUP": "nan"}, "min-speedup: 'nan' is not a finite number > 0"),
                              ({"INPUT_MIN_SPEEDUP": "-1"}, "min-speedup: '-1' is not a finite number > 0"),
                              ({"INPUT_MIN_SPEEDUP": "1\n::error::x"}, "'1\\x0a::error::x' is not a finite number"),
                              ({"INPUT_RUNTIME": "tflite\n::error::x"}, "tflite\\x0a::error::x"),
                              ({"INPUT_VERIFY": "yes\n::error::x"}, "yes\\x0a::error::x"),
                              ({"INPUT_REPORT": "models"}, "report: 'models' is a directory"),
                              ({"INPUT_PRECISION": "int8"}, "precision: only the speed gate runs the models"),
                              ({"INPUT_THREADS": "2"}, "threads: only the speed gate runs the models"),
                              ({"INPUT_MIN_SPEEDUP": "1.1", "INPUT_PRECISION": "int8"},
                               "precision: 'int8' is not one of fp32 on xnnpack"),
                              ({"INPUT_MIN_SPEEDUP": "1.1", "INPUT_RUNTIME": "ort", "INPUT_PRECISION": "fp16"},
                               "precision: 'fp16' is not one of fp32 on ort"),
                              ({"INPUT_MIN_SPEEDUP": "1.1", "INPUT_RUNTIME": "litert", "INPUT_PRECISION": "int4\n::error::x"},
                               "'int4\\x0a::error::x' is not one of fp32, fp16, int8 on litert"),
                              ({"INPUT_MIN_SPEEDUP": "1.1", "INPUT_THREADS": "0"}, "threads: '0' is not a whole number"),
                              ({"INPUT_MIN_SPEEDUP": "1.1", "INPUT_THREADS": "257"}, "threads: '257' is not a whole number"),
                              ({"INPUT_MIN_SPEEDUP": "1.1", "INPUT_THREADS": "1e3"}, "threads: '1e3' is not a whole number"),
                              ({"INPUT_MIN_SPEEDUP": "1.1", "INPUT_THREADS": "2\n::error::x"}, "'2\\x0a::error::x' is not")):
            with self.subTest(env=env):
                code, err, out, _ = self.run_action(dict(env, INPUT_MODELS="models/nested/migan_tiny_deconv.onnx"))
                self.assertEqual(code, 2, err)
                self.assertIn(fragment, err)
                self.assertEqual(workflow_commands(err)[0], [])
                self.assertEqual([c[0] for c in workflow_commands(out)[0]], ["error"])
                self.assertFalse((self.work / "dwdeconv-rewrite-out").exists())

    def test_a_long_verdict_keeps_the_summary_under_githubs_limit(self):
        # GitHub drops a job summary over 128 KiB: 300 models that each fail with a 2 KB message stay under it.
        stub = self.work / "stub-tool"
        stub.write_text(textwrap.dedent("""\
            #!%s
            import json, sys
            args = sys.argv[1:]
            report = [a.split("=", 1)[1] for a in args if a.startswith("--report=")] or [args[args.index("--report") + 1]]
            json.dump({"exit_code": 3, "error": "x" * 2000}, open(report[0], "w"))
            sys.exit(3)
            """ % sys.executable))
        stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
        names = ["m%03d.onnx" % i for i in range(300)]
        for n in names:
            (self.work / n).write_bytes(b"")
        code, err, out, _ = self.run_action({"INPUT_MODELS": "\n".join(names), "DWDECONV_REWRITE": str(stub),
                                             "GITHUB_ACTIONS": ""})
        self.assertEqual(code, 3)
        summary = (self.work / "gh-summary").read_bytes()
        self.assertLess(len(summary), 128 * 1024)
        self.assertIn(b"0 of 300 models passed", summary)
        self.assertIn(b"see the report", summary)
        self.assertEqual(len(self.report()), 300)


class ActionYamlTest(ActionYamlCase):
    """action.yml itself: what its install step installs for each runtime, and that it declares run.py's outputs."""

    def assert_installs(self, calls, url, extra):
        """pip's commands: the wheel built (a miss: the cache is empty), installed from its file alone (no index, no
        dependencies), and then, for a gate's runtime, the extra against that wheel once stored in the cache (`url`)."""
        self.assertEqual([c[:3] for c in calls], [["-m", "pip", "wheel"], ["-m", "pip", "install"]]
                         + ([["-m", "pip", "install"]] if extra else []))
        self.assertRegex(calls[1][-1], r"^dwdeconv-rewrite @ file:///.*/%s$" % re.escape(self.WHEEL))
        self.assertTrue({"--no-index", "--no-deps"} <= set(calls[1]), calls[1])
        if extra:
            self.assertEqual(calls[2][-1], "dwdeconv-rewrite%s @ %s" % (extra, url))

    def test_each_runtime_installs_its_extra(self):
        try:
            import tomllib
        except ImportError:
            tomllib = None
        if tomllib is not None:
            extras = tomllib.loads((SOURCE / "pyproject.toml").read_text())["project"]["optional-dependencies"]
        for runtime, extra in (("xnnpack", ""), ("ort", "[ort]"), ("litert", "[litert]"),
                               ("executorch", "[executorch]"), ("openvino", "[openvino]"), ("mnn", "[mnn]")):
            with self.subTest(runtime=runtime):
                code, log, calls, url = self.run_install_step(runtime=runtime, min_speedup="1.1")
                self.assertEqual(code, 0, log)
                self.assert_installs(calls, url, extra)
                if tomllib is not None and extra:
                    self.assertIn(extra.strip("[]"), extras)
        # Without a speed gate nothing runs on the runtime: no extras.
        code, log, calls, url = self.run_install_step(runtime="litert")
        self.assertEqual(code, 0, log)
        self.assert_installs(calls, url, "")

    def test_without_a_runtime_input_the_target_decides_which_extra(self):
        for target, extra in (("", ""), ("default", ""), ("xnnpack", ""), ("litert", "[litert]"), ("TFLite", "[litert]"),
                              ("onnxruntime", "[ort]"), ("ExecuTorch", "[executorch]")):
            with self.subTest(target=target):
                code, log, calls, url = self.run_install_step(runtime="", target=target, min_speedup="1.1")
                self.assertEqual(code, 0, log)
                self.assert_installs(calls, url, extra)
        code, log, calls, _ = self.run_install_step(runtime="", target="tflight", min_speedup="1.1")
        self.assertEqual(code, 2, log)
        self.assertEqual(calls, [])
        self.assertIn("target: not one of", log)

    def test_the_built_wheel_is_restored_and_saved_under_one_key(self):
        # action/cache_key.sh keys it; actions/cache/restore brings it back (an exact key, no restore-keys, which could
        # restore another version's wheel); install.sh installs it or builds it; the save follows the build at once,
        # also when a later step fails, and never after a hit (an entry is never replaced).
        steps = self.action["runs"]["steps"]
        key, restore, install, save = steps[:4]
        self.assertEqual((key["id"], key["run"]), ("cache-key", '"$GITHUB_ACTION_PATH/action/cache_key.sh"'))
        self.assertEqual(key["env"], {"RUNNER_OS": "${{ runner.os }}", "RUNNER_ARCH": "${{ runner.arch }}"})
        self.assertEqual((restore["id"], restore["uses"]), ("restore", "actions/cache/restore@v4"))
        self.assertEqual((install["id"], install["run"]), ("install", '"$GITHUB_ACTION_PATH/action/install.sh"'))
        self.assertEqual(install["env"]["DWDECONV_WHEEL_CACHE"], "${{ steps.cache-key.outputs.dir }}")
        self.assertEqual(save["uses"], "actions/cache/save@v4")
        for step in (restore, save):
            self.assertEqual(step["with"], {"path": "${{ steps.cache-key.outputs.dir }}",
                                            "key": "${{ steps.cache-key.outputs.key }}"})
        self.assertEqual(save["if"], "always() && steps.install.outputs.store == 'true' && "
                                     "steps.restore.outputs.cache-hit != 'true'")
        # The steps after it run the venv install.sh makes.
        [run] = [s for s in steps if s.get("id") == "run"]
        self.assertIn("$RUNNER_TEMP/dwdeconv-rewrite-venv/bin/python", run["run"])
        self.assertIn('venv=$temp/dwdeconv-rewrite-venv', (SOURCE / "action" / "install.sh").read_text())

    def test_the_gate_runtime_names_agree_with_the_binary(self):
        # action/gate_runtime.py maps names as --target does (rewrite/targets.json): what the binary calls each name
        # in its report, and the runtime its summary points a target to, are gate_runtime's answers.
        gate = self.gate_runtime_module()
        tool = os.environ["DWDECONV_REWRITE"]
        with tempfile.TemporaryDirectory() as tmp:
            for name in ("default", "DEFAULT", "xnnpack", "XNNPACK", "litert", "LiteRT", "tflite", "TFLite", "ort", "ORT",
                         "onnxruntime", "OnnxRuntime", "executorch", "ExecuTorch", "openvino", "OV", "mnn", "MNN"):
                with self.subTest(name=name):
                    report = Path(tmp) / "r.json"
                    model = SOURCE / "examples" / "migan_tiny_deconv.onnx"
                    r = subprocess.run([tool, str(model), "-o", str(Path(tmp) / "o.onnx"), "--target", name, "--verify",
                                        "--report", str(report)], capture_output=True, text=True)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    canonical = json.loads(report.read_text())["target"]
                    self.assertEqual(gate.canonical(name), canonical)
                    pointed = re.search(r"--runtime (\w+) would check there", r.stderr)
                    runtime, why = gate.gate_runtime(name, "")
                    if canonical == "default":
                        self.assertEqual((runtime, pointed), ("xnnpack", None))
                    else:
                        self.assertEqual(runtime, canonical)
                        self.assertEqual(why, "the runtime of --target " + canonical)
                    if pointed:  # a rewrite checked elsewhere than the target's runtime names it
                        self.assertEqual(runtime, pointed.group(1))
        # ncnn is --target ncnn's runtime but no gate runtime (its extra pulls torch): a gate must be told where to run.
        with self.assertRaisesRegex(gate.BadInput, "the speed gate does not run on ncnn, the runtime of --target ncnn"):
            gate.gate_runtime("NCNN", "")
        self.assertEqual(gate.gate_runtime("ncnn", "xnnpack"), ("xnnpack", "the runtime input"))

    def test_an_unknown_runtime_is_refused_before_anything_is_installed(self):
        code, log, calls, _ = self.run_install_step(runtime="tflite\n::warning::forged", min_speedup="1.1")
        self.assertEqual(code, 2, log)
        self.assertEqual(calls, [])
        [(name, _, message)] = workflow_commands(log)[0]
        self.assertEqual(name, "error")
        self.assertIn("runtime: not one of xnnpack, ort, litert, executorch, openvino, mnn", message)

    def test_every_output_run_py_sets_is_declared(self):
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copy(EXAMPLES[0], Path(tmp) / "m.onnx")
            env = {k: v for k, v in os.environ.items() if not k.startswith("INPUT_")}
            env.update(GITHUB_ACTIONS="true", GITHUB_OUTPUT=str(Path(tmp) / "out"), INPUT_MODELS="m.onnx")
            subprocess.run([sys.executable, str(SCRIPT)], cwd=tmp, env=env, capture_output=True, check=True)
            set_by_run_py = read_github_output((Path(tmp) / "out").read_text())
        declared = self.action["outputs"]
        self.assertEqual(sorted(declared), sorted(set_by_run_py))
        for name, output in declared.items():
            self.assertEqual(output["value"], "${{ steps.run.outputs.%s }}" % name)


    def test_the_artifact_holds_the_report_and_the_outputs_only(self):
        # With output-dir ".", uploading output-dir would upload the whole working directory, models and all.
        [upload] = [s for s in self.action["runs"]["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            (work / "models").mkdir()
            for m in EXAMPLES[:2]:
                shutil.copy(m, work / "models" / m.name)
            (work / "README.md").write_text("not an output\n")
            env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_"))}
            env.update(INPUT_MODELS="models", INPUT_OUTPUT_DIR=".")
            subprocess.run([sys.executable, str(SCRIPT)], cwd=tmp, env=env, capture_output=True, check=True)
            values = {"report": "dwdeconv-rewrite-report.json", "output-dir": "."}
            uploaded = set()
            for line in upload["with"]["path"].splitlines():
                pattern = re.sub(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", lambda m: values[m.group(1)], line.strip())
                for hit in glob.glob(str(work / pattern), recursive=True):
                    hit = Path(hit)
                    uploaded |= {p for p in hit.rglob("*") if p.is_file()} if hit.is_dir() else {hit}
            uploaded = sorted(str(p.resolve().relative_to(work.resolve())) for p in uploaded)
        self.assertEqual(uploaded, ["dwdeconv-rewrite-report.json"] + sorted(
            "models/%s.xnn.%s" % (m.stem, ext) for m in EXAMPLES[:2] for ext in ("onnx", "report.json")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
