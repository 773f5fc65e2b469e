#include "cli/json.h"

#include <nlohmann/json.hpp>

#include "core/text.h"

namespace dwdeconv::cli {
namespace {

std::string scalar(const Json& value) {
  if (value.is_string()) return Json(core::well_formed_utf8(value.get_ref<const std::string&>())).dump();
  return value.dump();
}

// On one line, with ", " and ": " between the parts.
std::string one_line(const Json& value) {
  if (value.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      out += (first ? "" : ", ") + scalar(Json(key)) + ": " + one_line(item);
      first = false;
    }
    return out + "}";
  }
  if (value.is_array()) {
    std::string out = "[";
    for (size_t k = 0; k < value.size(); ++k) out += (k ? ", " : "") + one_line(value[k]);
    return out + "]";
  }
  return scalar(value);
}

// An object's members one per line; an array of objects one object per line; everything else on one line.
std::string lines(const Json& value, const std::string& indent) {
  const std::string inner = indent + "  ";
  if (value.is_object() && !value.empty()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      out += (first ? "\n" : ",\n") + inner + scalar(Json(key)) + ": " + (item.is_array() ? lines(item, inner) : one_line(item));
      first = false;
    }
    return out + "\n" + indent + "}";
  }
  if (value.is_array() && !value.empty() && value.front().is_object()) {
    std::string out = "[";
    for (size_t k = 0; k < value.size(); ++k) out += (k ? ",\n" : "\n") + inner + one_line(value[k]);
    return out + "\n" + indent + "]";
  }
  return one_line(value);
}

}  // namespace

std::string json_text(const Json& value) { return lines(value, ""); }

}  // namespace dwdeconv::cli
