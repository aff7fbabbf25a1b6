// A unified diff of two texts, for --dry-run: what a configure command would write, against what
// is there.
#pragma once

#include <string>

namespace nvproxy::node {

// "--- OLD_NAME\n+++ NEW_NAME\n@@ -a,b +c,d @@\n" hunks with `context` lines around each change;
// "" when the texts are equal.
std::string unified_diff(const std::string& old_text, const std::string& new_text, const std::string& old_name,
                         const std::string& new_name, int context = 3);

}  // namespace nvproxy::node
