"""action/run.py, the action's script, run locally with the INPUT_* variables and the GitHub files a workflow
gives it (GITHUB_ACTIONS, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY), on copies of examples/*.onnx: a glob, a
directory, a sidecar .input-shapes, a Git LFS pointer, nothing matched, and the speed gate's plumbing.

ctest supplies DWDECONV_REWRITE (the built binary), DWDECONV_SOURCE_DIR and PYTHONPATH=<source>/python.
"""

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

SOURCE = Path(os.environ["DWDECONV_SOURCE_DIR"])
SCRIPT = SOURCE / "action" / "run.py"
EXAMPLES = sorted((SOURCE / "examples").glob("*.onnx"))  # migan_tiny_deconv, migan_tiny_handwritten, upsampler_small


class ActionScriptTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.work = Path(self.tmp.name)
        models = self.work / "models" / "nested"
        models.mkdir(parents=True)
        for m in EXAMPLES:
            shutil.copy(m, models / m.name)
        self.assertEqual(len(EXAMPLES), 3)

    def tearDown(self):
        self.tmp.cleanup()

    def run_action(self, env=None, args=()):
        """Runs the script in the work directory as a workflow step would; (exit code, stderr, stdout, outputs)."""
        github = {"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(self.work / "gh-output"),
                  "GITHUB_STEP_SUMMARY": str(self.work / "gh-summary")}
        for f in ("gh-output", "gh-summary"):
            (self.work / f).write_text("")
        full = {k: v for k, v in os.environ.items() if not k.startswith("INPUT_")}
        full.update(github)
        full.update(env or {})
        r = subprocess.run([sys.executable, str(SCRIPT)] + list(args), cwd=self.work, capture_output=True, text=True,
                           env=full)
        sys.stderr.write(r.stderr[-3000:])
        outputs = dict(line.split("=", 1) for line in (self.work / "gh-output").read_text().splitlines())
        return r.returncode, r.stderr, r.stdout, outputs

    def report(self, name="dwdeconv-rewrite-report.json"):
        return json.loads((self.work / name).read_text())

    def test_a_glob_rewrites_and_verifies_each_model_and_a_model_without_its_shapes_fails(self):
        code, err, out, outputs = self.run_action({"INPUT_MODELS": "models/**/*.onnx"})
        # upsampler_small has symbolic dims: without a sidecar its --verify cannot run (exit 1); the others pass.
        self.assertEqual(code, 1)
        report = self.report()
        self.assertEqual([r["input"] for r in report], ["models/nested/" + m.name for m in EXAMPLES])
        self.assertEqual([r["exit_code"] for r in report], [0, 0, 1])
        self.assertTrue(report[0]["verify"]["passed"])
        self.assertTrue((self.work / "dwdeconv-rewrite-out/models/nested/migan_tiny_deconv.xnn.onnx").is_file())
        self.assertFalse((self.work / "dwdeconv-rewrite-out/models/nested/upsampler_small.xnn.onnx").exists())
        self.assertIn("::error file=models/nested/upsampler_small.onnx,title=dwdeconv-rewrite::", out)
        self.assertIn("::group::models/nested/migan_tiny_deconv.onnx", out)
        self.assertEqual(outputs, {"report": "dwdeconv-rewrite-report.json", "output-dir": "dwdeconv-rewrite-out",
                                   "failed": "1"})
        summary = (self.work / "gh-summary").read_text()
        self.assertIn("2 of 3 models passed", summary)
        self.assertIn("| models/nested/migan_tiny_deconv.onnx | 8 | 0 | pass |  | ok |", summary)
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
                                             "--args", "--forms conv_transpose"])
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
        # A stand-in tool: rewrites through the real binary, and answers --compare ... --min-speedup as the --runtime
        # issue's CLI does (a report with bench.speedup; exit 1 below the minimum), with a speedup of 1.5.
        stub = self.work / "stub-tool"
        stub.write_text(textwrap.dedent("""\
            #!%s
            import json, os, sys
            args = sys.argv[1:]
            if "--compare" not in args:
                os.execv(%r, [%r] + args)
            gate = [float(a.split("=", 1)[1]) for a in args if a.startswith("--min-speedup=")]
            passed = not gate or 1.5 >= gate[0]
            with open(args[args.index("--report") + 1], "w") as f:
                json.dump({"exit_code": 0 if passed else 1, "error": None if passed else "speedup 1.50x below %%s" %% gate[0],
                           "bench": {"speedup": 1.5}, "argv": args}, f)
            sys.exit(0 if passed else 1)
            """ % (sys.executable, os.environ["DWDECONV_REWRITE"], os.environ["DWDECONV_REWRITE"])))
        stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
        env = {"DWDECONV_REWRITE": str(stub), "INPUT_MODELS": "models/nested/migan_tiny_deconv.onnx"}
        code, err, out, _ = self.run_action(dict(env, INPUT_MIN_SPEEDUP="1.2", INPUT_RUNTIME="litert"))
        self.assertEqual(code, 0, err)
        [r] = self.report()
        argv = r["speed_check"]["argv"]
        self.assertEqual(argv[:3], ["models/nested/migan_tiny_deconv.onnx", "--compare",
                                    "dwdeconv-rewrite-out/models/nested/migan_tiny_deconv.xnn.onnx"])
        for option in ("--bench", "--min-speedup=1.2", "--runtime=litert", "--verify"):
            self.assertIn(option, argv)
        self.assertIn("| 1.50x | ok |", (self.work / "gh-summary").read_text())
        rewritten = self.work / "dwdeconv-rewrite-out/models/nested/migan_tiny_deconv.xnn.onnx"
        self.assertTrue(rewritten.exists())
        code, err, out, _ = self.run_action(dict(env, INPUT_MIN_SPEEDUP="2"))
        self.assertEqual(code, 1)
        self.assertIn("speed check on xnnpack: speedup 1.50x below 2.0 (speedup 1.5, minimum 2)", out)
        # A model that failed its gate is not left for the artifact upload (review R2).
        self.assertFalse(rewritten.exists())


if __name__ == "__main__":
    unittest.main(verbosity=2)
