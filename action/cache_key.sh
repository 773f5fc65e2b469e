#!/usr/bin/env bash
# action.yml's first step: the actions/cache key and directory of the wheel the action builds, as the step outputs
# `key` and `dir` ($GITHUB_OUTPUT; printed as key=... and dir=... without it). action/install.sh installs from that
# directory when it holds a wheel, else builds one into it.
#
# The key names everything the wheel depends on, so that a wheel is reused only where it was built:
#   dwdeconv-rewrite-wheel-RUNNER_OS-RUNNER_ARCH-ID-VERSION_ID-MACHINE-SHA256
# - RUNNER_OS, RUNNER_ARCH: the runner's (Linux, X64), as actions/cache's own examples key on them.
# - ID, VERSION_ID: /etc/os-release inside the job's container (debian, 12): the binary links against that
#   release's libonnx.so.1, libprotobuf.so.32, libXNNPACK.so.0, ... (Debian keeps a stable release's sonames).
# - MACHINE: `uname -m` inside the container (x86_64): the wheel's platform tag.
# - SHA256: over the action's own files ($GITHUB_ACTION_PATH, but what .gitignore leaves out), their names and
#   contents in sorted order: the action's version. github.action_ref is no substitute: it may be a branch
#   name (@main), and in a composite action's steps it is empty (actions/runner#2473); hashFiles() sees only the
#   workspace. So any change to the action, docs included, builds a new wheel once.
# The Python version is not in the key: the wheel is py3-none (the binary does not load Python), and before
# .ci/install-deps there may be no python3 in the container at all.
set -euo pipefail
action=${GITHUB_ACTION_PATH:?GITHUB_ACTION_PATH is not set: the action checkout to hash}
temp=${RUNNER_TEMP:?RUNNER_TEMP is not set: the directory the cached wheel goes under}

# One key part: the characters actions/cache and a log take as they are (a key may not hold a comma).
part() { printf '%s' "${1:-unknown}" | tr -c 'A-Za-z0-9._+' '_'; }

os_release=/etc/os-release
[ -r "$os_release" ] || os_release=/usr/lib/os-release
# os-release's VAR=value or VAR="value" (os-release(5)); read, not sourced.
os_field() { if [ -r "$os_release" ]; then sed -n "s/^$1=//p" "$os_release" | head -n 1 | sed 's/^"\(.*\)"$/\1/'; fi; }
os_id=$(os_field ID)
os_version=$(os_field VERSION_ID)
[ -n "$os_version" ] || os_version=$(os_field VERSION_CODENAME)  # Debian testing and sid have no VERSION_ID

# Left out, as .gitignore leaves them out: .git, top-level build*/ directories, and __pycache__/ (run.py's import of
# gate_runtime.py writes one into action/, which would change the key of a second use of the action in one job).
files_hash=$(cd "$action" && find . -mindepth 1 \( -path ./.git -o -type d \( -path './build*' -o -name __pycache__ \) \) \
               -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum -- | sha256sum | cut -c1-64)

key="dwdeconv-rewrite-wheel-$(part "${RUNNER_OS:-}")-$(part "${RUNNER_ARCH:-}")-$(part "$os_id")-$(part "$os_version")"
key="$key-$(part "$(uname -m)")-$files_hash"
dir="$temp/dwdeconv-rewrite-wheel"
case $dir in
  *$'\n'*|*$'\r'*) echo "cache_key.sh: RUNNER_TEMP holds a line break" >&2; exit 2 ;;
esac
if [ -n "${GITHUB_OUTPUT:-}" ]; then
  printf 'key=%s\ndir=%s\n' "$key" "$dir" >>"$GITHUB_OUTPUT"
fi
printf 'key=%s\ndir=%s\n' "$key" "$dir"
