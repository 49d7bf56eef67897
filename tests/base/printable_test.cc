// PrintableText / PrintableLines: nothing a terminal acts on survives, readable text does.
#include "base/printable.h"

#include <gtest/gtest.h>

#include <string>

namespace spheret {
namespace {

using namespace std::string_literals;

TEST(Printable, EscapesTerminalSequencesAndControls) {
  // A colour, a clear-screen, a window-title OSC and a cursor return that would overwrite a line.
  EXPECT_EQ(PrintableText("\x1b[31mred\x1b[2J\x1b]0;title\x07 ok\rfake"),
            "\\x1b[31mred\\x1b[2J\\x1b]0;title\\x07 ok\\rfake");
  EXPECT_EQ(PrintableText("a\0b\x7f"s), "a\\x00b\\x7f");
  EXPECT_EQ(PrintableText("one\ntwo\tthree"), "one\\x0atwo\\x09three");
  EXPECT_EQ(PrintableLines("one\ntwo\tthree\r\n"), "one\ntwo\tthree\\r\n");
}

TEST(Printable, EscapesC1ControlsAndBytesThatAreNotUtf8) {
  const std::string csi_c1 = "\xc2\x9b", csi_byte = "\x9b";
  EXPECT_EQ(PrintableText(csi_c1 + "31m"), "\\u009b31m");  // CSI as a UTF-8 C1 control
  EXPECT_EQ(PrintableText(csi_byte + "31m"), "\\x9b31m");  // CSI as a lone 8-bit byte
  // An overlong '/', a UTF-16 surrogate, a sequence cut short, a code point above U+10FFFF.
  EXPECT_EQ(PrintableText("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(PrintableText("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(PrintableText("\xe2\x82"), "\\xe2\\x82");
  EXPECT_EQ(PrintableText("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
}

TEST(Printable, KeepsReadableTextAndIsIdempotent) {
  const std::string text = "loss_avg café θ‖α ± 😀 C:\\path \"q\" 'q'";
  EXPECT_EQ(PrintableText(text), text);
  const std::string escaped = PrintableText("\x1b[2J\xc2\x9b\xff\n");
  EXPECT_EQ(PrintableText(escaped), escaped);
  EXPECT_EQ(PrintableText(""), "");
}

}  // namespace
}  // namespace spheret
