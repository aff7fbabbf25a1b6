#include "shim/node/text_diff.h"

#include <algorithm>
#include <sstream>
#include <vector>

namespace nvproxy::node {

namespace {

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream is(s);
  for (std::string l; std::getline(is, l);) out.push_back(l);
  return out;
}

struct Op {
  char kind;         // ' ', '-', '+'
  std::size_t a, b;  // line index in old (for ' ' and '-') and new (for ' ' and '+')
};

// Longest common subsequence over lines: config files are a few hundred lines, so the quadratic
// table is small.
std::vector<Op> edit_script(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<unsigned>> lcs(n + 1, std::vector<unsigned>(m + 1, 0));
  for (std::size_t i = n; i-- > 0;)
    for (std::size_t j = m; j-- > 0;) lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  std::vector<Op> ops;
  std::size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j]) {
      ops.push_back({' ', i++, j++});
    } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      ops.push_back({'-', i++, j});  // removals first, as diff(1) prints them
    } else {
      ops.push_back({'+', i, j++});
    }
  }
  return ops;
}

}  // namespace

std::string unified_diff(const std::string& old_text, const std::string& new_text, const std::string& old_name,
                         const std::string& new_name, int context) {
  if (old_text == new_text) return "";
  const auto a = lines_of(old_text), b = lines_of(new_text);
  const auto ops = edit_script(a, b);
  std::ostringstream os;
  os << "--- " << old_name << "\n+++ " << new_name << "\n";
  const std::size_t ctx = static_cast<std::size_t>(std::max(context, 0));
  std::size_t k = 0;
  while (k < ops.size()) {
    if (ops[k].kind == ' ') {
      ++k;
      continue;
    }
    // A hunk: from `ctx` lines before this change to `ctx` lines after the last change that is at
    // most 2*ctx unchanged lines from the previous one.
    std::size_t start = k > ctx ? k - ctx : 0, end = k;
    for (std::size_t run = 0; end < ops.size(); ++end) {
      run = ops[end].kind == ' ' ? run + 1 : 0;
      if (run > 2 * ctx) break;
    }
    std::size_t last_change = end;
    while (last_change > k && ops[last_change - 1].kind == ' ') --last_change;
    end = std::min(ops.size(), last_change + ctx);
    std::size_t old_count = 0, new_count = 0;
    for (std::size_t x = start; x < end; ++x) {
      if (ops[x].kind != '+') ++old_count;
      if (ops[x].kind != '-') ++new_count;
    }
    const std::size_t old_start = ops[start].a + (old_count ? 1 : 0), new_start = ops[start].b + (new_count ? 1 : 0);
    os << "@@ -" << old_start << "," << old_count << " +" << new_start << "," << new_count << " @@\n";
    for (std::size_t x = start; x < end; ++x) os << ops[x].kind << (ops[x].kind == '+' ? b[ops[x].b] : a[ops[x].a]) << "\n";
    k = end;
  }
  return os.str();
}

}  // namespace nvproxy::node
