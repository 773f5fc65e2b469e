#include "cli/help_text.h"

#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <vector>

#include "cli/runtime_python.h"
#include "rewrite/forms.h"
#include "rewrite/targets.h"

namespace dwdeconv::cli {
namespace {

// CLI11's formatter, with every text wrapped to the width: an option's description to the width less the option
// column, continued under itself.
class WrappingFormatter : public CLI::Formatter {
 public:
  explicit WrappingFormatter(size_t width) : width_(width) {}
  std::string make_option_desc(const CLI::Option* opt) const override {
    return wrap_text(opt->get_description(), width_ - get_column_width());
  }
  std::string make_description(const CLI::App* app) const override { return wrap_text(CLI::Formatter::make_description(app), width_); }
  std::string make_footer(const CLI::App* app) const override { return wrap_text(CLI::Formatter::make_footer(app), width_); }

 private:
  size_t width_;
};

}  // namespace

std::string wrap_text(const std::string& text, size_t width) {
  std::string out;
  std::istringstream lines(text);
  bool first_line = true;
  for (std::string line; std::getline(lines, line); first_line = false) {
    if (!first_line) out += '\n';
    const size_t lead = line.find_first_not_of(' ');
    if (lead == std::string::npos || line.size() <= width) {
      out += line;
      continue;
    }
    // A continuation is indented 2 past the line's own indent, so an item of a list stays one item.
    const std::string indent(lead + 2, ' ');
    std::string current = line.substr(0, lead);
    bool empty = true;
    std::istringstream words(line.substr(lead));
    for (std::string word; words >> word;) {
      if (!empty && current.size() + 1 + word.size() > width) {
        out += current + '\n';
        current = indent;
        empty = true;
      }
      current += (empty ? "" : " ") + word;
      empty = false;
    }
    out += current;
  }
  if (!text.empty() && text.back() == '\n') out += '\n';
  return out;
}

void wrap_help(CLI::App& app, size_t width) { app.formatter(std::make_shared<WrappingFormatter>(width)); }

std::string app_description() {
  // Wrapped to --help's width (wrap_help: 100) here, so that the formatter leaves every line as it is.
  return "Rewrites the upsamplers of an ONNX model for XNNPACK-based runtimes (LiteRT, ExecuTorch, a custom\n"
         "XNNPACK runtime): depthwise ConvTranspose, and the hand-written forms nearest x mask, zero\n"
         "insertion, upfirdn2d and nearest + Conv, become s*s stride-1 Convs + Concat + DepthToSpace, which\n"
         "XNNPACK runs as fast depthwise kernels. --verify checks the result on XNNPACK; --dry-run shows each\n"
         "node's decision and why.\n\n"
         "Where it does not pay off: ONNX Runtime's CPU provider (use --target ort, which keeps nearly\n"
         "everything); dense and grouped ConvTransposes, which XNNPACK already runs well (kept); and models\n"
         "whose time is mostly elsewhere (a MI-GAN-like generator: 1.38x on this tool's executor, though its\n"
         "upsamplers ran 19x faster).";
}

void use_readable_value_names(CLI::App& app) {
  static const std::map<std::string, std::string> kNames = {
      {"models", "MODEL|DIR..."},
      {"output", "OUT"},
      {"out-dir", "DIR"},
      {"jobs", "N"},
      {"only", "NAME"},
      {"skip", "NAME"},
      {"forms", "LIST"},
      {"target", "NAME"},
      {"max-phases", "N"},
      {"report", "FILE"},
      {"compare", "OTHER"},
      {"input-shape", "[NAME:]D,D,..."},
      {"input", "[NAME=]FILE"},
      {"seed", "N"},
      {"atol", "X"},
      {"rtol", "X"},
      {"runs", "N"},
      {"threads", "N"},
      {"external-data", "NAME"},
      {"external-data-threshold", "BYTES"},
      {"suffix", "TEXT"},
  };
  for (CLI::Option* option : app.get_options()) {
    if (option->get_type_size() == 0) continue;  // a flag takes no value
    const std::string key = option->get_lnames().empty() ? option->get_name() : option->get_lnames().front();
    const auto it = kNames.find(key);
    // "UINT:INT in [1 - 256]": the type, without the validator's text.
    const std::string type = option->get_type_name();
    option->option_text(it != kNames.end() ? it->second : type.substr(0, type.find(':')));
  }
}

}  // namespace dwdeconv::cli

namespace dwdeconv::cli {
namespace {

// What an option's value is, for completion: a file, an ONNX model, a directory, one of some words, or a value
// nothing can guess (a number, a shape, a name from the model).
struct ValueKind {
  enum { kNone, kFile, kModel, kDirectory, kWords } kind = kNone;
  std::vector<std::string> words;
};

std::vector<std::string> split_names(const std::string& text) {  // "a, b, c" -> {a, b, c}
  std::vector<std::string> names;
  std::istringstream in(text);
  for (std::string word; std::getline(in, word, ',');) {
    const size_t a = word.find_first_not_of(' '), b = word.find_last_not_of(' ');
    if (a != std::string::npos) names.push_back(word.substr(a, b - a + 1));
  }
  return names;
}

ValueKind value_kind(const std::string& name) {
  ValueKind v;
  if (name == "target") {
    v.kind = ValueKind::kWords;
    for (const auto& t : rewrite::targets()) {
      v.words.push_back(t.name);
      v.words.insert(v.words.end(), t.aliases.begin(), t.aliases.end());
    }
  } else if (name == "runtime") {
    v.kind = ValueKind::kWords;
    v.words = split_names(runtime_names());
    for (const auto& alias : runtime_aliases()) v.words.push_back(alias);
  } else if (name == "forms") {
    v.kind = ValueKind::kWords;
    v.words = split_names(rewrite::form_names());
  } else if (name == "models" || name == "compare") {
    v.kind = ValueKind::kModel;
  } else if (name == "output" || name == "report" || name == "input" || name == "python") {
    v.kind = ValueKind::kFile;
  } else if (name == "out-dir") {
    v.kind = ValueKind::kDirectory;
  }
  return v;
}

// A flag takes no value (CLI11 marks it by expecting none).
bool takes_value(const CLI::Option* option) { return option->get_expected_max() != 0; }

std::string long_name(const CLI::Option* option) {
  return option->get_lnames().empty() ? option->get_name() : option->get_lnames().front();
}

std::string joined(const std::vector<std::string>& words, const char* glue) {
  std::string text;
  for (const auto& w : words) text += (text.empty() ? "" : glue) + w;
  return text;
}

// The option's description for zsh: its first clause, without the characters _arguments gives a meaning.
std::string zsh_description(const std::string& description) {
  std::string first = description.substr(0, description.find_first_of(":;(\n"));
  if (first.size() > 70) first = first.substr(0, first.rfind(' ', 70));
  std::string out;
  for (const char c : first) {
    if (c == '[' || c == ']') {
      out += c == '[' ? '(' : ')';
    } else if (c == '\'') {
      out += "'\\''";
    } else if (c == '\\' || c == '`' || c == '$') {
      continue;
    } else {
      out += c;
    }
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ',')) out.pop_back();
  return out;
}

std::string bash_script(const CLI::App& app) {
  std::vector<std::string> all, files, dirs, models, other_values;
  std::map<std::string, std::vector<std::string>> words;
  for (const CLI::Option* option : app.get_options()) {
    const std::string name = long_name(option);
    if (option->get_lnames().empty() && option->get_snames().empty()) continue;  // the positional MODEL
    std::vector<std::string> spellings;
    for (const auto& l : option->get_lnames()) spellings.push_back("--" + l);
    for (const auto& s : option->get_snames()) spellings.push_back("-" + s);
    all.insert(all.end(), spellings.begin(), spellings.end());
    if (!takes_value(option)) continue;
    const ValueKind kind = value_kind(name);
    auto& list = kind.kind == ValueKind::kFile        ? files
                 : kind.kind == ValueKind::kDirectory ? dirs
                 : kind.kind == ValueKind::kModel     ? models
                                                      : other_values;
    if (kind.kind == ValueKind::kWords) {
      words[joined(spellings, "|")] = kind.words;
    } else {
      list.insert(list.end(), spellings.begin(), spellings.end());
    }
  }
  // Every name goes from compgen into COMPREPLY a line each by mapfile: no word splitting at blanks and no glob
  // expansion of a name such as "*.onnx", as an unquoted $(compgen ...) would do whatever IFS is. compopt -o filenames
  // makes bash quote the file names it inserts; the word typed is dequoted first, never expanded.
  std::string s =
      "# bash completion for dwdeconv-rewrite: `dwdeconv-rewrite --completion bash`, generated from the option table\n"
      "# that --help prints. Installed as share/bash-completion/completions/dwdeconv-rewrite.\n"
      R"SH(
# The text a word as typed stands for: its quotes and backslashes removed, nothing expanded.
_dwdeconv_rewrite_dequote() {
  local in=$1 out='' q='' c i
  for ((i = 0; i < ${#in}; i++)); do
    c=${in:i:1}
    if [[ -n $q ]]; then
      if [[ $c == "$q" ]]; then
        q=''
      elif [[ $q == '"' && $c == '\' ]]; then
        i=$((i + 1))
        out+=${in:i:1}
      else
        out+=$c
      fi
    elif [[ $c == "'" || $c == '"' ]]; then
      q=$c
    elif [[ $c == '\' ]]; then
      i=$((i + 1))
      out+=${in:i:1}
    else
      out+=$c
    fi
  done
  printf '%s' "$out"
}

# COMPREPLY: file names (model: ONNX models and directories; file: any; dir: directories) starting with $2.
_dwdeconv_rewrite_files() {
  local prefix
  prefix=$(_dwdeconv_rewrite_dequote "$2")
  compopt -o filenames 2>/dev/null
  case $1 in
    model) mapfile -t COMPREPLY < <(compgen -o plusdirs -f -X '!*.onnx' -- "$prefix") ;;
    file) mapfile -t COMPREPLY < <(compgen -f -- "$prefix") ;;
    dir) mapfile -t COMPREPLY < <(compgen -d -- "$prefix") ;;
  esac
}

_dwdeconv_rewrite() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=''
  ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
  # --opt=value: bash splits it at the '=' into "--opt" "=" "value".
  if [[ $cur == '=' ]]; then
    cur=''
  elif [[ $prev == '=' ]] && ((COMP_CWORD > 1)); then
    prev=${COMP_WORDS[COMP_CWORD - 2]}
  fi
  COMPREPLY=()
  case $prev in
)SH";
  for (const auto& [spellings, list] : words) {
    s += "    " + spellings + ") mapfile -t COMPREPLY < <(compgen -W '" + joined(list, " ") + "' -- \"$cur\"); return ;;\n";
  }
  if (!models.empty()) s += "    " + joined(models, "|") + ") _dwdeconv_rewrite_files model \"$cur\"; return ;;\n";
  if (!files.empty()) s += "    " + joined(files, "|") + ") _dwdeconv_rewrite_files file \"$cur\"; return ;;\n";
  if (!dirs.empty()) s += "    " + joined(dirs, "|") + ") _dwdeconv_rewrite_files dir \"$cur\"; return ;;\n";
  if (!other_values.empty()) s += "    " + joined(other_values, "|") + ") return ;;\n";
  s += "  esac\n"
       "  if [[ $cur == -* ]]; then\n"
       "    mapfile -t COMPREPLY < <(compgen -W '" +
       joined(all, " ") +
       "' -- \"$cur\")\n"
       "  else\n"
       "    _dwdeconv_rewrite_files model \"$cur\"\n"
       "  fi\n"
       "}\n"
       "complete -F _dwdeconv_rewrite dwdeconv-rewrite\n";
  return s;
}

std::string zsh_script(const CLI::App& app) {
  std::string s =
      "#compdef dwdeconv-rewrite\n"
      "# zsh completion for dwdeconv-rewrite: `dwdeconv-rewrite --completion zsh`, generated from the option table that\n"
      "# --help prints. Installed as share/zsh/vendor-completions/_dwdeconv-rewrite.\n"
      "_arguments -s \\\n";
  for (const CLI::Option* option : app.get_options()) {
    const std::string name = long_name(option);
    const std::string description = zsh_description(option->get_description());
    const ValueKind kind = value_kind(name);
    std::string action;
    switch (kind.kind) {
      case ValueKind::kFile: action = "_files"; break;
      case ValueKind::kModel: action = "_files -g \"*.onnx(-.)\""; break;
      case ValueKind::kDirectory: action = "_files -/"; break;
      case ValueKind::kWords: action = "(" + joined(kind.words, " ") + ")"; break;
      case ValueKind::kNone: action = " "; break;
    }
    std::string value_name = option->get_option_text().empty() ? "VALUE" : option->get_option_text();
    for (char& c : value_name) {
      if (c == ':' || c == '[' || c == ']') c = '_';
    }
    if (option->get_lnames().empty() && option->get_snames().empty()) {
      s += "  '*:" + value_name + ":" + action + "' \\\n";
      continue;
    }
    // Repeatable options (--only, --input, ...) may be given again; the others only once.
    const bool repeatable = option->get_expected_max() > 1 || option->get_multi_option_policy() == CLI::MultiOptionPolicy::TakeAll;
    for (const auto& l : option->get_lnames()) {
      s += std::string("  '") + (repeatable ? "*" : "") + "--" + l + (takes_value(option) ? "=" : "") + "[" + description + "]";
      if (takes_value(option)) s += ":" + value_name + ":" + action;
      s += "' \\\n";
    }
    for (const auto& sn : option->get_snames()) {
      s += std::string("  '") + (repeatable ? "*" : "") + "-" + sn + "[" + description + "]";
      if (takes_value(option)) s += ":" + value_name + ":" + action;
      s += "' \\\n";
    }
  }
  s += "  && return 0\n";
  return s;
}

}  // namespace

std::string completion_script(const CLI::App& app, const std::string& shell) {
  if (shell == "bash") return bash_script(app);
  if (shell == "zsh") return zsh_script(app);
  return "";
}

}  // namespace dwdeconv::cli
