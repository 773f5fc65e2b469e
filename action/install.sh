#!/usr/bin/env bash
# action.yml's install step: installs dwdeconv-rewrite from the action's checkout into a virtual environment,
# $RUNNER_TEMP/dwdeconv-rewrite-venv, and puts its bin/ on the job's PATH. It builds the tool once per action
# version: the wheel it builds is kept in DWDECONV_WHEEL_CACHE (actions/cache restores and saves that directory,
# under action/cache_key.sh's key), and a later run installs that wheel without compiling anything.
#
#   cache hit   DWDECONV_WHEEL_CACHE holds a wheel whose sha256 matches the one recorded beside it when it was
#               stored: .ci/install-deps --runtime-libs (the shared libraries the binary loads, python3-venv; no
#               compiler, no -dev package), then `pip install --no-index --no-deps WHEEL` (a wheel file: pip builds
#               nothing, and fetches nothing), then `dwdeconv-rewrite --version` must run.
#   cache miss  .ci/install-deps --pip, `pip wheel` of the action's checkout (CMake through scikit-build-core, in a
#               scratch directory: 3-15 minutes), the same install and check of that wheel, and then the wheel is
#               stored in DWDECONV_WHEEL_CACHE and the step output `store` set to true, for actions/cache/save.
# A cached wheel that is damaged (its sha256 differs), that pip refuses (another platform's), whose tool does not run
# (a library missing or of another version), or whose runtime libraries .ci/install-deps cannot install (a system
# that names them otherwise) is never used: the script says so in a warning and builds, as on a miss. A wheel it has
# just built that does not run fails the step (exit 1).
#
# With min-speedup, the gate's runtime's extra (pyproject.toml, chosen by action/gate_runtime.py) is then installed
# from PyPI against that same wheel file, as `pip install "dwdeconv-rewrite[EXTRA] @ file:///WHEEL"`.
#
# The cache directory holds DWDECONV_WHEEL_CACHE/dwdeconv_rewrite-VERSION-py3-none-PLATFORM.whl and
# DWDECONV_WHEEL_CACHE/dwdeconv-rewrite-wheel.sha256, one line "SHA256  WHEEL-FILE-NAME" (sha256sum's format). The
# wheel is written first and the line last, each to a temporary name and renamed, so an interrupted store leaves
# no line that names a whole wheel. Other files there are not read.
#
# Environment: GITHUB_ACTION_PATH (the action's checkout), RUNNER_TEMP, DWDECONV_WHEEL_CACHE; the inputs
# INPUT_RUNTIME, INPUT_TARGET, INPUT_MIN_SPEEDUP and INPUT_INSTALL_DEPENDENCIES ("true": run .ci/install-deps);
# GITHUB_PATH and GITHUB_OUTPUT when set. It runs the same locally with those set.
# Exit 0 installed; 1 the tool could not be built or installed, or does not run; 2 a bad input (runtime, target) or
# environment. Nothing is left in RUNNER_TEMP but the venv and the cache directory, and after an error not the venv.
set -euo pipefail

# A workflow command's message: %, CR and LF escaped as the runner unescapes them (actions/toolkit, escapeData).
escape_data() { local s=${1//%/%25}; s=${s//$'\r'/%0D}; printf '%s' "${s//$'\n'/%0A}"; }
warn() { printf '::warning title=dwdeconv-rewrite install::%s\n' "$(escape_data "$*")"; }
fail() { printf '::error title=dwdeconv-rewrite install::%s\n' "$(escape_data "$1")"; exit "${2:-1}"; }
# A log line: CR and LF shown as \x0d and \x0a, and the legacy command form `##[`, which the runner takes anywhere in a
# line, broken up, as action/run.py's escape() does; so a path cannot start a workflow command.
note() {
  local s="$*"
  s=${s//$'\r'/\\x0d}; s=${s//$'\n'/\\x0a}; s=${s//'##['/'##\x5b'}
  printf 'dwdeconv-rewrite install: %s\n' "$s"
}
output() { [ -z "${GITHUB_OUTPUT:-}" ] || printf '%s=%s\n' "$1" "$2" >>"$GITHUB_OUTPUT"; }

for variable in GITHUB_ACTION_PATH RUNNER_TEMP DWDECONV_WHEEL_CACHE; do
  [ -n "${!variable:-}" ] || fail "$variable is not set (action.yml sets it: see action/install.sh)" 2
done
action=$GITHUB_ACTION_PATH  # the action's checkout, installed from
temp=$RUNNER_TEMP           # where the venv and the scratch directory go
cache=$DWDECONV_WHEEL_CACHE # the directory actions/cache restores and saves
case $cache in /*) ;; *) cache=$PWD/$cache ;; esac  # pip and the file:// URL need it absolute
venv=$temp/dwdeconv-rewrite-venv
stamp_name=dwdeconv-rewrite-wheel.sha256
# The only wheel names the cache holds: pip's name for this project's py3-none wheel (pyproject.toml, wheel.py-api).
wheel_pattern='^dwdeconv_rewrite-[0-9][0-9A-Za-z.+]*-py3-none-[A-Za-z0-9_.]+\.whl$'

scratch=$(mktemp -d "$temp/dwdeconv-rewrite-install.XXXXXX") || fail "cannot make a directory in RUNNER_TEMP ($temp)" 2
installed=false
cleanup() {
  rm -rf "$scratch"
  if [ "$installed" != true ]; then rm -rf "$venv"; fi
  # A store cut short leaves its temporary names behind.
  rm -f "$cache/.dwdeconv-rewrite-store.$$".* 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Sets `wheel` to the cached wheel's path when DWDECONV_WHEEL_CACHE holds a whole one; else empties it, and sets
# `why_not` to the reason when something was there (nothing at all is a plain miss).
find_cached_wheel() {
  local stamp=$cache/$stamp_name content sum name
  wheel="" why_not=""
  [ -e "$stamp" ] || [ -L "$stamp" ] || return 0
  [ -f "$stamp" ] || { why_not="$stamp is not a regular file"; return 0; }  # a FIFO would block the read
  content=$(head -c 400 "$stamp" 2>&1) || { why_not="cannot read $stamp: $content"; return 0; }
  if ! [[ $content =~ ^([0-9a-f]{64})\ \ ([^[:space:]/]+)$ ]]; then
    why_not="$stamp is not one line \"SHA256  WHEEL-FILE-NAME\""; return 0
  fi
  sum=${BASH_REMATCH[1]} name=${BASH_REMATCH[2]}
  [[ $name =~ $wheel_pattern ]] || { why_not="$stamp names $name, not a py3-none wheel of dwdeconv_rewrite"; return 0; }
  [ -f "$cache/$name" ] || { why_not="$stamp names $name, which is not there"; return 0; }
  [ "$(sha256sum <"$cache/$name" | cut -c1-64)" = "$sum" ] \
    || { why_not="$cache/$name is damaged: its sha256 is not the one recorded when it was stored"; return 0; }
  wheel=$cache/$name
}

install_deps() {
  if [ "${INPUT_INSTALL_DEPENDENCIES:-true}" = true ]; then "$action/.ci/install-deps" "$1"; fi
}

# A new, empty venv (a tool half installed by an earlier attempt goes with the old one).
make_venv() {
  rm -rf "$venv"
  python3 -m venv "$venv" || fail "python3 -m venv $venv failed (Debian: python3-venv)"
}

# The wheel `$1` as a file:// URL: pip reads a " ;", "#" or "[" in a path (a ref's name may hold them) as a
# requirement's marker, fragment or extras.
wheel_url() { "$venv/bin/python" -c 'import pathlib, sys; print(pathlib.Path(sys.argv[1]).as_uri())' "$1"; }

# Installs the wheel `$1` into the venv and runs its tool; pip cannot build or download anything here. Returns 1,
# with the reason in `why_not`, when pip refuses the wheel or the tool does not run.
install_tool() {
  local wheel=$1 version
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index --no-deps \
         "dwdeconv-rewrite @ $(wheel_url "$wheel")"; then
    why_not="pip did not install $wheel (above)"; return 1
  fi
  # The installed package and binary, not a package PYTHONPATH finds or a binary DWDECONV_REWRITE names.
  if ! version=$(env -u DWDECONV_REWRITE -u PYTHONPATH -u PYTHONHOME "$venv/bin/dwdeconv-rewrite" --version 2>&1) \
       || [[ $version != "dwdeconv-rewrite "* ]]; then
    why_not="the tool installed from $wheel does not run here: $(printf '%s' "$version" | head -n 3)"; return 1
  fi
  note "installed $version from $wheel"
}

# Puts the wheel `$1` into the cache directory; warns and returns 1 when it cannot (the next run then builds again).
store() {
  local wheel=$1 name tmp sum old
  name=$(basename "$wheel")
  tmp=$cache/.dwdeconv-rewrite-store.$$
  if ! { mkdir -p "$cache" && rm -f "$cache/$stamp_name" && cp "$wheel" "$tmp.whl" && mv -f "$tmp.whl" "$cache/$name" \
         && sum=$(sha256sum <"$cache/$name" | cut -c1-64) && printf '%s  %s\n' "$sum" "$name" >"$tmp.sha256" \
         && mv -f "$tmp.sha256" "$cache/$stamp_name"; } 2>"$scratch/store.log"; then
    warn "could not store the wheel in $cache ($(head -n 1 "$scratch/store.log")): the next run builds it again"
    return 1
  fi
  # One wheel in the cache: another version's would only be saved along.
  for old in "$cache"/dwdeconv_rewrite-*.whl; do
    [ "$old" = "$cache/$name" ] || rm -f "$old"
  done
  note "stored $name in $cache"
}

find_cached_wheel
if [ -n "$wheel" ]; then
  note "cache hit: $wheel"
  # A system whose runtime packages are named otherwise (Ubuntu 24.04's t64 libraries) cannot install them: it
  # builds, as on a miss, with the -dev packages, whose names do not change.
  if ! install_deps --runtime-libs; then
    warn "not using the cached wheel: .ci/install-deps --runtime-libs failed (above). Building the tool instead"
    wheel=""
    install_deps --pip
  fi
else
  [ -z "$why_not" ] || warn "not using the cached wheel: $why_not"
  install_deps --pip
fi

# The speed gate (min-speedup) runs on `runtime`, by default the target's own (action/gate_runtime.py): any but the
# tool's own executor is Python packages, the extra of its name in pyproject.toml. A bad value is not echoed back:
# the runner would parse it (gate_runtime.py prints a workflow command naming the input).
command -v python3 >/dev/null || fail "no python3 on PATH (Debian: python3 and python3-venv, which install-dependencies installs)" 2
runtime=$(python3 "$action/action/gate_runtime.py") || { printf '%s\n' "$runtime"; exit 2; }
case $runtime in
  xnnpack) extra="" ;;
  ort|litert|executorch|openvino|mnn) extra="[$runtime]" ;;
  *) fail "runtime: not one of xnnpack, ort, litert, executorch, openvino, mnn" 2 ;;
esac
[ -n "${INPUT_MIN_SPEEDUP:-}" ] || extra=""  # nothing runs on the runtime without the gate

[ -z "$wheel" ] || make_venv
if [ -n "$wheel" ] && ! install_tool "$wheel"; then
  warn "not using the cached wheel: $why_not. Building the tool instead. A cache entry is never replaced: delete this one (gh cache delete, or the repository's Actions caches page), or every run builds"
  wheel=""
  install_deps --pip
fi
if [ -z "$wheel" ]; then
  note "building the tool from $action (CMake; 3-15 minutes on 2 cores)"
  start=$SECONDS
  make_venv
  # The build directory in the scratch directory, not build-pip/ in the action's checkout. The checkout as ".", not
  # its path, which pip could misread as wheel_url() says.
  (cd "$action" && "$venv/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-deps \
     --config-settings=build-dir="$scratch/build" -w "$scratch/dist" .) || fail "pip wheel of $action failed (above)"
  built=("$scratch"/dist/*.whl)
  { [ "${#built[@]}" = 1 ] && [ -f "${built[0]}" ]; } || fail "pip wheel left no single wheel in $scratch/dist"
  [[ $(basename "${built[0]}") =~ $wheel_pattern ]] || fail "pip wheel built $(basename "${built[0]}"), not a py3-none wheel"
  note "built $(basename "${built[0]}") in $((SECONDS - start)) s"
  install_tool "${built[0]}" || fail "$why_not"
  wheel=${built[0]}
  if store "$wheel"; then
    wheel=$cache/$(basename "$wheel")
    output store true
  fi
fi

if [ -n "$extra" ]; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "dwdeconv-rewrite$extra @ $(wheel_url "$wheel")" \
    || fail "pip could not install the extra $extra (above)"
fi
installed=true
[ -z "${GITHUB_PATH:-}" ] || printf '%s\n' "$venv/bin" >>"$GITHUB_PATH"
