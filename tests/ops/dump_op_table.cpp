// Prints the op table as JSON for tests/ops/check_op_table.py: per op, its versions, the first and last implemented
// (0: every later one), and the implemented attributes with their values and the refused ones.
#include <iostream>

#include "ops/ops.h"

namespace {

std::string quoted(const std::string& s) { return "\"" + s + "\""; }  // op and attribute names need no escaping

}  // namespace

int main() {
  using namespace dwdeconv;
  std::cout << "{\"known_through\": " << ops::kKnownThroughOpset << ", \"ops\": [";
  bool first_op = true;
  for (const auto& spec : ops::op_table()) {
    std::cout << (first_op ? "\n" : ",\n") << "  {\"op\": " << quoted(spec.op_type) << ", \"versions\": [";
    first_op = false;
    for (size_t k = 0; k < spec.versions.size(); ++k) std::cout << (k ? ", " : "") << spec.versions[k];
    std::cout << "], \"first_implemented\": " << spec.first_implemented << ", \"last_implemented\": " << spec.last_implemented
              << ", \"attributes\": {";
    for (size_t k = 0; k < spec.attributes.size(); ++k) {
      const auto& a = spec.attributes[k];
      std::cout << (k ? ", " : "") << quoted(a.name) << ": [";
      for (size_t v = 0; v < a.strings.size(); ++v) std::cout << (v ? ", " : "") << quoted(a.strings[v]);
      for (size_t v = 0; v < a.ints.size(); ++v) std::cout << (v ? ", " : "") << a.ints[v];
      std::cout << "]";
    }
    std::cout << "}, \"refused\": [";
    for (size_t k = 0; k < spec.refused.size(); ++k) std::cout << (k ? ", " : "") << quoted(spec.refused[k]);
    std::cout << "]}";
  }
  std::cout << "\n]}\n";
  return 0;
}
