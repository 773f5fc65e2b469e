#include "core/text.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace dwdeconv::core {
namespace {

// The code point of the well-formed sequence of `len` bytes at s[i].
uint32_t code_point(std::string_view s, size_t i, size_t len) {
  const auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(s[i + k])); };
  if (len == 2) return ((b(0) & 0x1f) << 6) | (b(1) & 0x3f);
  if (len == 3) return ((b(0) & 0x0f) << 12) | ((b(1) & 0x3f) << 6) | (b(2) & 0x3f);
  return ((b(0) & 0x07) << 18) | ((b(1) & 0x3f) << 12) | ((b(2) & 0x3f) << 6) | (b(3) & 0x3f);
}

// C1 controls (NEL, CSI, ... a terminal acts on), the line and paragraph separators, and the bidirectional marks,
// embeddings, overrides and isolates (which reorder what a screen shows).
bool breaks_a_line(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
         (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto at = [&s](size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u; };
  const unsigned c = at(i);
  const auto cont = [](unsigned b, unsigned lo = 0x80, unsigned hi = 0xbf) { return b >= lo && b <= hi; };
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) return cont(at(i + 1)) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    const unsigned lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    return cont(at(i + 1), lo, hi) && cont(at(i + 2)) ? 3 : 0;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    const unsigned lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    return cont(at(i + 1), lo, hi) && cont(at(i + 2)) && cont(at(i + 3)) ? 4 : 0;
  }
  return 0;
}

namespace {

std::string escaped(std::string_view s, bool backslash) {
  std::string out;
  out.reserve(s.size());
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t len = utf8_sequence_length(s, i);
    if (backslash && len == 1 && c == '\\') {  // a name's own backslash, so that "\\x0a" cannot pass for an escape
      out += "\\\\";
      ++i;
      continue;
    }
    if (len == 0 || (len == 1 && (c < 0x20 || c == 0x7f))) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
      ++i;
      continue;
    }
    if (len > 1 && breaks_a_line(code_point(s, i, len))) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(code_point(s, i, len)));
      out += buf;
    } else {
      out.append(s.substr(i, len));
    }
    i += len;
  }
  return out;
}

}  // namespace

std::string printable(std::string_view s) { return escaped(s, /*backslash=*/true); }

std::string printable_line(std::string_view s) { return escaped(s, /*backslash=*/false); }

std::string well_formed_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t len = utf8_sequence_length(s, i);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

std::string shortest_number(double v) {
  char buf[40];
  const double magnitude = std::fabs(v);
  if (!(magnitude >= std::numeric_limits<float>::denorm_min() && magnitude <= std::numeric_limits<float>::max())) {
    std::snprintf(buf, sizeof buf, "%g", v);  // inf, nan, 0, and doubles no float holds (a weight that overflows)
    return buf;
  }
  const auto f = static_cast<float>(v);
  int digits = 1;
  for (; digits < 9; ++digits) {  // 9 significant digits read back as any float
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtof(buf, nullptr) == f) break;
  }
  // %g writes 120000 as 1.2e+05 at 2 digits: a whole number below 10^9 is shown with all its integer digits.
  if (magnitude >= 1 && magnitude < 1e9) digits = std::max(digits, static_cast<int>(std::floor(std::log10(magnitude))) + 1);
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

}  // namespace dwdeconv::core
