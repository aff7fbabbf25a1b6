#include "shim/node/text_diff.h"

#include <gtest/gtest.h>

namespace nvproxy::node {
namespace {

TEST(TextDiff, EqualTextsHaveNoDiff) {
  EXPECT_EQ(unified_diff("a\nb\n", "a\nb\n", "x", "y"), "");
}

TEST(TextDiff, AddedLinesWithContext) {
  std::string old_text, new_text;
  for (int i = 1; i <= 10; ++i) old_text += std::to_string(i) + "\n";
  new_text = old_text;
  new_text.insert(new_text.find("6\n"), "new\n");
  EXPECT_EQ(unified_diff(old_text, new_text, "a", "b"), "--- a\n+++ b\n@@ -3,6 +3,7 @@\n 3\n 4\n 5\n+new\n 6\n 7\n 8\n");
}

TEST(TextDiff, FromNothing) {
  EXPECT_EQ(unified_diff("", "x\ny\n", "/dev/null", "f"), "--- /dev/null\n+++ f\n@@ -0,0 +1,2 @@\n+x\n+y\n");
}

TEST(TextDiff, TwoHunksFarApart) {
  std::string a, b;
  for (int i = 1; i <= 20; ++i) a += std::to_string(i) + "\n";
  b = a;
  b.replace(b.find("2\n"), 2, "two\n");
  b.replace(b.find("19\n"), 3, "nineteen\n");
  const std::string d = unified_diff(a, b, "a", "b");
  EXPECT_NE(d.find("@@ -1,5 +1,5 @@\n 1\n-2\n+two\n 3\n"), std::string::npos) << d;
  EXPECT_NE(d.find("@@ -16,5 +16,5 @@\n 16\n 17\n 18\n-19\n+nineteen\n 20\n"), std::string::npos) << d;
}

}  // namespace
}  // namespace nvproxy::node
