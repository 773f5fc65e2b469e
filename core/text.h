// Text from a model (node, tensor, graph and file names) as the tool shows it in a log line, the plan, a summary or a
// CI annotation: never a terminal control, a line break or ill-formed UTF-8. The C++ side's escaper (the Python
// runtimes' messages use base.shown, the Action's lines action/github_io.py's escape, each for its own output); the
// report's JSON strings escape on top of it where they carry prose, and carry names exactly.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dwdeconv::core {

// `s` with every C0 control byte (tab, CR and LF included) and DEL shown as \xNN, every byte that does not start a
// well-formed UTF-8 sequence as \xNN, a backslash as \\ (so an escape cannot be forged), and the characters that end
// or reorder a line on a screen as \uXXXX: the C1 controls (U+0080-U+009F, NEL and CSI among them), LINE and
// PARAGRAPH SEPARATOR (U+2028, U+2029) and the bidirectional controls (U+061C, U+200E, U+200F, U+202A-U+202E,
// U+2066-U+2069). A name holding a newline stays on its line, so it cannot start a log line (or a
// GitHub workflow command, which is a line starting with "::") of its own.
std::string printable(std::string_view s);

// printable() but for the backslash, which it leaves as it is: for a line whose names printable() has shown already
// (the log sink's safety net over whole lines), where escaping again would double their escapes.
std::string printable_line(std::string_view s);

// The length of the well-formed UTF-8 sequence at s[i] (1 to 4), or 0 when s[i] does not start one: overlong forms,
// UTF-16 surrogates, code points above U+10FFFF and truncated sequences are all ill-formed (Unicode, table 3-7).
size_t utf8_sequence_length(std::string_view s, size_t i);

// `s` with each byte that is not part of a well-formed UTF-8 sequence replaced by U+FFFD, one per byte: valid UTF-8
// whatever bytes a model's names hold (the report, the plan's quoting).
std::string well_formed_utf8(std::string_view s);

// `v` as the float it is (a scale, a gain, a weight), in as few significant digits as read back as that float: a scale
// of 2.0000002 (the float after 2) is not shown as 2, as %g showed it. Whole numbers below 10^9 keep all their integer
// digits (120000, not 1.2e+05); a value no float holds (a weight that overflows float), inf and nan as %g shows them.
std::string shortest_number(double v);

}  // namespace dwdeconv::core
