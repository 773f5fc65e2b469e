#!/usr/bin/env bash
# Runs examples/pipeline.sh as CI would; CASE (the first argument) picks the scenario. ctest supplies
# DWDECONV_REWRITE, DWDECONV_MAKE_MODELS and DWDECONV_SOURCE_DIR (tests/packaging/CMakeLists.txt).
set -euo pipefail
case_name=$1
pipeline=$DWDECONV_SOURCE_DIR/examples/pipeline.sh
example=$DWDECONV_SOURCE_DIR/examples/migan_tiny_deconv.onnx
tool=$DWDECONV_REWRITE
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

die() { echo "FAIL: $*" >&2; exit 1; }

# run_pipeline EXPECTED_EXIT ARGS...: runs the pipeline, keeps its stderr in err.txt and stdout in out.txt.
run_pipeline() {
  local expected=$1 rc=0
  shift
  bash "$pipeline" "$@" >out.txt 2>err.txt || rc=$?
  cat out.txt err.txt
  [ "$rc" -eq "$expected" ] || die "pipeline.sh $* exited $rc, expected $expected"
}
expect_in() {  # expect_in FILE TEXT
  grep -qF -- "$2" "$1" || die "'$2' not in $1"
}
count_convtranspose() {  # the plan prints one line per ConvTranspose
  "$tool" "$1" --dry-run 2>/dev/null | grep -cE '^(rewrite|keep) ' || true
}

case $case_name in
  example)
    run_pipeline 0 "$example" out/migan.xnn.onnx --target xnnpack
    [ -s out/migan.xnn.onnx ] || die "no output model"
    expect_in out/migan.xnn.report.json '"mode": "whole-model"'
    expect_in out/migan.xnn.report.json '"passed": true'
    expect_in err.txt "[1/3] rewrite and verify"
    expect_in err.txt "[3/3] check"
    expect_in err.txt "OK: out/migan.xnn.onnx is rewritten, verified and checked"
    [ "$(count_convtranspose out/migan.xnn.onnx)" -eq 0 ] || die "ConvTranspose left in the output"
    ;;
  input_shape)
    "$DWDECONV_MAKE_MODELS" .
    run_pipeline 0 symbolic_upsampler.onnx up.xnn.onnx --input-shape image=1x4x8x8 --report r.json --target xnnpack
    expect_in r.json '"passed": true'
    [ -s up.xnn.onnx ] || die "no output model"
    ;;
  unverifiable)
    "$DWDECONV_MAKE_MODELS" .
    run_pipeline 4 symbolic_upsampler.onnx up.xnn.onnx --target xnnpack
    expect_in err.txt "FAILED: step 1 (rewrite and verify)"
    expect_in err.txt "exit 4: could not verify"
    [ ! -e up.xnn.onnx ] || die "an unverified model was written"
    ;;
  bad_model)
    printf 'this is not an ONNX model\n' >bad.onnx
    run_pipeline 3 bad.onnx bad.xnn.onnx
    expect_in err.txt "FAILED: step 1 (rewrite and verify) of bad.onnx, exit 3: invalid model"
    [ ! -e bad.xnn.onnx ] || die "output written for a bad model"
    run_pipeline 3 missing.onnx missing.xnn.onnx
    expect_in err.txt "model 'missing.onnx' does not exist"
    ;;
  check_fails)
    # A stand-in tool whose "rewrite" copies the model unchanged, as a broken or outdated rewriter might: the
    # real tool's --check must then catch the rewritable nodes left in OUT.
    cat >copying-tool <<STUB
#!/usr/bin/env bash
set -eu
case " \$* " in
  *" -o "*) cp "\$1" "\$3"; echo '{"verify": {"passed": true}}' >"\$6" ;;
  *) exec "$tool" "\$@" ;;
esac
STUB
    chmod +x copying-tool
    DWDECONV_REWRITE=$PWD/copying-tool run_pipeline 1 "$example" copied.onnx --target xnnpack
    expect_in err.txt "FAILED: step 3 (check) of copied.onnx, exit 1: a ConvTranspose that should have been rewritten is still there"
    # The same stand-in without the report fails step 2.
    # shellcheck disable=SC2016  # the pattern matches the stand-in's literal "$6"
    sed -i 's/; echo .*>"\$6"//' copying-tool
    DWDECONV_REWRITE=$PWD/copying-tool run_pipeline 3 "$example" copied2.onnx --report nowhere.json
    expect_in err.txt "FAILED: step 2 (report): nowhere.json was not written"
    ;;
  usage)
    run_pipeline 2 "$example"
    expect_in err.txt "usage: pipeline.sh MODEL.onnx OUT.onnx"
    run_pipeline 2 "$example" o.onnx --frobnicate
    expect_in err.txt "unknown option '--frobnicate'"
    DWDECONV_REWRITE=$PWD/no-such-tool run_pipeline 127 "$example" o.onnx
    expect_in err.txt "is not an executable file"
    if ! PATH=/usr/bin:/bin command -v dwdeconv-rewrite >/dev/null; then  # unless installed system-wide
      DWDECONV_REWRITE='' PATH=/usr/bin:/bin run_pipeline 127 "$example" o.onnx
      expect_in err.txt "dwdeconv-rewrite not found: put it on PATH or set DWDECONV_REWRITE"
    fi
    # On PATH, as after `cmake --install` or installing the .deb.
    mkdir bin && ln -s "$tool" bin/dwdeconv-rewrite
    DWDECONV_REWRITE='' PATH=$PWD/bin:/usr/bin:/bin run_pipeline 0 "$example" o.onnx
    ;;
  *) die "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
