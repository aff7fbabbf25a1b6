#include "checkpoint/process/process_list.h"

#include <algorithm>

namespace nvproxy::checkpoint {

std::vector<pid_t> FunctionLister::list() {
  std::vector<pid_t> v = fn_();
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

}  // namespace nvproxy::checkpoint
