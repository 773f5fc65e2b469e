"""The Python API's argument handling against the real binary: a model as a path, bytes or an onnx.ModelProto,
Result (and Result.save) and CheckResult, compare() and its deprecated alias check(), DwdeconvError with the
binary's exit code and the model named as the caller gave it, and `python -m dwdeconv_rewrite`.

ctest supplies DWDECONV_REWRITE (the built binary), DWDECONV_SOURCE_DIR and PYTHONPATH=<source>/python. The
ModelProto cases need the onnx package and are skipped, saying so, without it; every other case runs.
"""

import contextlib
import filecmp
import gc
import json
import os
import stat
import subprocess
import sys
import importlib.util
import signal
import tempfile
import textwrap
import time
import unittest
import warnings
from pathlib import Path

import dwdeconv_rewrite
from dwdeconv_rewrite import DwdeconvError
from process_tree import alive, cmdline, descendants, kill_all, wait_for

EXAMPLES = Path(os.environ["DWDECONV_SOURCE_DIR"]) / "examples"
MIGAN = EXAMPLES / "migan_tiny_deconv.onnx"  # 8 depthwise ConvTranspose nodes: xnnpack rewrites all, the default none
# The target of the tests that need a rewrite: the default keeps every ConvTranspose (no join converts and pays on all
# six runtimes; DefaultTargetTest), while xnnpack rewrites MIGAN's 8, each joined with a DepthToSpace.
REWRITING = "xnnpack"
SMALL = EXAMPLES / "upsampler_small.onnx"  # symbolic input dims: --verify needs --input-shape
LFS_POINTER = Path(os.environ["DWDECONV_SOURCE_DIR"]) / "tests" / "bad_inputs" / "lfs_pointer.onnx"

try:
    import onnx
    from onnx import numpy_helper
except ImportError:
    onnx = None


@contextlib.contextmanager
def without_onnx():
    """`import onnx` fails inside, as where onnx is not installed."""
    saved = sys.modules.get("onnx")
    sys.modules["onnx"] = None
    try:
        yield
    finally:
        if saved is None:
            del sys.modules["onnx"]
        else:
            sys.modules["onnx"] = saved


@contextlib.contextmanager
def working_directory(path):
    saved = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(saved)


def argv_stub(folder):
    """A stand-in binary in `folder` that writes a report holding the arguments it was given ("argv"); its path."""
    stub = Path(folder) / "stub"
    stub.write_text(textwrap.dedent("""\
        #!%s
        import json, sys
        args = sys.argv[1:]
        json.dump({"exit_code": 0, "argv": args}, open(args[args.index("--report") + 1], "w"))
        """ % sys.executable))
    stub.chmod(0o755)
    return str(stub)


@contextlib.contextmanager
def environment(**values):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def op_types(model):
    """The op types of `model` (bytes or a ModelProto) in node order; None without the onnx package."""
    if onnx is None:
        return None
    return [n.op_type for n in (model if isinstance(model, onnx.ModelProto) else onnx.load_from_string(model)).graph.node]


class RewrittenStructure:
    def assert_rewritten_migan(self, model):
        """`model` is MIGAN rewritten for REWRITING: not the input, every ConvTranspose gone, one DepthToSpace join per
        upsampler (8), as examples/make_examples.cpp builds it and that target rewrites."""
        same = (model if isinstance(model, bytes) else model.SerializeToString()) == MIGAN.read_bytes()
        self.assertFalse(same, "the model is the input, unchanged")
        ops = op_types(model)
        if ops is not None:
            self.assertEqual(op_types(MIGAN.read_bytes()).count("ConvTranspose"), 8)
            self.assertEqual((ops.count("ConvTranspose"), ops.count("DepthToSpace")), (0, 8), ops)


class RewriteTest(unittest.TestCase, RewrittenStructure):
    def test_a_path_gives_bytes_without_onnx_and_the_report_as_a_dict(self):
        with without_onnx():
            r = dwdeconv_rewrite.rewrite(str(MIGAN), target=REWRITING)
        self.assertIsInstance(r.model, bytes)
        self.assertEqual((r.rewritten, r.kept, r.verified), (8, 0, None))
        self.assertEqual(r.report["input"], str(MIGAN))
        self.assertEqual(r.report["exit_code"], 0)
        self.assertIsNone(r.path)
        # The bytes are the model the command line writes.
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out.onnx"
            subprocess.run([os.environ["DWDECONV_REWRITE"], str(MIGAN), "-o", str(out), "-q", "--target", REWRITING],
                           check=True)
            self.assertEqual(r.model, out.read_bytes())

    def test_bytes_and_a_pathlike_give_the_same_model(self):
        with without_onnx():
            from_bytes = dwdeconv_rewrite.rewrite(MIGAN.read_bytes(), target=REWRITING)
            from_path = dwdeconv_rewrite.rewrite(MIGAN, target=REWRITING)
            from_memoryview = dwdeconv_rewrite.rewrite(memoryview(MIGAN.read_bytes()), target=REWRITING)
        self.assertEqual(from_bytes.model, from_path.model)
        self.assertEqual(from_memoryview.model, from_path.model)
        self.assertEqual(from_bytes.rewritten, 8)
        self.assert_rewritten_migan(from_path.model)

    def test_verify_and_input_shapes_reach_the_binary(self):
        with without_onnx():
            r = dwdeconv_rewrite.rewrite(MIGAN, verify=True, target=REWRITING)
            self.assertTrue(r.verified)
            self.assertEqual(r.report["verify"]["mode"], "whole-model")
            with self.assertRaises(DwdeconvError) as no_shape:
                dwdeconv_rewrite.rewrite(SMALL, verify=True, target="xnnpack")
            # Could not verify (no shape for the symbolic dims): its own code, not a failed verification's 1.
            self.assertEqual(no_shape.exception.exit_code, 4)
            self.assertEqual(dwdeconv_rewrite.EXIT_CANNOT_VERIFY, 4)
            self.assertIn("--input-shape image=", no_shape.exception.message)
            self.assertIsNotNone(no_shape.exception.report)
            self.assertEqual(no_shape.exception.report["exit_code"], 4)
            shaped = dwdeconv_rewrite.rewrite(SMALL, verify=True, target="xnnpack", input_shapes={"image": (1, 8, 16, 16)})
            self.assertTrue(shaped.verified)
            as_text = dwdeconv_rewrite.rewrite(SMALL, verify=True, target="xnnpack", input_shapes=["image=1x8x16x16"])
            self.assertEqual(as_text.model, shaped.model)

    def test_only_skip_and_forms_take_a_str_or_a_list(self):
        with without_onnx():
            names = [n["name"] for n in dwdeconv_rewrite.rewrite(MIGAN, target=REWRITING).report["nodes"]]
            self.assertEqual(dwdeconv_rewrite.rewrite(MIGAN, target=REWRITING, skip=names[0]).kept, 1)
            self.assertEqual(dwdeconv_rewrite.rewrite(MIGAN, target=REWRITING, skip=names[:3]).kept, 3)
            self.assertEqual(dwdeconv_rewrite.rewrite(MIGAN, target=REWRITING, only=(names[1],)).rewritten, 1)
            self.assertEqual(dwdeconv_rewrite.rewrite(MIGAN, target=REWRITING, forms="nearest_mask").rewritten, 0)
            self.assertEqual(dwdeconv_rewrite.rewrite(MIGAN, target=REWRITING,
                                                      forms=["conv_transpose", "nearest_mask"]).rewritten, 8)
            with self.assertRaises(DwdeconvError) as typo:
                dwdeconv_rewrite.rewrite(MIGAN, only="no_such_node")
            self.assertEqual(typo.exception.exit_code, 2)
            self.assertIn("no_such_node", typo.exception.message)

    def test_output_keeps_the_file(self):
        with tempfile.TemporaryDirectory() as tmp, without_onnx():
            out = Path(tmp) / "-starts-with-a-dash.onnx"
            r = dwdeconv_rewrite.rewrite(MIGAN, output=out)
            self.assertEqual(out.read_bytes(), r.model)
            self.assertEqual(r.path, str(out))

    def test_a_path_starting_with_a_dash_or_given_as_bytes_is_a_file(self):
        # Relative paths in a directory that also holds "-2.onnx", which "-v2.onnx" read as options would name.
        class BytesPath:
            def __fspath__(self):
                return b"-v2.onnx"

        with tempfile.TemporaryDirectory() as tmp, working_directory(tmp), without_onnx():
            Path("-v2.onnx").write_bytes(MIGAN.read_bytes())
            Path("-2.onnx").write_bytes(SMALL.read_bytes())
            for model in ("-v2.onnx", Path("-v2.onnx"), BytesPath()):
                with self.subTest(model=model):
                    r = dwdeconv_rewrite.rewrite(model, output=b"-out.onnx", target=REWRITING)
                    self.assertEqual(r.rewritten, 8)
                    self.assertEqual(Path("-out.onnx").read_bytes(), r.model)
            # The speed gate's call: both models as paths that look like options.
            self.assertTrue(dwdeconv_rewrite.compare("-v2.onnx", "-out.onnx").passed)
            self.assertFalse(dwdeconv_rewrite.compare("-v2.onnx", "-2.onnx").passed)

    def test_every_failure_is_one_exception_with_the_exit_code_and_the_message(self):
        with without_onnx():
            cases = [
                (b"this is not a model", 3, "not a valid ONNX ModelProto"),
                (LFS_POINTER.read_bytes(), 3, "is a Git LFS pointer, not an ONNX model; check out with lfs: true"),
                ("/no/such/model.onnx", 3, "/no/such/model.onnx"),
            ]
            for model, code, fragment in cases:
                with self.subTest(model=model), self.assertRaises(DwdeconvError) as e:
                    dwdeconv_rewrite.rewrite(model)
                self.assertEqual(e.exception.exit_code, code)
                self.assertIn(fragment, e.exception.message)
                self.assertIn("(exit %d)" % code, str(e.exception))
            with self.assertRaises(DwdeconvError) as e:
                dwdeconv_rewrite.rewrite(MIGAN, target="no_such_target")
            self.assertEqual(e.exception.exit_code, 2)
            self.assertIn("unknown target 'no_such_target'", e.exception.message)
            self.assertIn("error", e.exception.log)
            with self.assertRaises(DwdeconvError) as e:  # refused by the option parser
                dwdeconv_rewrite.rewrite(MIGAN, args=["--no-such-option"])
            self.assertEqual(e.exception.exit_code, 2)
            self.assertEqual(e.exception.message, "unknown option '--no-such-option' (see --help)")
            for bad in (42, None, [b"x"], {"model": 1}):
                with self.subTest(bad=bad), self.assertRaises(DwdeconvError) as e:
                    dwdeconv_rewrite.rewrite(bad)
                self.assertEqual(e.exception.exit_code, 2)
                self.assertIn("expected a path, bytes or an onnx.ModelProto", e.exception.message)
            for kwargs in ({"verify": "yes"}, {"target": 3}, {"only": 5}, {"input_shapes": {"image": "x"}},
                           {"input_shapes": {"image": [1, "a"]}}, {"input_shapes": {"image": (1, 8, 8, 8.7)}},
                           {"input_shapes": {"image": (1, True, 8, 8)}}):
                with self.subTest(kwargs=kwargs), self.assertRaises(DwdeconvError) as e:
                    dwdeconv_rewrite.rewrite(MIGAN, **kwargs)
                self.assertEqual(e.exception.exit_code, 2)

    def test_no_binary_is_exit_127(self):
        with environment(DWDECONV_REWRITE="/no/such/dwdeconv-rewrite"), self.assertRaises(DwdeconvError) as e:
            dwdeconv_rewrite.rewrite(MIGAN)
        self.assertEqual(e.exception.exit_code, 127)
        self.assertIn("DWDECONV_REWRITE=/no/such/dwdeconv-rewrite", e.exception.message)

    @unittest.skipIf(onnx is None, "the onnx package is not importable here")
    def test_a_model_proto_in_gives_a_model_proto_out(self):
        model = onnx.load(str(MIGAN))
        r = dwdeconv_rewrite.rewrite(model, verify=True, target=REWRITING)
        self.assertIsInstance(r.model, onnx.ModelProto)
        ops = [n.op_type for n in r.model.graph.node]
        self.assertEqual(ops.count("ConvTranspose"), 0)
        self.assertEqual(ops.count("DepthToSpace"), 8)
        self.assertTrue(r.verified)
        # The same model as from the file.
        self.assertEqual(r.model.SerializeToString(), dwdeconv_rewrite.rewrite(str(MIGAN), target=REWRITING).model.SerializeToString())


class DefaultTargetTest(unittest.TestCase):
    def test_the_default_keeps_every_conv_transpose_and_says_why(self):
        # No join both converts and pays on all six runtimes, so without target= MIGAN's depthwise ConvTransposes stay,
        # each with the reason in the report, and no Gather or DepthToSpace join is written.
        with without_onnx():
            r = dwdeconv_rewrite.rewrite(MIGAN)
        self.assertEqual((r.rewritten, r.kept), (0, 8))
        self.assertEqual(r.report["target"], "default")
        self.assertEqual([n["decision"] for n in r.report["nodes"]], ["kept"] * 8)
        for node in r.report["nodes"]:
            with self.subTest(node=node["name"]):
                self.assertIn("no join both converts", node["reason"])
                self.assertTrue(node["reason"].endswith("kept by default"), node["reason"])
        ops = op_types(r.model)
        if ops is not None:
            self.assertEqual(ops.count("ConvTranspose"), 8, ops)
            self.assertEqual((ops.count("Gather"), ops.count("DepthToSpace")), (0, 0), ops)


class CompareTest(unittest.TestCase, RewrittenStructure):
    def test_a_rewrite_passes_against_its_original(self):
        with without_onnx():
            r = dwdeconv_rewrite.rewrite(MIGAN, target=REWRITING)
            # What was compared is a rewrite: compare(MIGAN, MIGAN) passes too, so a rewrite() that handed back its
            # input would pass the rest of this test.
            self.assert_rewritten_migan(r.model)
            checked = dwdeconv_rewrite.compare(MIGAN, r)
            self.assertTrue(checked.passed)
            self.assertTrue(checked)
            self.assertIsNone(checked.speedup)
            self.assertEqual(checked.report["verify"]["mode"], "whole-model")
            timed = dwdeconv_rewrite.compare(str(MIGAN), r.model, bench=True, args=["--runs", "2"])
            self.assertGreater(timed.speedup, 0)

    def test_the_runtime_is_spelled_as_on_the_command_line(self):
        # --runtime takes any case and the aliases tflite and onnxruntime; compare() took only the lower-case
        # "xnnpack" for the executor, so "XNNPACK" went to the binary with --python, which refused it (exit 2).
        with without_onnx():
            r = dwdeconv_rewrite.rewrite(MIGAN, target=REWRITING)
            for spelling in ("XNNPACK", "XnnPack"):
                with self.subTest(runtime=spelling):
                    checked = dwdeconv_rewrite.compare(MIGAN, r, runtime=spelling)
                    self.assertTrue(checked.passed, checked.log)
                    self.assertEqual(checked.report["verify"]["mode"], "whole-model")
                    self.assertEqual((checked.report["runtime"]["name"], checked.report["runtime"]["python"]),
                                     ("xnnpack", None))
                    with self.assertRaises(DwdeconvError) as e:
                        dwdeconv_rewrite.compare(MIGAN, r, runtime=spelling, python=sys.executable)
                    self.assertEqual(e.exception.exit_code, 2)
                    self.assertIn("python: only a runtime other than the built-in 'xnnpack' runs in Python",
                                  e.exception.message)
            # The Python runtimes in any case and by alias reach that runtime: with an interpreter without its
            # packages (-S: no site-packages) the binary names the runtime's missing packages (exit 2), never an
            # unknown runtime or a --python refusal.
            with tempfile.TemporaryDirectory() as tmp:
                bare = Path(tmp) / "bare-python"
                bare.write_text("#!/bin/sh\nexec '%s' -S \"$@\"\n" % sys.executable)
                bare.chmod(0o755)
                for spelling, runtime, package in (("ORT", "ort", "onnxruntime"), ("OnnxRuntime", "ort", "onnxruntime"),
                                                   ("onnxruntime", "ort", "onnxruntime"), ("TFLite", "litert", "onnx2tf"),
                                                   ("tflite", "litert", "onnx2tf"), ("LiteRT", "litert", "onnx2tf"),
                                                   ("ExecuTorch", "executorch", "executorch"),
                                                   ("OpenVINO", "openvino", "openvino"), ("ncnn", "ncnn", "ncnn")):
                    with self.subTest(runtime=spelling), self.assertRaises(DwdeconvError) as e:
                        dwdeconv_rewrite.compare(MIGAN, r, runtime=spelling, python=str(bare))
                    self.assertEqual(e.exception.exit_code, 2, e.exception.message)
                    self.assertTrue(e.exception.message.startswith("--runtime %s: the Python interpreter '%s'"
                                                                   % (runtime, bare)), e.exception.message)
                    self.assertIn("lacks", e.exception.message)
                    self.assertIn(package, e.exception.message)

    def test_a_different_model_fails_and_an_unreadable_one_raises(self):
        with without_onnx():
            wrong = dwdeconv_rewrite.compare(MIGAN, SMALL)  # another model: it cannot be compared, exit 1
            self.assertFalse(wrong.passed)
            self.assertFalse(wrong)
            with self.assertRaises(DwdeconvError) as e:
                dwdeconv_rewrite.compare(MIGAN, b"junk")
            self.assertEqual(e.exception.exit_code, 3)
            with self.assertRaises(DwdeconvError) as e:
                dwdeconv_rewrite.compare(MIGAN, MIGAN, runtime="")
            self.assertEqual(e.exception.exit_code, 2)
            with self.assertRaises(DwdeconvError) as e:
                dwdeconv_rewrite.compare(MIGAN, MIGAN, python="/usr/bin/python3")
            self.assertEqual(e.exception.exit_code, 2)

    def test_a_runtime_is_passed_as_the_runtime_options(self):
        # A stand-in binary that records its arguments and writes the report: the command line compare() builds for
        # a runtime run in Python (the --runtime issue's options), whatever the real binary supports.
        with tempfile.TemporaryDirectory() as tmp:
            stub = Path(tmp) / "stub"
            argv_file = Path(tmp) / "argv.json"
            stub.write_text(textwrap.dedent("""\
                #!%s
                import json, sys
                args = sys.argv[1:]
                json.dump(args, open(%r, "w"))
                report = args[args.index("--report") + 1]
                passed = "--min-speedup=9.0" not in args
                json.dump({"exit_code": 0 if passed else 1, "error": None if passed else "speedup 1.5x < 9.0x",
                           "bench": {"speedup": 1.5}}, open(report, "w"))
                sys.exit(0 if passed else 1)
                """ % (sys.executable, str(argv_file))))
            stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
            with environment(DWDECONV_REWRITE=str(stub)):
                ok = dwdeconv_rewrite.compare(MIGAN, MIGAN, runtime="litert", bench=True, input_shapes={"x": [1, 2]})
                args = json.loads(argv_file.read_text())
                self.assertEqual(args[:3], [str(MIGAN), "--compare", str(MIGAN)])
                for option in ("--verify", "--runtime=litert", "--python=" + sys.executable, "--bench",
                               "--input-shape=x=1x2"):
                    self.assertIn(option, args)
                self.assertTrue(ok.passed)
                self.assertEqual(ok.speedup, 1.5)
                gated = dwdeconv_rewrite.compare(MIGAN, MIGAN, runtime="ort", min_speedup=9, python="/opt/py")
                args = json.loads(argv_file.read_text())
                for option in ("--runtime=ort", "--python=/opt/py", "--bench", "--min-speedup=9.0"):
                    self.assertIn(option, args)
                self.assertFalse(gated.passed)
                self.assertEqual(gated.error, "speedup 1.5x < 9.0x")
                dwdeconv_rewrite.compare(MIGAN, MIGAN)
                args = json.loads(argv_file.read_text())
                self.assertFalse([a for a in args if a.startswith(("--runtime", "--python", "--verify", "--bench"))])

    def test_min_speedup_is_a_finite_number_above_zero_as_on_the_command_line(self):
        # True was taken for 1.0 (float(True)), and nan, inf and values <= 0 reached the binary, or a stand-in.
        with tempfile.TemporaryDirectory() as tmp, environment(DWDECONV_REWRITE=argv_stub(tmp)):
            for bad in (True, False, float("nan"), float("inf"), "-inf", 0, -1.5, "fast", [2]):
                with self.subTest(min_speedup=bad):
                    with self.assertRaises(DwdeconvError) as e:
                        dwdeconv_rewrite.compare(MIGAN, MIGAN, min_speedup=bad)
                    self.assertEqual(e.exception.exit_code, 2)
                    self.assertIn("min_speedup: expected a finite number > 0", e.exception.message)
            for good, option in ((1.1, "--min-speedup=1.1"), (2, "--min-speedup=2.0"), ("1.25", "--min-speedup=1.25")):
                with self.subTest(min_speedup=good):
                    self.assertIn(option, dwdeconv_rewrite.compare(MIGAN, MIGAN, min_speedup=good).report["argv"])

    def test_precision_and_threads_reach_the_binary_and_bad_values_are_refused(self):
        # The precision and thread count users ship as named arguments, checked as the binary checks them.
        with tempfile.TemporaryDirectory() as tmp, environment(DWDECONV_REWRITE=argv_stub(tmp)):
            argv = dwdeconv_rewrite.compare(MIGAN, MIGAN, runtime="litert", precision="INT8", threads=2).report["argv"]
            self.assertIn("--precision=int8", argv)
            self.assertIn("--threads=2", argv)
            argv = dwdeconv_rewrite.compare(MIGAN, MIGAN).report["argv"]
            self.assertFalse([a for a in argv if a.startswith(("--precision", "--threads"))])
            for bad in ("int4", "-q", "", 8):
                with self.subTest(precision=bad), self.assertRaises(DwdeconvError) as e:
                    dwdeconv_rewrite.compare(MIGAN, MIGAN, runtime="litert", precision=bad)
                self.assertEqual(e.exception.exit_code, 2)
                self.assertIn("precision: expected one of fp32, fp16, int8", e.exception.message)
            for bad in (0, -1, True, 1.5, "2"):
                with self.subTest(threads=bad), self.assertRaises(DwdeconvError) as e:
                    dwdeconv_rewrite.compare(MIGAN, MIGAN, threads=bad)
                self.assertEqual(e.exception.exit_code, 2)
                self.assertIn("threads: expected a whole number >= 1", e.exception.message)
        # The real binary: the executor runs fp32 only, and more than 256 threads is out of range; both exit 2.
        for kwargs, said in (({"precision": "int8"}, "runs fp32 only"), ({"threads": 257}, "not in range 1 to 256")):
            with self.subTest(**kwargs), self.assertRaises(DwdeconvError) as e:
                dwdeconv_rewrite.compare(MIGAN, MIGAN, **kwargs)
            self.assertEqual(e.exception.exit_code, 2)
            self.assertIn(said, e.exception.message)

    @unittest.skipIf(onnx is None, "the onnx package is not importable here")
    def test_a_tampered_model_proto_fails(self):
        r = dwdeconv_rewrite.rewrite(onnx.load(str(MIGAN)), target=REWRITING)
        self.assertTrue(dwdeconv_rewrite.compare(MIGAN, r.model).passed)
        w = next(t for t in r.model.graph.initializer if t.dims and len(t.dims) == 4)
        values = numpy_helper.to_array(w).copy()
        values.flat[0] += 1.0
        w.CopyFrom(numpy_helper.from_array(values, w.name))
        self.assertFalse(dwdeconv_rewrite.compare(MIGAN, r.model).passed)


class CheckAliasTest(unittest.TestCase):
    def test_check_is_compare_with_a_deprecation_warning(self):
        # check() was the name of the command line's --compare, while its --check is the gate; it stays one release.
        self.assertIn("compare", dwdeconv_rewrite.__all__)
        self.assertIn("check", dwdeconv_rewrite.__all__)
        with without_onnx():
            r = dwdeconv_rewrite.rewrite(MIGAN)
            with self.assertWarns(DeprecationWarning) as warned:
                aliased = dwdeconv_rewrite.check(MIGAN, r, args=["--seed", "3"])
            self.assertIn("compare()", str(warned.warning))
            self.assertEqual(warned.filename, __file__)  # the caller's line, not the API's
            self.assertTrue(aliased.passed)
            self.assertEqual(aliased.report, dwdeconv_rewrite.compare(MIGAN, r, args=["--seed", "3"]).report)
            with self.assertWarns(DeprecationWarning):
                self.assertFalse(dwdeconv_rewrite.check(MIGAN, SMALL).passed)
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # compare() itself warns nothing
                dwdeconv_rewrite.compare(MIGAN, r)


def cli_rewrite(model, out, *args):
    """The command line's `dwdeconv-rewrite MODEL -o OUT ARGS`: what Result.save must write."""
    subprocess.run([os.environ["DWDECONV_REWRITE"], str(model), "-o", str(out), "-q"] + list(args), check=True)


def external_data_model(directory):
    """directory/in.onnx, the MI-GAN example (not rewritten: --forms names a form it lacks) with its weights in
    directory/in.onnx.data."""
    model = Path(directory) / "in.onnx"
    cli_rewrite(MIGAN, model, "--forms", "nearest_mask", "--external-data", "in.onnx.data")
    assert (Path(directory) / "in.onnx.data").stat().st_size > 100000
    return model


def listing(directory):
    return sorted(p.name for p in Path(directory).iterdir())


class SaveTest(unittest.TestCase):
    def test_without_onnx_save_writes_the_command_lines_model(self):
        with tempfile.TemporaryDirectory() as tmp, without_onnx():
            r = dwdeconv_rewrite.rewrite(MIGAN, target="litert")
            self.assertIsInstance(r.model, bytes)
            saved = r.save(Path(tmp) / "gen.xnn.onnx")
            self.assertEqual(saved, str(Path(tmp) / "gen.xnn.onnx"))
            cli_rewrite(MIGAN, Path(tmp) / "cli.onnx", "--target", "litert")
            self.assertEqual(Path(saved).read_bytes(), (Path(tmp) / "cli.onnx").read_bytes())
            self.assertEqual(Path(saved).read_bytes(), r.model)
            self.assertEqual(listing(tmp), ["cli.onnx", "gen.xnn.onnx"])  # no data file, no temporary left
            # A file that is there is replaced, keeping its mode.
            existing = Path(tmp) / "old.onnx"
            existing.write_bytes(b"old")
            existing.chmod(0o640)
            r.save(str(existing).encode())
            self.assertEqual(existing.read_bytes(), r.model)
            self.assertEqual(stat.S_IMODE(existing.stat().st_mode), 0o640)
            # A Result made by hand saves its model; one that is not a model is refused by the binary, naming it.
            by_hand = dwdeconv_rewrite.Result(MIGAN.read_bytes(), {}, "")
            by_hand.save(Path(tmp) / "by-hand.onnx")
            self.assertEqual((Path(tmp) / "by-hand.onnx").read_bytes(), MIGAN.read_bytes())
            with self.assertRaises(DwdeconvError) as e:
                dwdeconv_rewrite.Result(b"junk", {}, "").save(Path(tmp) / "junk.onnx")
            self.assertEqual(e.exception.exit_code, 3)
            self.assertIn("<Result.model>", e.exception.message)
            self.assertFalse((Path(tmp) / "junk.onnx").exists())

    @unittest.skipIf(onnx is None, "the onnx package is not importable here")
    def test_with_onnx_save_writes_the_model_and_its_data_file_as_the_command_line_does(self):
        with tempfile.TemporaryDirectory() as tmp:
            source = external_data_model(tmp)
            r = dwdeconv_rewrite.rewrite(source, target=REWRITING)  # no output=: the files are kept for save()
            self.assertIsInstance(r.model, onnx.ModelProto)
            self.assertEqual(r.rewritten, 8)
            for d in ("api", "cli"):
                (Path(tmp) / d).mkdir()
            r.save(Path(tmp) / "api" / "gen.xnn.onnx")
            cli_rewrite(source, Path(tmp) / "cli" / "gen.xnn.onnx", "--target", REWRITING)
            self.assertEqual(listing(Path(tmp) / "api"), ["gen.xnn.onnx", "gen.xnn.onnx.data"])
            for name in ("gen.xnn.onnx", "gen.xnn.onnx.data"):
                with self.subTest(name=name):
                    self.assertTrue(filecmp.cmp(Path(tmp) / "api" / name, Path(tmp) / "cli" / name, shallow=False))
            # onnx reads it back (the data file by its new name), and it is the rewritten model.
            self.assertTrue(dwdeconv_rewrite.compare(MIGAN, Path(tmp) / "api" / "gen.xnn.onnx").passed)
            loaded = onnx.load(str(Path(tmp) / "api" / "gen.xnn.onnx"))
            self.assertEqual(loaded.SerializeToString(), r.model.SerializeToString())

    def test_without_onnx_save_renames_the_data_file_as_the_command_line_does(self):
        with tempfile.TemporaryDirectory() as tmp, without_onnx():
            source = external_data_model(tmp)
            r = dwdeconv_rewrite.rewrite(source, output=Path(tmp) / "first.onnx")
            self.assertIsInstance(r.model, bytes)
            (Path(tmp) / "api").mkdir()
            (Path(tmp) / "cli").mkdir()
            r.save(Path(tmp) / "api" / "gen.onnx")
            cli_rewrite(source, Path(tmp) / "cli" / "gen.onnx")
            self.assertEqual(listing(Path(tmp) / "api"), ["gen.onnx", "gen.onnx.data"])
            for name in ("gen.onnx", "gen.onnx.data"):
                with self.subTest(name=name):
                    self.assertTrue(filecmp.cmp(Path(tmp) / "api" / name, Path(tmp) / "cli" / name, shallow=False))
            self.assertNotIn(b"first.onnx.data", (Path(tmp) / "api" / "gen.onnx").read_bytes())
            self.assertTrue(dwdeconv_rewrite.compare(MIGAN, Path(tmp) / "api" / "gen.onnx").passed)
            # --external-data NAME in args: the data file keeps that name beside PATH, as on the command line.
            named = dwdeconv_rewrite.rewrite(MIGAN, output=Path(tmp) / "named.onnx", args=["--external-data", "w.bin"])
            (Path(tmp) / "api2").mkdir()
            named.save(Path(tmp) / "api2" / "gen.onnx")
            self.assertEqual(listing(Path(tmp) / "api2"), ["gen.onnx", "w.bin"])
            self.assertTrue(filecmp.cmp(Path(tmp) / "api2" / "w.bin", Path(tmp) / "w.bin", shallow=False))
            self.assertTrue(dwdeconv_rewrite.compare(MIGAN, Path(tmp) / "api2" / "gen.onnx").passed)

    def test_save_refuses_the_input_model_and_its_data_file(self):
        with tempfile.TemporaryDirectory() as tmp, without_onnx():
            source = external_data_model(tmp)
            data = Path(tmp) / "in.onnx.data"
            before = {p: p.read_bytes() for p in (source, data)}
            r = dwdeconv_rewrite.rewrite(source, output=Path(tmp) / "out.onnx")
            os.link(source, Path(tmp) / "hard-link.onnx")
            os.symlink("in.onnx.data", Path(tmp) / "linked.onnx.data")  # linked.onnx's data file would be in.onnx.data
            (Path(tmp) / "a-directory.onnx").mkdir()
            out = str(Path(tmp) / "out.onnx")
            cases = [
                (source, "refusing to write %s (the output model of %s): it is %s (a model --protect names)" % (source, out, source)),
                (Path(tmp) / "sub" / ".." / "in.onnx", "(a model --protect names)"),
                (Path(tmp) / "hard-link.onnx", "(a model --protect names)"),
                (data, "it is %s (external data that %s reads)" % (data, source)),
                (Path(tmp) / "linked.onnx", "(the data file of %s's output): it is %s (external data that %s reads)" % (out, data, source)),
                (Path(tmp) / "a-directory.onnx", "a-directory.onnx is a directory, not a regular file; nothing written"),
            ]
            (Path(tmp) / "sub").mkdir()
            for path, fragment in cases:
                with self.subTest(path=path), self.assertRaises(DwdeconvError) as e:
                    r.save(path)
                self.assertEqual(e.exception.exit_code, 2)
                self.assertIn(fragment, e.exception.message)
                self.assertIn("nothing written", e.exception.message)
            self.assertEqual({p: p.read_bytes() for p in before}, before)
            self.assertFalse((Path(tmp) / "linked.onnx").exists())
            self.assertEqual(sorted(os.listdir(Path(tmp) / "a-directory.onnx")), [])
            with self.assertRaises(DwdeconvError) as e:
                r.save(42)
            self.assertEqual(e.exception.exit_code, 2)

    def test_a_failed_save_leaves_no_partial_file(self):
        with tempfile.TemporaryDirectory() as tmp, without_onnx():
            source = external_data_model(tmp)
            r = dwdeconv_rewrite.rewrite(source, output=Path(tmp) / "first.onnx")
            out = Path(tmp) / "out"
            out.mkdir()
            (out / "gen.onnx").write_bytes(b"the old model")
            # The model's place is a file, its data file's a directory: refused before anything is written.
            (out / "gen.onnx.data").mkdir()
            with self.assertRaises(DwdeconvError) as e:
                r.save(out / "gen.onnx")
            self.assertEqual(e.exception.exit_code, 2)
            self.assertIn("gen.onnx.data", e.exception.message)
            self.assertIn("not a regular file", e.exception.message)
            self.assertEqual(listing(out), ["gen.onnx", "gen.onnx.data"])
            self.assertEqual((out / "gen.onnx").read_bytes(), b"the old model")
            self.assertEqual(os.listdir(out / "gen.onnx.data"), [])
            with self.assertRaises(DwdeconvError) as e:  # no such directory
                r.save(Path(tmp) / "no-such-dir" / "gen.onnx")
            self.assertEqual(e.exception.exit_code, 3)
            self.assertIn("no-such-dir", e.exception.message)
            self.assertFalse((Path(tmp) / "no-such-dir").exists())
            # A model that is gone since the rewrite: an I/O error naming it, nothing written.
            os.unlink(Path(tmp) / "first.onnx")
            with self.assertRaises(DwdeconvError) as e:
                r.save(Path(tmp) / "again.onnx")
            self.assertEqual(e.exception.exit_code, 3)
            self.assertIn("first.onnx", e.exception.message)
            self.assertFalse((Path(tmp) / "again.onnx").exists())

    def test_the_kept_files_go_with_the_result(self):
        with tempfile.TemporaryDirectory() as tmp, without_onnx():
            saved, tempfile.tempdir = tempfile.tempdir, tmp
            try:
                r = dwdeconv_rewrite.rewrite(MIGAN)
                self.assertEqual(len(os.listdir(tmp)), 1)  # the binary's model, for save()
                self.assertEqual(r.report["output"], "<Result.model>")
                del r
                gc.collect()
                self.assertEqual(os.listdir(tmp), [])
                with self.assertRaises(DwdeconvError):
                    dwdeconv_rewrite.rewrite(b"junk")
                self.assertEqual(os.listdir(tmp), [])
            finally:
                tempfile.tempdir = saved


# Where the API puts the files it hands the binary (tempfile.mkdtemp(prefix="dwdeconv-rewrite-")).
TEMPORARY_PREFIX = os.path.join(tempfile.gettempdir(), "dwdeconv-rewrite-")


class NamingTest(unittest.TestCase):
    """A model given as bytes or a ModelProto is named so, not by the temporary file the binary read, which is gone."""

    def assert_named(self, error, label):
        for text in (error.message, error.log, json.dumps(error.report)):
            self.assertIn(label, text)
            self.assertNotIn(TEMPORARY_PREFIX, text)

    def test_bytes_are_named_bytes(self):
        with without_onnx(), self.assertRaises(DwdeconvError) as e:
            dwdeconv_rewrite.rewrite(b"this is not a model")
        self.assertTrue(e.exception.message.startswith("<bytes>: not a valid ONNX ModelProto"), e.exception.message)
        self.assert_named(e.exception, "<bytes>")
        self.assertEqual(e.exception.report["input"], "<bytes>")
        with without_onnx():
            self.assertEqual(dwdeconv_rewrite.rewrite(MIGAN.read_bytes()).report["input"], "<bytes>")

    @unittest.skipIf(onnx is None, "the onnx package is not importable here")
    def test_a_model_proto_is_named_model_proto(self):
        with self.assertRaises(DwdeconvError) as e:
            dwdeconv_rewrite.rewrite(onnx.ModelProto())
        self.assertEqual(e.exception.exit_code, 3)
        self.assertTrue(e.exception.message.startswith("<ModelProto>: "), e.exception.message)
        self.assert_named(e.exception, "<ModelProto>")
        with self.assertRaises(DwdeconvError) as e:
            dwdeconv_rewrite.compare(onnx.ModelProto(), MIGAN)
        self.assert_named(e.exception, "<ModelProto: original>")

    def test_compare_names_each_side(self):
        with without_onnx():
            for args, label in (((MIGAN, b"junk"), "<bytes: rewritten>"), ((b"junk", MIGAN), "<bytes: original>"),
                                ((MIGAN, dwdeconv_rewrite.Result(b"junk", {}, "")), "<Result: rewritten>")):
                with self.subTest(label=label), self.assertRaises(DwdeconvError) as e:
                    dwdeconv_rewrite.compare(*args)
                self.assertEqual(e.exception.exit_code, 3)
                self.assertTrue(e.exception.message.startswith(label + ": not a valid ONNX ModelProto"), e.exception.message)
                self.assert_named(e.exception, label)
            # A comparison that runs reports both sides by those names too.
            failed = dwdeconv_rewrite.compare(MIGAN.read_bytes(), SMALL.read_bytes())
            self.assertFalse(failed.passed)
            text = json.dumps(failed.report) + failed.log
            self.assertIn("<bytes: original>", text)
            self.assertNotIn(TEMPORARY_PREFIX, text)


# A script that rewrites MODEL to OUT, then checks them with a bench that runs for minutes: what a signal interrupts.
INTERRUPTED_CALL = """\
import json, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a foreground job (a shell's & ignores SIGINT)
import dwdeconv_rewrite
dwdeconv_rewrite.rewrite(sys.argv[1], output=sys.argv[2], target="xnnpack")  # the default rewrites nothing here
dwdeconv_rewrite.compare(sys.argv[1], sys.argv[2], bench=True, args=["--runs", "100000"], **json.loads(sys.argv[3]))
print("the check was not interrupted")
"""


class SignalTest(unittest.TestCase):
    """A SIGINT (KeyboardInterrupt) or SIGTERM to the Python process while the binary runs ends the binary the way a
    signal to it does: its runtime child ends too, and no scratch directory is left."""

    def interrupt(self, sig, check_kwargs, ready):
        """Runs INTERRUPTED_CALL with TMPDIR a fresh directory, sends it `sig` once ready(pid, tmpdir) says the
        check is under way; (exit code, its stderr, the processes below it before the signal, those still alive
        after, what is left in TMPDIR)."""
        with tempfile.TemporaryDirectory() as tmp:
            scratch = Path(tmp) / "tmp"
            scratch.mkdir()
            script = Path(tmp) / "call.py"
            script.write_text(INTERRUPTED_CALL)
            proc = subprocess.Popen([sys.executable, str(script), str(MIGAN), str(Path(tmp) / "rewritten.onnx"),
                                     json.dumps(check_kwargs)], env=dict(os.environ, TMPDIR=str(scratch)),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            seen = []
            try:
                started = wait_for(lambda: proc.poll() is not None or ready(proc.pid, scratch), 120)
                time.sleep(1)
                seen = descendants(proc.pid)
                self.assertTrue(started and proc.poll() is None, "the check did not get under way: %s" % (
                    proc.communicate()[1][-2000:] if proc.poll() is not None else "timed out"))
                os.kill(proc.pid, sig)
                try:
                    _, err = proc.communicate(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    _, err = proc.communicate()
                wait_for(lambda: not any(alive(p) for p in seen), 3)
                return proc.returncode, err, seen, [cmdline(p)[:4] for p in seen if alive(p)], sorted(os.listdir(scratch))
            finally:
                kill_all(seen)
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate()

    @staticmethod
    def comparing(pid, _scratch):
        return any("--compare" in cmdline(p) for p in descendants(pid))

    def test_sigterm_ends_the_binary_then_exits_143(self):
        # Before: SIGTERM's default action ended the Python process alone, and the binary went on benching.
        code, err, seen, left, leftovers = self.interrupt(signal.SIGTERM, {}, self.comparing)
        self.assertTrue(seen, "the binary was running")
        self.assertEqual(left, [], "still running after SIGTERM: %s" % left)
        self.assertEqual(code, 143, err[-2000:])
        self.assertEqual(leftovers, [])

    @unittest.skipIf(importlib.util.find_spec("onnxruntime") is None or onnx is None,
                     "this interpreter lacks onnxruntime or onnx: the --runtime ort case is skipped")
    def test_an_interrupt_ends_the_runtime_child_and_leaves_no_scratch_directory(self):
        # Before: subprocess.run SIGKILLed the binary on the KeyboardInterrupt; its runtime child, in a process group
        # of its own, went on benching, and the binary's dwdeconv-runtime-* directory stayed in TMPDIR.
        # The check child, not the probe that comes first: both run the module in a dwdeconv-runtime-* directory,
        # and the probe has ended a second later (CI saw only the binary left in `seen`).
        def runtime_running(pid, scratch):
            return (any(cmdline(p)[2:4] == ["dwdeconv_rewrite.runtimes", "check"] for p in descendants(pid))
                    and any(n.startswith("dwdeconv-runtime-") for n in os.listdir(scratch)))

        code, err, seen, left, leftovers = self.interrupt(signal.SIGINT, {"runtime": "ort"}, runtime_running)
        self.assertEqual(len(seen), 2, "the binary and its runtime child were running: %s" % [cmdline(p)[:4] for p in seen])
        self.assertEqual(left, [], "still running after the interrupt: %s" % left)
        self.assertEqual(leftovers, [])
        self.assertIn("KeyboardInterrupt", err)
        self.assertIn(code, (-signal.SIGINT, 130), err[-2000:])

    def test_the_binary_is_asked_to_end_with_its_parent_and_sigterm_is_left_as_it_was(self):
        # DWDECONV_EXIT_WITH_PARENT=1: the binary has Linux send it SIGTERM when this process dies, kill -9 included.
        with tempfile.TemporaryDirectory() as tmp:
            stub = Path(tmp) / "stub"
            stub.write_text("#!%s\nimport os, sys\nsys.stderr.write('error: EXIT_WITH_PARENT=%%s' %% "
                            "os.environ.get('DWDECONV_EXIT_WITH_PARENT'))\nsys.exit(3)\n" % sys.executable)
            stub.chmod(0o755)
            with environment(DWDECONV_REWRITE=str(stub)), self.assertRaises(DwdeconvError) as e:
                dwdeconv_rewrite.rewrite(MIGAN)
            self.assertEqual(e.exception.message, "EXIT_WITH_PARENT=1")
        self.assertIs(signal.getsignal(signal.SIGTERM), signal.SIG_DFL)


class CommandLineTest(unittest.TestCase):
    def run_module(self, *args):
        return subprocess.run([sys.executable, "-m", "dwdeconv_rewrite"] + list(args), capture_output=True, text=True)

    def test_python_m_runs_the_binary_with_its_exit_codes(self):
        version = self.run_module("--version")
        self.assertEqual(version.returncode, 0)
        self.assertRegex(version.stdout, r"^dwdeconv-rewrite \d+\.\d+\.\d+")
        self.assertEqual(self.run_module(str(MIGAN), "--check", "--target", REWRITING).returncode, 1)
        self.assertEqual(self.run_module(str(MIGAN), "--check").returncode, 0)  # the default would rewrite none
        missing = self.run_module("/no/such/model.onnx", "--check")
        self.assertEqual(missing.returncode, 3)
        self.assertIn("/no/such/model.onnx", missing.stderr)
        self.assertEqual(self.run_module("--frobnicate").returncode, 2)

    def test_python_m_streams_stdin_to_stdout(self):
        with open(MIGAN, "rb") as f:
            piped = subprocess.run([sys.executable, "-m", "dwdeconv_rewrite", "-", "-o", "-", "-q", "--target", REWRITING],
                                   stdin=f, capture_output=True)
        self.assertEqual(piped.returncode, 0)
        with without_onnx():
            self.assertEqual(piped.stdout, dwdeconv_rewrite.rewrite(MIGAN, target=REWRITING).model)
        self.assertNotEqual(piped.stdout, MIGAN.read_bytes())  # a rewrite, not the input passed through

    def test_no_binary_says_so(self):
        env = dict(os.environ, DWDECONV_REWRITE="/no/such/dwdeconv-rewrite")
        r = subprocess.run([sys.executable, "-m", "dwdeconv_rewrite", "--version"], capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 127)
        self.assertIn("is not an executable file", r.stderr)


if __name__ == "__main__":
    if onnx is None:
        print("api_test: onnx is not importable: the ModelProto cases are skipped", file=sys.stderr)
    unittest.main(verbosity=2)
