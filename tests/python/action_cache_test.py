"""The Action's build cache: action/install.sh and action/cache_key.sh run as GitHub's runner runs them, on a stand-in
action checkout (a copy of action/, .ci/install-deps and python/dwdeconv_rewrite, with a pyproject.toml whose
in-tree build backend stands in for scikit-build-core: it "compiles" by running `c++` from PATH and writes a wheel
shaped like the real one, whose bin/dwdeconv-rewrite is a script answering --version). pip, venv and bash are
real; PATH begins with stand-ins for cc, c++, gcc, g++, clang, cmake, ninja, make and ld that record each call.

A runner's cache is simulated by copying the cache directory of one run into the RUNNER_TEMP of the next, as
actions/cache/restore would. Nothing reaches the network: PIP_NO_INDEX is set, and the build needs nothing.

ctest supplies DWDECONV_SOURCE_DIR and DWDECONV_REWRITE (the built binary, whose libraries the runtime-libs test
maps to Debian packages).
"""

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import zipfile
from pathlib import Path

from action_support import workflow_commands

SOURCE = Path(os.environ["DWDECONV_SOURCE_DIR"])
STAMP = "dwdeconv-rewrite-wheel.sha256"
COMPILERS = ("cc", "c++", "gcc", "g++", "clang", "clang++", "cmake", "ninja", "make", "ld",
             "x86_64-linux-gnu-gcc", "x86_64-linux-gnu-g++")

# The stand-in for scikit-build-core: a PEP 517 backend in the action's checkout (pyproject.toml's backend-path),
# which needs nothing installed. Its build runs `c++` (the stand-in, which fails or succeeds as the test says) and
# writes a wheel with the package, the console script and a "binary" printing
# `dwdeconv-rewrite 0.1.0 (<FAKE_BUILD_MARK>)` for --version.
BACKEND = r'''
import base64, hashlib, os, subprocess, sysconfig, zipfile

VERSION = "0.1.0"


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    subprocess.run(["c++", "-O2", "-c", "tool.cpp", "-o", "tool.o"], check=True)
    mark = os.environ.get("FAKE_BUILD_MARK", "built")
    tag = "py3-none-" + sysconfig.get_platform().replace("-", "_").replace(".", "_")
    name = "dwdeconv_rewrite-%s-%s.whl" % (VERSION, tag)
    dist_info = "dwdeconv_rewrite-%s.dist-info" % VERSION
    files = {}
    package = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python", "dwdeconv_rewrite")
    for root, _, names in os.walk(package):
        for n in sorted(names):
            if n.endswith((".py", ".json")):
                path = os.path.join(root, n)
                with open(path, "rb") as f:
                    files[os.path.relpath(path, os.path.dirname(package))] = (f.read(), 0o644)
    files["dwdeconv_rewrite/bin/dwdeconv-rewrite"] = (
        ('#!/bin/sh\ncase "$1" in --version) echo "dwdeconv-rewrite %s (%s)" ;; *) exit 3 ;; esac\n'
         % (VERSION, mark)).encode(), 0o755)
    files[dist_info + "/METADATA"] = (("Metadata-Version: 2.1\nName: dwdeconv-rewrite\nVersion: %s\n"
                                       "Requires-Python: >=3.10\nProvides-Extra: ort\n" % VERSION).encode(), 0o644)
    files[dist_info + "/WHEEL"] = (("Wheel-Version: 1.0\nGenerator: fake-backend\nRoot-Is-Purelib: false\nTag: %s\n"
                                    % tag).encode(), 0o644)
    files[dist_info + "/entry_points.txt"] = (
        b"[console_scripts]\ndwdeconv-rewrite = dwdeconv_rewrite.__main__:main\n", 0o644)
    record = [_record_line(n, data) for n, (data, _) in files.items()] + [dist_info + "/RECORD,,"]
    files[dist_info + "/RECORD"] = (("\n".join(record) + "\n").encode(), 0o644)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for n, (data, mode) in files.items():
            info = zipfile.ZipInfo(n)
            info.external_attr = (0o100000 | mode) << 16
            z.writestr(info, data)
    return name
'''


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def rewrite_wheel(wheel, dest, binary=None):
    """A copy of `wheel` at `dest` (another name: another tag), its bin/dwdeconv-rewrite replaced by `binary`."""
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(dest, "w") as out:
        for info in src.infolist():
            data = src.read(info)
            if binary is not None and info.filename.endswith("/bin/dwdeconv-rewrite"):
                data = binary.encode()
            out.writestr(info, data)


class ActionCacheCase(unittest.TestCase):
    """A stand-in action checkout and runner: `run_install()` runs action/install.sh as action.yml's step does."""

    @classmethod
    def tearDownClass(cls):
        if ActionCacheCase._first is not None:
            ActionCacheCase._first_dir.cleanup()
            ActionCacheCase._first = None

    @classmethod
    def setUpClass(cls):
        # install.sh runs python3 from PATH, as the step does; it needs venv and ensurepip (Debian: python3-venv).
        python3 = shutil.which("python3")
        if python3 is None or subprocess.run([python3, "-c", "import ensurepip, venv"]).returncode != 0:
            raise unittest.SkipTest("python3 on PATH cannot make a venv with pip (Debian: python3-venv)")

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="action cache ")  # a space in every path
        self.root = Path(self.tmp.name)
        self.action = self.make_action(self.root / "the action")
        self.calls = self.root / "compiler-calls"
        self.stand_ins = self.root / "stand-in bin"
        self.stand_ins.mkdir()
        for name in COMPILERS:
            tool = self.stand_ins / name
            # Records its call; fails unless STAND_IN_COMPILERS=succeed; with STAND_IN_SLEEP, first sleeps.
            tool.write_text(textwrap.dedent("""\
                #!/bin/sh
                printf '%%s\\n' "%s $*" >>"%s"
                [ -z "$STAND_IN_SLEEP" ] || sleep "$STAND_IN_SLEEP"
                [ "$STAND_IN_COMPILERS" = succeed ]
                """ % (name, self.calls)))
            tool.chmod(0o755)

    def tearDown(self):
        self.tmp.cleanup()

    def make_action(self, where):
        """A copy of the action's scripts and package, with the stand-in build backend."""
        where.mkdir(parents=True)
        # gate_runtime.py reads the checkout's targets (rewrite/targets.json) and registry (the package's).
        for part in ("action/install.sh", "action/cache_key.sh", "action/gate_runtime.py", ".ci/install-deps",
                     "rewrite/targets.json"):
            (where / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(SOURCE / part, where / part)
        shutil.copytree(SOURCE / "python" / "dwdeconv_rewrite", where / "python" / "dwdeconv_rewrite",
                        ignore=shutil.ignore_patterns("__pycache__"))
        (where / "fake_backend.py").write_text(BACKEND)
        (where / "tool.cpp").write_text("int main() { return 0; }\n")
        (where / "pyproject.toml").write_text(textwrap.dedent("""\
            [build-system]
            requires = []
            build-backend = "fake_backend"
            backend-path = ["."]
            """))
        return where

    def compiler_calls(self):
        return self.calls.read_text().splitlines() if self.calls.exists() else []

    def runner(self, name):
        """A runner's RUNNER_TEMP, new and empty, as each job's is."""
        temp = self.root / name
        temp.mkdir()
        return temp

    def run_install(self, temp, cache=None, compilers="fail", mark="built", env=None, popen=False, timeout=300):
        """Runs install.sh as the step does, in a session of its own; (exit code, log, step outputs, the PATH lines it
        added). A run past `timeout` seconds fails the test, its processes killed."""
        cache = temp / "dwdeconv-rewrite-wheel" if cache is None else cache
        # Not ctest's PYTHONPATH, which would import the source tree's package instead of the installed one.
        full = {k: v for k, v in os.environ.items()
                if not k.startswith(("INPUT_", "GITHUB_", "DWDECONV_REWRITE", "PYTHONPATH"))}
        full.update({"PATH": "%s:%s" % (self.stand_ins, os.environ["PATH"]), "GITHUB_ACTION_PATH": str(self.action),
                     "RUNNER_TEMP": str(temp), "DWDECONV_WHEEL_CACHE": str(cache), "GITHUB_OUTPUT": str(temp / ".out"),
                     "GITHUB_PATH": str(temp / ".path"), "INPUT_INSTALL_DEPENDENCIES": "false",
                     "STAND_IN_COMPILERS": compilers, "FAKE_BUILD_MARK": mark, "PIP_NO_INDEX": "1",
                     "PIP_NO_CACHE_DIR": "1", "PYTHONDONTWRITEBYTECODE": "1"})
        full.update(env or {})
        for f in (".out", ".path"):
            (temp / f).write_text("")
        proc = subprocess.Popen(["bash", str(self.action / "action" / "install.sh")], env=full, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        if popen:
            return proc
        try:
            log, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            log, _ = proc.communicate()
            self.fail("install.sh still ran after %d s: %s" % (timeout, log[-2000:]))
        sys.stderr.write(log[-3000:])
        outputs = dict(line.split("=", 1) for line in (temp / ".out").read_text().splitlines())
        return proc.returncode, log, outputs, (temp / ".path").read_text().splitlines()

    @staticmethod
    def installed_version(temp):
        env = {k: v for k, v in os.environ.items() if k not in ("DWDECONV_REWRITE", "PYTHONPATH")}
        return subprocess.run([str(temp / "dwdeconv-rewrite-venv" / "bin" / "dwdeconv-rewrite"), "--version"], env=env,
                              capture_output=True, text=True, check=True).stdout.strip()

    def assert_cache_holds_one_stamped_wheel(self, cache):
        """The cache directory holds one dwdeconv_rewrite wheel, and the line naming it with its sha256; returns it."""
        wheels = sorted(cache.glob("dwdeconv_rewrite-*.whl"))
        self.assertEqual(len(wheels), 1, wheels)
        self.assertRegex(wheels[0].name, r"^dwdeconv_rewrite-0\.1\.0-py3-none-[a-z0-9_]+\.whl$")
        self.assertEqual((cache / STAMP).read_text(), "%s  %s\n" % (sha256(wheels[0]), wheels[0].name))
        self.assertEqual([p.name for p in cache.iterdir() if p.name.startswith(".")], [])  # no temporary file left
        return wheels[0]

    def assert_nothing_left_but(self, temp, *names):
        self.assertEqual(sorted(p.name for p in temp.iterdir() if not p.name.startswith(".")), sorted(names))

    _first = None  # the cache directory a first run left, made once for all the tests that start from it

    def first_run(self):
        """A copy of the cache directory a first run (a miss on a new runner, built with the mark "first build")
        left; the compiler calls of that run are not in this test's record."""
        cls = ActionCacheCase
        if cls._first is None:
            temp = self.runner("runner A")
            code, log, _, _ = self.run_install(temp, compilers="succeed", mark="first build")
            self.assertEqual(code, 0, log)
            cls._first_dir = tempfile.TemporaryDirectory(prefix="action cache first run ")
            cls._first = Path(cls._first_dir.name) / "cache"
            shutil.copytree(temp / "dwdeconv-rewrite-wheel", cls._first)
            shutil.rmtree(temp)
            self.calls.unlink()
        copy = self.root / "first run's cache"
        shutil.copytree(cls._first, copy)
        return copy

    def restored(self, cache, name="runner B"):
        """A new runner whose RUNNER_TEMP holds a copy of `cache`, as actions/cache/restore leaves it."""
        temp = self.runner(name)
        shutil.copytree(cache, temp / "dwdeconv-rewrite-wheel")
        return temp


class ActionCacheTest(ActionCacheCase):

    def test_a_miss_builds_once_and_stores_the_wheel(self):
        temp = self.runner("runner A")
        code, log, outputs, path = self.run_install(temp, compilers="succeed", mark="first build")
        self.assertEqual(code, 0, log)
        self.assertEqual(self.compiler_calls(), ["c++ -O2 -c tool.cpp -o tool.o"])  # the build ran, once
        wheel = self.assert_cache_holds_one_stamped_wheel(temp / "dwdeconv-rewrite-wheel")
        self.assertIn("stored %s" % wheel.name, log)
        self.assertEqual(outputs, {"store": "true"})  # for actions/cache/save
        self.assertEqual(path, [str(temp / "dwdeconv-rewrite-venv" / "bin")])
        self.assertEqual(self.installed_version(temp), "dwdeconv-rewrite 0.1.0 (first build)")
        # The scratch directory (build venv, CMake's build directory, pip's output) is gone; the action's checkout
        # holds no build directory.
        self.assert_nothing_left_but(temp, "dwdeconv-rewrite-venv", "dwdeconv-rewrite-wheel")
        self.assertEqual(sorted(p.name for p in self.action.iterdir() if p.name.startswith("build")), [])

    def test_a_hit_installs_the_cached_wheel_and_compiles_nothing(self):
        cache = self.first_run()
        wheel = self.assert_cache_holds_one_stamped_wheel(cache)
        temp = self.restored(cache)
        before = {p.name: p.read_bytes() for p in (temp / "dwdeconv-rewrite-wheel").iterdir()}
        code, log, outputs, path = self.run_install(temp, compilers="fail", mark="a second build")
        self.assertEqual(code, 0, log)
        self.assertEqual(self.compiler_calls(), [])  # no compiler, CMake, Ninja or make was run
        self.assertIn("cache hit: %s" % (temp / "dwdeconv-rewrite-wheel" / wheel.name), log)
        self.assertNotIn("::warning", log)
        self.assertEqual(outputs, {})  # nothing to save: the entry exists
        self.assertEqual(path, [str(temp / "dwdeconv-rewrite-venv" / "bin")])
        self.assertEqual(self.installed_version(temp), "dwdeconv-rewrite 0.1.0 (first build)")
        self.assertEqual({p.name: p.read_bytes() for p in (temp / "dwdeconv-rewrite-wheel").iterdir()}, before)
        self.assert_nothing_left_but(temp, "dwdeconv-rewrite-venv", "dwdeconv-rewrite-wheel")

    def test_a_hit_installs_the_runtime_libraries_and_a_miss_the_build_dependencies(self):
        # apt-get, dpkg-query and sudo stand-ins: nothing is installed, and apt-get records what it is asked for.
        apt = self.root / "apt-calls"
        for name, body in (("dpkg-query", "exit 1"), ("sudo", 'exec "$@"'),
                           ("apt-get", 'printf "%%s\\n" "$*" >>"%s"' % apt)):
            (self.stand_ins / name).write_text("#!/bin/sh\n%s\n" % body)
            (self.stand_ins / name).chmod(0o755)
        listed = {mode: subprocess.run([str(SOURCE / ".ci" / "install-deps"), mode, "--list"], capture_output=True,
                                       text=True, check=True).stdout.split() for mode in ("--pip", "--runtime-libs")}
        temp = self.runner("runner A")
        code, log, _, _ = self.run_install(temp, compilers="succeed", env={"INPUT_INSTALL_DEPENDENCIES": "true"})
        self.assertEqual(code, 0, log)
        installs = [line.split()[4:] for line in apt.read_text().splitlines() if line.startswith("install")]
        self.assertEqual(installs, [listed["--pip"]])
        apt.unlink()
        self.calls.unlink()
        temp = self.restored(temp / "dwdeconv-rewrite-wheel")
        code, log, _, _ = self.run_install(temp, compilers="fail", env={"INPUT_INSTALL_DEPENDENCIES": "true"})
        self.assertEqual(code, 0, log)
        installs = [line.split()[4:] for line in apt.read_text().splitlines() if line.startswith("install")]
        self.assertEqual(installs, [listed["--runtime-libs"]])
        # No compiler, CMake or -dev package on a hit.
        self.assertEqual([p for p in installs[0] if p.endswith("-dev") or p in ("build-essential", "cmake", "ninja-build",
                                                                                "g++", "gcc", "protobuf-compiler")], [])
        self.assertEqual(self.compiler_calls(), [])
        # Where apt-get has no package of a runtime library's name (Ubuntu 24.04's are libprotobuf32t64, ...), the
        # hit becomes a build, with the build dependencies, saying why.
        apt.unlink()
        (self.stand_ins / "apt-get").write_text('#!/bin/sh\nprintf "%%s\\n" "$*" >>"%s"\n'
                                                 'case "$*" in *libonnx1*) exit 100 ;; esac\n' % apt)
        temp = self.restored(temp / "dwdeconv-rewrite-wheel", "runner C")
        code, log, _, _ = self.run_install(temp, compilers="succeed", mark="rebuilt",
                                           env={"INPUT_INSTALL_DEPENDENCIES": "true"})
        self.assertEqual(code, 0, log)
        self.assertIn("::warning title=dwdeconv-rewrite install::not using the cached wheel: .ci/install-deps "
                      "--runtime-libs failed", log)
        installs = [line.split()[4:] for line in apt.read_text().splitlines() if line.startswith("install")]
        self.assertEqual(installs, [listed["--runtime-libs"], listed["--pip"]])
        self.assertEqual(self.installed_version(temp), "dwdeconv-rewrite 0.1.0 (rebuilt)")

    def test_a_damaged_cached_wheel_is_not_used(self):
        cache = self.first_run()
        wheel = self.assert_cache_holds_one_stamped_wheel(cache)
        damaged = bytearray(wheel.read_bytes())
        damaged[len(damaged) // 2] ^= 0xFF
        wheel.write_bytes(bytes(damaged))
        # The build works: the damaged wheel is replaced by a new one, said in a warning.
        temp = self.restored(cache)
        code, log, _, _ = self.run_install(temp, compilers="succeed", mark="rebuilt")
        self.assertEqual(code, 0, log)
        self.assertRegex(log, r"::warning title=dwdeconv-rewrite install::not using the cached wheel: .*%s is damaged"
                         % re.escape(wheel.name))
        self.assertEqual(self.compiler_calls(), ["c++ -O2 -c tool.cpp -o tool.o"])
        self.assertEqual(self.installed_version(temp), "dwdeconv-rewrite 0.1.0 (rebuilt)")
        self.assert_cache_holds_one_stamped_wheel(temp / "dwdeconv-rewrite-wheel")
        # The build fails: the step fails, saying so, and leaves no venv and no scratch directory.
        temp = self.restored(cache, "runner C")
        code, log, outputs, path = self.run_install(temp, compilers="fail")
        self.assertEqual(code, 1, log)
        self.assertIn("::error title=dwdeconv-rewrite install::pip wheel of %s failed" % self.action, log)
        self.assertEqual((outputs, path), ({}, []))
        self.assert_nothing_left_but(temp, "dwdeconv-rewrite-wheel")
        self.assertEqual((temp / "dwdeconv-rewrite-wheel" / wheel.name).read_bytes(), bytes(damaged))

    def test_a_cached_wheel_that_does_not_install_or_run_here_is_not_used(self):
        cache = self.first_run()
        wheel = self.assert_cache_holds_one_stamped_wheel(cache)
        cases = {
            # Its binary cannot load a library (the container's differ from the build's).
            "does not run": (wheel.name, "#!/bin/sh\necho 'dwdeconv-rewrite: error while loading shared libraries: "
                                         "libonnx.so.1: cannot open shared object file' >&2\nexit 127\n",
                             "does not run here: dwdeconv-rewrite: error while loading shared libraries"),
            # A binary that answers, but not as this tool.
            "another tool": (wheel.name, "#!/bin/sh\necho 'Python 3.11'\n", "does not run here: Python 3.11"),
            # Another platform's wheel, which pip refuses.
            "another platform": (wheel.name.rsplit("-", 1)[0] + "-win_amd64.whl", None, "pip did not install"),
            # Another Python's (a cp312 tag): this action stores py3-none wheels only.
            "another python": (wheel.name.replace("py3-none", "cp312-cp312"), None, "not a py3-none wheel"),
        }
        for n, (case, (name, binary, why)) in enumerate(cases.items()):
            with self.subTest(case=case):
                temp = self.runner("runner %d" % n)
                restored = temp / "dwdeconv-rewrite-wheel"
                restored.mkdir()
                rewrite_wheel(wheel, restored / name, binary)
                (restored / STAMP).write_text("%s  %s\n" % (sha256(restored / name), name))
                code, log, _, _ = self.run_install(temp, compilers="succeed", mark="rebuilt %d" % n)
                self.assertEqual(code, 0, log)
                self.assertIn("::warning title=dwdeconv-rewrite install::not using the cached wheel: ", log)
                self.assertIn(why, log)
                self.assertEqual(self.installed_version(temp), "dwdeconv-rewrite 0.1.0 (rebuilt %d)" % n)

    def test_a_cache_with_junk_or_two_wheels_uses_the_stamped_wheel_only(self):
        cache = self.first_run()
        wheel = self.assert_cache_holds_one_stamped_wheel(cache)
        # Junk and another version's wheel beside the stamped one: a hit on the stamped one.
        temp = self.restored(cache)
        restored = temp / "dwdeconv-rewrite-wheel"
        rewrite_wheel(wheel, restored / "dwdeconv_rewrite-0.0.9-py3-none-linux_x86_64.whl", "#!/bin/sh\necho old\n")
        (restored / "junk.txt").write_text("not a wheel\n")
        (restored / "dwdeconv_rewrite-9.9-py3-none-any.whl").write_bytes(b"not a zip")
        code, log, _, _ = self.run_install(temp, compilers="fail")
        self.assertEqual(code, 0, log)
        self.assertEqual(self.compiler_calls(), [])
        self.assertEqual(self.installed_version(temp), "dwdeconv-rewrite 0.1.0 (first build)")
        # Wheels but no stamp, or a stamp naming a path outside the cache or nothing: a miss that builds; the
        # cache then holds the one new wheel (another version's would only be saved along; the junk, not a wheel of
        # this project, stays).
        stamps = {"no stamp": None, "a path": "%s  ../%s\n" % (sha256(wheel), wheel.name), "empty": "",
                  "two lines": "%s  %s\n" % (sha256(wheel), wheel.name) * 2, "a directory": "dir", "a fifo": "fifo"}
        for n, (case, stamp) in enumerate(stamps.items()):
            with self.subTest(case=case):
                temp = self.restored(cache, "runner %d" % n)
                restored = temp / "dwdeconv-rewrite-wheel"
                (restored / STAMP).unlink()
                if stamp == "dir":
                    (restored / STAMP).mkdir()
                elif stamp == "fifo":  # which a read would wait on for ever
                    os.mkfifo(restored / STAMP)
                elif stamp is not None:
                    (restored / STAMP).write_text(stamp)
                (restored / "junk.txt").write_text("not a wheel\n")
                rewrite_wheel(wheel, restored / "dwdeconv_rewrite-0.0.9-py3-none-linux_x86_64.whl")
                code, log, outputs, _ = self.run_install(temp, compilers="succeed", mark="rebuilt %d" % n, timeout=120)
                if stamp == "dir":  # a directory where the stamp goes: the new wheel cannot be stored
                    self.assertEqual(outputs, {}, log)
                    self.assertIn("could not store the wheel", log)
                else:
                    self.assertEqual(outputs, {"store": "true"}, log)
                    self.assert_cache_holds_one_stamped_wheel(restored)
                    self.assertEqual((restored / "junk.txt").read_text(), "not a wheel\n")
                self.assertEqual(code, 0, log)
                self.assertEqual(self.installed_version(temp), "dwdeconv-rewrite 0.1.0 (rebuilt %d)" % n)
                self.assertEqual("::warning" in log.split("building the tool")[0], stamp is not None, log)

    def test_an_unwritable_cache_directory_still_installs_and_says_the_wheel_was_not_kept(self):
        temp = self.runner("runner A")
        blocked = temp / "a file"
        blocked.write_text("in the way\n")
        code, log, outputs, path = self.run_install(temp, cache=blocked / "cache", compilers="succeed")
        self.assertEqual(code, 0, log)
        self.assertIn("::warning title=dwdeconv-rewrite install::could not store the wheel in %s" % (blocked / "cache"), log)
        self.assertEqual(outputs, {})  # nothing for actions/cache/save
        self.assertEqual(self.installed_version(temp), "dwdeconv-rewrite 0.1.0 (built)")
        self.assert_nothing_left_but(temp, "dwdeconv-rewrite-venv", "a file")
        if os.geteuid() != 0:  # root writes into a read-only directory
            readonly = temp / "read-only"
            readonly.mkdir(mode=0o555)
            code, log, outputs, _ = self.run_install(temp, cache=readonly, compilers="succeed")
            self.assertEqual((code, outputs), (0, {}), log)
            self.assertEqual(list(readonly.iterdir()), [])

    def test_paths_with_spaces_and_url_characters_work_on_a_miss_a_hit_and_with_an_extra(self):
        # The action's checkout, RUNNER_TEMP and the cache: spaces, brackets, ';', '#', '%' and '@', which a
        # requirement string would misread, and the extra installed through a file:// URL.
        self.action = self.make_action(self.root / "odd [action] ;#%@")
        temp = self.runner("odd temp [x] ;#%@ ##[warning]legacy")
        cache = temp / "cache dir #1 [a] %20"
        extra = {"INPUT_MIN_SPEEDUP": "1.1", "INPUT_RUNTIME": "ort"}
        code, log, outputs, _ = self.run_install(temp, cache=cache, compilers="succeed", env=extra)
        self.assertEqual((code, outputs), (0, {"store": "true"}), log)
        wheel = self.assert_cache_holds_one_stamped_wheel(cache)
        self.calls.unlink()
        self.assertEqual(workflow_commands(log), ([], []))  # a path in the log (##[ anywhere) is no command
        temp = self.runner("odd hit [y] ;#%@ ##[error]legacy")
        shutil.copytree(cache, temp / "cache dir #1 [a] %20")
        code, log, outputs, _ = self.run_install(temp, cache=temp / "cache dir #1 [a] %20", compilers="fail", env=extra)
        self.assertEqual((code, outputs), (0, {}), log)
        self.assertEqual(workflow_commands(log), ([], []))
        self.assertEqual(self.compiler_calls(), [])
        self.assertIn("cache hit: %s" % str(temp / "cache dir #1 [a] %20" / wheel.name).replace("##[", "##\\x5b"), log)
        self.assertEqual(self.installed_version(temp), "dwdeconv-rewrite 0.1.0 (built)")

    def test_an_interrupted_build_leaves_nothing_behind(self):
        temp = self.runner("runner A")
        # As the runner cancels a step: a signal to the step's process group, during the build's compile.
        proc = self.run_install(temp, compilers="succeed", env={"STAND_IN_SLEEP": "60"}, popen=True)
        try:
            deadline = time.time() + 120
            while not self.compiler_calls() and proc.poll() is None and time.time() < deadline:
                time.sleep(0.2)
            self.assertEqual(self.compiler_calls(), ["c++ -O2 -c tool.cpp -o tool.o"])
            os.killpg(proc.pid, signal.SIGTERM)
            log, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
        self.assertEqual(proc.returncode, 143, log)
        self.assert_nothing_left_but(temp)  # no venv, no scratch directory, no cache directory

    def test_missing_environment_is_a_usage_error(self):
        temp = self.runner("runner A")
        for variable in ("GITHUB_ACTION_PATH", "RUNNER_TEMP", "DWDECONV_WHEEL_CACHE"):
            with self.subTest(variable=variable):
                code, log, _, _ = self.run_install(temp, env={variable: ""})
                self.assertEqual(code, 2, log)
                self.assertIn("::error title=dwdeconv-rewrite install::%s is not set" % variable, log)
        self.assert_nothing_left_but(temp)


class CacheKeyTest(ActionCacheCase):
    """action/cache_key.sh: what the key names, and what changes it."""

    def key(self, env=None):
        full = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_"))}
        full.update({"GITHUB_ACTION_PATH": str(self.action), "RUNNER_TEMP": str(self.root / "temp"),
                     "RUNNER_OS": "Linux", "RUNNER_ARCH": "X64", "GITHUB_OUTPUT": str(self.root / "out")})
        full.update(env or {})
        (self.root / "out").write_text("")
        r = subprocess.run(["bash", str(self.action / "action" / "cache_key.sh")], env=full, capture_output=True,
                           text=True, check=True)
        outputs = dict(line.split("=", 1) for line in (self.root / "out").read_text().splitlines())
        self.assertEqual(r.stdout, (self.root / "out").read_text())
        return outputs

    def test_the_key_names_the_runner_the_containers_os_release_and_machine_and_the_actions_files(self):
        outputs = self.key()
        self.assertEqual(outputs["dir"], str(self.root / "temp" / "dwdeconv-rewrite-wheel"))
        release = {}
        for line in Path("/etc/os-release").read_text().splitlines():
            if "=" in line:
                name, value = line.split("=", 1)
                release[name] = value.strip('"')
        parts = outputs["key"].split("-")
        self.assertEqual(parts[:3], ["dwdeconv", "rewrite", "wheel"])
        self.assertEqual(parts[3:8], ["Linux", "X64", release["ID"], release.get("VERSION_ID", release.get(
            "VERSION_CODENAME")), os.uname().machine.replace("-", "_")])
        self.assertRegex(parts[8], r"^[0-9a-f]{64}$")
        self.assertEqual(len(parts), 9)
        self.assertEqual(self.key()["key"], outputs["key"])  # the same files, the same key
        self.assertNotEqual(self.key({"RUNNER_ARCH": "ARM64"})["key"], outputs["key"])

    def test_any_change_to_the_actions_files_changes_the_key_and_build_outputs_do_not(self):
        base = self.key()["key"]
        seen = {base}
        script = self.action / "action" / "install.sh"
        original = script.read_bytes()
        changes = [
            ("a byte of a file", lambda: script.write_bytes(original + b"\n")),
            ("a new file", lambda: (self.action / "docs.md").write_text("x")),
            ("a renamed file", lambda: (self.action / "docs.md").rename(self.action / "docs2.md")),
            ("a file in a subdirectory", lambda: (self.action / "python" / "dwdeconv_rewrite" / "new.py").write_text("")),
        ]
        for what, change in changes:
            with self.subTest(change=what):
                change()
                key = self.key()["key"]
                self.assertNotIn(key, seen)
                seen.add(key)
        now = self.key()["key"]
        # What .gitignore leaves out (a clone's .git, a build directory, Python's bytecode) is not the action's.
        for junk in (".git/HEAD", "build-pip/x/CMakeCache.txt", "action/__pycache__/gate_runtime.cpython-311.pyc"):
            (self.action / junk).parent.mkdir(parents=True, exist_ok=True)
            (self.action / junk).write_text("x")
        self.assertEqual(self.key()["key"], now)

    def test_a_hostile_runner_value_cannot_break_the_key(self):
        # A key may not hold a comma (actions/cache), and a line break would end the step output.
        outputs = self.key({"RUNNER_OS": "Linux,x\nkey=forged", "RUNNER_ARCH": ""})
        self.assertEqual(sorted(outputs), ["dir", "key"])
        self.assertRegex(outputs["key"], r"^dwdeconv-rewrite-wheel-Linux_x_key_forged-unknown-[A-Za-z0-9._+-]+$")
        self.assertLessEqual(len(outputs["key"]), 512)


class RuntimeLibrariesTest(unittest.TestCase):
    """.ci/install-deps --runtime-libs against the binary: every library it loads comes from a package in the list."""

    def test_each_library_the_binary_loads_comes_from_a_listed_package(self):
        tools = [shutil.which(t) for t in ("readelf", "ldd", "dpkg-query")]
        if None in tools:
            self.skipTest("needs readelf, ldd and dpkg-query (a Debian system)")
        binary = os.environ["DWDECONV_REWRITE"]
        listed = subprocess.run([str(SOURCE / ".ci" / "install-deps"), "--runtime-libs", "--list"], capture_output=True,
                                text=True, check=True).stdout.split()
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]",
                            subprocess.run(["readelf", "-d", binary], capture_output=True, text=True, check=True).stdout)
        self.assertIn("libonnx.so.1", needed)
        resolved = dict(re.findall(r"^\s*(\S+) => (/\S+)", subprocess.run(["ldd", binary], capture_output=True, text=True,
                                                                        check=True).stdout, re.M))
        for library in needed:
            with self.subTest(library=library):
                path = resolved[library]
                # dpkg records a file under /lib or /usr/lib, whichever its package ships it in (merged /usr).
                candidates = [path, os.path.realpath(path)]
                candidates += [re.sub(r"^/usr/lib/", "/lib/", c) for c in candidates]
                candidates += [re.sub(r"^/lib/", "/usr/lib/", c) for c in candidates]
                packages = set()
                for c in dict.fromkeys(candidates):
                    r = subprocess.run(["dpkg-query", "-S", c], capture_output=True, text=True)
                    if r.returncode == 0:
                        packages |= {p.split(":")[0].strip() for p in r.stdout.split(": ")[0].split(",")}
                self.assertTrue(packages, "no package ships %s (%s)" % (library, path))
                self.assertTrue(packages & set(listed), "%s comes from %s, which --runtime-libs does not list"
                                % (library, sorted(packages)))


if __name__ == "__main__":
    unittest.main(verbosity=2)
