// core/text.h: what every name from a model goes through before a log line, the plan or a CI annotation shows it.
#include <catch2/catch.hpp>

#include "core/text.h"

using dwdeconv::core::printable;
using dwdeconv::core::printable_line;
using dwdeconv::core::well_formed_utf8;

TEST_CASE("printable shows control bytes, ill-formed UTF-8, C1 controls, separators and bidi controls escaped", "[core][text]") {
  CHECK(printable("up1") == "up1");
  CHECK(printable("a\nb\rc\td") == "a\\x0ab\\x0dc\\x09d");
  CHECK(printable("\x1b[31m\x7f") == "\\x1b[31m\\x7f");
  CHECK(printable("bad \xff\xc3") == "bad \\xff\\xc3");  // a stray byte and a truncated sequence
  CHECK(printable("\xc2\x9b"
                  "2J") == "\\u009b2J");      // CSI, a C1 control a terminal acts on
  CHECK(printable("\xc2\x85") == "\\u0085");  // NEL
  CHECK(printable("a\xe2\x80\xa8"
                  "b") == "a\\u2028b");  // LINE SEPARATOR
  CHECK(printable("\xe2\x80\xae"
                  "evil") == "\\u202eevil");                                   // RIGHT-TO-LEFT OVERRIDE
  CHECK(printable("\xd8\x9c") == "\\u061c");                                   // ARABIC LETTER MARK
  CHECK(printable("caf\xc3\xa9 \xe6\x97\xa5") == "caf\xc3\xa9 \xe6\x97\xa5");  // well-formed text stays as it is
  // A name's own backslash is doubled, so that a literal "\x0a" in a name cannot pass for an escaped newline.
  CHECK(printable("a\\x0a") == "a\\\\x0a");
  CHECK(printable("a\\x0a") != printable("a\n"));
  // printable_line leaves backslashes, for lines whose names printable has already shown.
  CHECK(printable_line(printable("a\nb\\")) == printable("a\nb\\"));
  CHECK(printable_line("x\ny") == "x\\x0ay");
}

TEST_CASE("well_formed_utf8 keeps well-formed sequences and gives each ill-formed byte its own U+FFFD", "[core][text]") {
  const std::string r = "\xEF\xBF\xBD";
  CHECK(well_formed_utf8("ok \xC3\xA9 \xF0\x9F\x98\x80") == "ok \xC3\xA9 \xF0\x9F\x98\x80");
  CHECK(well_formed_utf8("up\xff\xfe") == "up" + r + r);
  CHECK(well_formed_utf8("over\xC0\xAF") == "over" + r + r);
  CHECK(well_formed_utf8("sur\xED\xA0\x80") == "sur" + r + r + r);
  CHECK(well_formed_utf8("cut\xE2\x82") == "cut" + r + r);
  CHECK(well_formed_utf8(std::string("a\0b", 3)) == std::string("a\0b", 3));
}
