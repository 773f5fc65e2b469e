// The JSON the tool writes (the --report) is built with nlohmann-json, so escaping and structure are the library's.
// Headers see only the forward declaration; the .cpp files that build JSON include <nlohmann/json.hpp>.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace dwdeconv::cli {

// Keys stay in the order they are added: the report reads top to bottom as the docs list it.
using Json = nlohmann::ordered_json;

// `value` as text a reader can scan: an object's members one per line (indented by two spaces), an array of objects
// (the report's nodes) one object per line, everything else on one line. Strings and numbers are the library's:
// strings keep their UTF-8, each byte that is not part of well-formed UTF-8 (a model's names may hold any
// bytes) becomes U+FFFD, and a non-finite number is null, so the text is always valid JSON.
std::string json_text(const Json& value);

}  // namespace dwdeconv::cli
