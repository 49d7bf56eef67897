// Python's str methods and the harness's text clean-ups as spheret re-states them for zero-shot
// scoring. Expected values are Python 3.11's own (printed by the interpreter when the test was
// written); tests/worker/lm/lm_eval_parity_test.py checks the whole path against
// lm-evaluation-harness itself.
#include "worker/text/python_text.h"

#include <gtest/gtest.h>

namespace spheret::eval {
namespace {

TEST(PythonTextTest, StripLowerCapitalizeAsPython) {
  EXPECT_EQ(PythonStrip("\u00a0\u2009 a b \u3000\n"), "a b");
  EXPECT_EQ(PythonStrip("\x1c"
                        "x"
                        "\xC2\x85"),
            "x");  // Python counts U+001C and U+0085 as space
  EXPECT_EQ(PythonLStrip("\n  x "), "x ");
  // 'ΣΟΦΙΑ ΟΔΥΣΣΕΥΣ'.lower(): final sigma at the end of a word only.
  EXPECT_EQ(PythonLower("ΣΟΦΙΑ ΟΔΥΣΣΕΥΣ."), "σοφια οδυσσευς.");
  EXPECT_EQ(PythonLower("İ"), "i\u0307");
  // 'ǆungla ΣΑΣ. Ok'.capitalize() == 'ǅungla σας. ok'
  EXPECT_EQ(PythonCapitalize("ǆungla ΣΑΣ. Ok"), "ǅungla σας. ok");
  EXPECT_EQ(PythonCapitalize("ﬁrst Door"), "First door");
  EXPECT_EQ(PythonLength("e\u0301🙂"), 3);
  EXPECT_EQ(WhitespaceSplitCount(" a  b\u00a0c "), 5);  // ['', 'a', 'b', 'c', '']
  EXPECT_EQ(SplitOnSpace("a  b").size(), 3u);
}

TEST(PythonTextTest, HarnessCleanUps) {
  EXPECT_EQ(HellaswagPreprocess("  Ski [title] jumping: a [step] b [no\nend] c  "),
            "Ski. jumping: a b [no\nend] c");
  EXPECT_EQ(WikitextDetokenize(" = = Sub = = \n 1 @,@ 000 @-@ 2 ( a b ) \" q \" he 's / ' 7 /"),
            " == Sub ==\n1,000-2 (a b) \"q\" he's /' 7 /");
  EXPECT_EQ(WikitextDetokenize("a /' 7/ b"), "a /'[0-9]/ b");  // the harness's literal class
}

}  // namespace
}  // namespace spheret::eval
