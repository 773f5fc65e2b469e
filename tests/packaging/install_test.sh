#!/usr/bin/env bash
# Checks what `cmake --install` puts in a prefix, and what --version prints. ctest supplies DWDECONV_BUILD_DIR,
# DWDECONV_SOURCE_DIR, DWDECONV_REWRITE, DWDECONV_PROJECT_VERSION and DWDECONV_MAN_PAGE_EXPECTED.
set -euo pipefail
case_name=$1
die() { echo "FAIL: $*" >&2; exit 1; }

case $case_name in
  install)
    prefix=$(mktemp -d)
    trap 'rm -rf "$prefix"' EXIT
    # --install writes install_manifest.txt into the build tree; nothing else there changes.
    cmake --install "$DWDECONV_BUILD_DIR" --prefix "$prefix"
    (cd "$prefix" && find . -type f | sort)
    [ -x "$prefix/bin/dwdeconv-rewrite" ] || die "bin/dwdeconv-rewrite missing or not executable"
    "$prefix/bin/dwdeconv-rewrite" --version | grep -q "^dwdeconv-rewrite $DWDECONV_PROJECT_VERSION" \
      || die "the installed binary does not report version $DWDECONV_PROJECT_VERSION"
    # --runtime's Python module, where the installed binary looks for it (../share/dwdeconv-rewrite/python).
    module_dir=$(cd "$prefix/share/dwdeconv-rewrite/python" && pwd -P) || die "share/dwdeconv-rewrite/python missing"
    [ -f "$module_dir/dwdeconv_rewrite/runtimes/__main__.py" ] || die "the --runtime module's __main__.py is not installed"
    if command -v python3 >/dev/null; then
      bare=$(mktemp)
      printf '#!/bin/sh\nexec python3 -S "$@"\n' >"$bare" && chmod +x "$bare"
      said=$("$prefix/bin/dwdeconv-rewrite" "$DWDECONV_SOURCE_DIR/examples/upsampler_small.onnx" -v --runtime ort \
             --compare "$DWDECONV_SOURCE_DIR/examples/upsampler_small.onnx" --python "$bare" 2>&1 || true)
      rm -f "$bare"
      grep -qF "with the Python module from $module_dir" <<<"$said" || die "the installed binary does not use the installed module: $said"
    fi
    for f in LICENSE README.md docs/README.md docs/cli.md docs/forms.md docs/verification.md; do
      cmp "$DWDECONV_SOURCE_DIR/$f" "$prefix/share/doc/dwdeconv-rewrite/$f" || die "share/doc/dwdeconv-rewrite/$f"
    done
    # The shell completions, generated from the option table: every option --help lists, and the target names.
    bash_completion=$prefix/share/bash-completion/completions/dwdeconv-rewrite
    zsh_completion=$prefix/share/zsh/vendor-completions/_dwdeconv-rewrite
    [ -s "$bash_completion" ] || die "share/bash-completion/completions/dwdeconv-rewrite missing"
    [ -s "$zsh_completion" ] || die "share/zsh/vendor-completions/_dwdeconv-rewrite missing"
    head -1 "$zsh_completion" | grep -qx '#compdef dwdeconv-rewrite' || die "the zsh completion has no #compdef line"
    for opt in $("$DWDECONV_REWRITE" --help | grep -oE -- '--[a-z][a-z-]+' | sort -u); do
      grep -qF -- " $opt" "$bash_completion" || die "$opt is in --help but not in the bash completion"
      grep -qF -- "'$opt" "$zsh_completion" || grep -qF -- "'*$opt" "$zsh_completion" \
        || die "$opt is in --help but not in the zsh completion"
    done
    # bash completes a --target value from the targets and their aliases, and an option from the options.
    completed=$(bash -c 'source "$1"; COMP_WORDS=(dwdeconv-rewrite m.onnx --target l); COMP_CWORD=3; _dwdeconv_rewrite
                         printf "%s\n" "${COMPREPLY[@]}"' sh "$bash_completion")
    [ "$completed" = litert ] || die "bash completes '--target l' as '$completed', not litert"
    completed=$(bash -c 'source "$1"; COMP_WORDS=(dwdeconv-rewrite m.onnx --ver); COMP_CWORD=2; _dwdeconv_rewrite
                         printf "%s\n" "${COMPREPLY[@]}"' sh "$bash_completion" | sort | tr '\n' ' ')
    [ "$completed" = "--verbose --verify --version " ] || die "bash completes '--ver' as '$completed'"
    if command -v zsh >/dev/null; then
      zsh -n "$zsh_completion" || die "the zsh completion does not parse"
    fi
    man_page=$prefix/share/man/man1/dwdeconv-rewrite.1
    if [ "$DWDECONV_MAN_PAGE_EXPECTED" = 1 ]; then
      [ -s "$man_page" ] || die "share/man/man1/dwdeconv-rewrite.1 missing"
      grep -q '^\.TH DWDECONV-REWRITE "1"' "$man_page" || die "no .TH header in the man page"
      # Every long option --help lists is in the page (help2man escapes '-' as '\-').
      options=$("$DWDECONV_REWRITE" --help | grep -oE -- '--[a-z][a-z-]+' | sort -u)
      [ -n "$options" ] || die "--help lists no options"
      for opt in $options; do
        grep -qF -- "${opt//-/\\-}" "$man_page" || die "$opt is in --help but not in the man page"
      done
    else
      echo "help2man was not found at configure time: no man page expected"
    fi
    ;;
  version)
    line=$("$DWDECONV_REWRITE" --version)
    echo "$line"
    v=${DWDECONV_PROJECT_VERSION//./\\.}
    if git -C "$DWDECONV_SOURCE_DIR" rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
       [ "$(cd "$(git -C "$DWDECONV_SOURCE_DIR" rev-parse --show-toplevel)" && pwd -P)" = "$(cd "$DWDECONV_SOURCE_DIR" && pwd -P)" ]; then
      # Built from a checkout: the revision is that of HEAD when the binary was last built.
      [[ $line =~ ^dwdeconv-rewrite\ $v\ \(git\ ([0-9a-f]{7,})(,\ dirty)?\)$ ]] \
        || die "expected 'dwdeconv-rewrite $DWDECONV_PROJECT_VERSION (git <rev>[, dirty])'"
      rev=${BASH_REMATCH[1]}
      git -C "$DWDECONV_SOURCE_DIR" rev-parse --verify --quiet "$rev^{commit}" >/dev/null \
        || die "$rev is not a commit of $DWDECONV_SOURCE_DIR"
    else
      [[ $line =~ ^dwdeconv-rewrite\ $v$ ]] || die "expected 'dwdeconv-rewrite $DWDECONV_PROJECT_VERSION'"
    fi
    ;;
  *) die "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
