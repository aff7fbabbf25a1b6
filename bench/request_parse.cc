// Issue 63: what parsing a GPU request costs per size, before and after. "before" is a copy of the
// dedupe the shim had until issue 63 (a linear search per entry: quadratic), kept here only, run
// side by side with the product's parse_request (a hash set: linear) on the same input in one run.
// The product's bounds (RequestLimits) are lifted here so that sizes beyond them can be measured.
//   request_parse [--sizes 1000,10000,100000] [--reps 3]
// Prints a markdown table: entries, input bytes, before ms, after ms, before / after.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/number.h"
#include "gpu/cdi_spec.h"
#include "gpu/device_request.h"

using nlohmann::json;
using namespace nvproxy;

namespace {

// ---- before (as in gpu/device_request.cc until issue 63; bench only) ----
std::vector<std::string> old_split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(start, end - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
    start = end + 1;
  }
  return out;
}

void old_add_unique(std::vector<std::string>& v, const std::string& s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

// The old parse of both shapes: env entries (indices) and CDI annotations (names).
std::size_t old_parse(const json& spec) {
  std::vector<std::string> visible, cdi;
  for (const auto& e : spec["process"]["env"]) {
    const std::string& s = e.get_ref<const std::string&>();
    if (s.rfind("NVIDIA_VISIBLE_DEVICES=", 0) != 0) continue;
    for (const auto& item : old_split_list(s.substr(23))) old_add_unique(visible, item);
  }
  if (spec.contains("annotations"))
    for (const auto& [key, val] : spec["annotations"].items()) {
      if (!gpu::is_cdi_annotation(key)) continue;
      for (const auto& name : old_split_list(val.get<std::string>())) {
        if (!gpu::parse_qualified_name(name)) std::abort();
        old_add_unique(cdi, name);
      }
    }
  return visible.size() + cdi.size();
}

json env_spec(std::size_t n, std::size_t& bytes) {
  std::string v;
  for (std::size_t i = 0; i < n; ++i) v += (i ? "," : "") + std::to_string(i);
  bytes = v.size();
  return {{"process", {{"env", json::array({"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=" + v})}}}};
}

json annotation_spec(std::size_t n, std::size_t& bytes) {
  json ann = json::object();
  bytes = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::string k = "cdi.k8s.io/a" + std::to_string(i), v = "vendor.com/gpu=d" + std::to_string(i);
    bytes += k.size() + v.size();
    ann[k] = v;
  }
  return {{"process", {{"env", json::array({"PATH=/bin"})}}}, {"annotations", ann}};
}

template <class Fn>
double median_ms(int reps, Fn fn) {
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> sizes{1000, 10000, 100000};
  int reps = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sizes" && i + 1 < argc) {
      sizes.clear();
      std::string s = argv[++i];
      std::size_t start = 0;
      while (start <= s.size()) {
        std::size_t end = s.find(',', start);
        if (end == std::string::npos) end = s.size();
        sizes.push_back(parse_number_or_throw<std::size_t>(std::string_view(s).substr(start, end - start), "--sizes"));
        start = end + 1;
      }
    } else if (a == "--reps" && i + 1 < argc) {
      reps = parse_number_or_throw<int>(argv[++i], "--reps");
    } else {
      std::fprintf(stderr, "usage: request_parse [--sizes N,N,...] [--reps R]\n");
      return 2;
    }
  }
  const gpu::RequestLimits none{.max_value_bytes = SIZE_MAX, .max_cdi_annotations = SIZE_MAX, .max_devices = SIZE_MAX};
  std::printf("| shape | entries | input bytes | before ms (linear search) | after ms (hash set) | before / after |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
  for (const char* shape : {"NVIDIA_VISIBLE_DEVICES", "CDI annotations"}) {
    for (std::size_t n : sizes) {
      std::size_t bytes = 0;
      const json spec = std::strcmp(shape, "CDI annotations") == 0 ? annotation_spec(n, bytes) : env_spec(n, bytes);
      std::size_t before_n = 0, after_n = 0;
      const double before = median_ms(reps, [&] { before_n = old_parse(spec); });
      const double after = median_ms(reps, [&] {
        const auto r = gpu::parse_request(spec, none);
        after_n = r.visible.size() + r.cdi_names.size();
      });
      if (before_n != n || after_n != n) {
        std::fprintf(stderr, "%s %zu: before found %zu, after %zu\n", shape, n, before_n, after_n);
        return 1;
      }
      std::printf("| %s | %zu | %zu | %.2f | %.2f | %.0fx |\n", shape, n, bytes, before, after, before / after);
      std::fflush(stdout);
    }
  }
  return 0;
}
