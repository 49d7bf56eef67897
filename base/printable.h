// Text that others wrote (trainer stderr, names and messages a submitter chose) made safe to
// show on a terminal or write to a log: no terminal escape sequence in it reaches the screen.
#pragma once

#include <string>
#include <string_view>

namespace spheret {

// `text` with every byte a terminal could act on written as a visible escape: C0 controls and
// DEL as \xNN (\x1b for ESC; \r as "\r"), C1 controls (U+0080..U+009F) as \u00NN, and bytes that
// are not part of valid UTF-8 as \xNN. Printable ASCII and valid UTF-8 pass unchanged, and so
// does a backslash: escaping an escaped text changes nothing. Newlines and tabs are escaped too
// (one line, e.g. a table cell).
std::string PrintableText(std::string_view text);

// As PrintableText, but newlines and tabs are kept (a log, a stack trace).
std::string PrintableLines(std::string_view text);

}  // namespace spheret
