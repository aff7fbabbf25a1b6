#include "gpu/cdi_registry.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "common/error.h"

namespace nvproxy::gpu {

namespace fs = std::filesystem;

CdiRegistry CdiRegistry::load(const std::vector<std::string>& dirs, Logger* log) {
  CdiRegistry r;
  for (size_t rank = 0; rank < dirs.size(); ++rank) {
    std::error_code ec;
    if (!fs::is_directory(dirs[rank], ec)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dirs[rank], ec)) {
      auto ext = e.path().extension().string();
      if ((ext == ".yaml" || ext == ".yml" || ext == ".json") && e.is_regular_file(ec)) files.push_back(e.path());
    }
    if (ec) r.errors_.push_back("CDI spec dir " + dirs[rank] + ": " + ec.message());
    std::sort(files.begin(), files.end());  // deterministic order: messages and conflicts repeat
    for (const auto& f : files) {
      try {
        r.specs_.push_back(load_cdi_spec(f));
        r.spec_rank_.push_back(rank);
      } catch (const std::exception& e) {
        r.errors_.emplace_back(e.what());
        if (log) log->warn(std::string("ignoring CDI spec: ") + e.what());
      }
    }
  }
  return r;
}

std::optional<CdiRegistry::Ref> CdiRegistry::lookup(const std::string& kind, const std::string& name) const {
  std::optional<Ref> best;
  for (size_t s = 0; s < specs_.size(); ++s) {
    if (specs_[s].kind != kind) continue;
    for (size_t d = 0; d < specs_[s].devices.size(); ++d) {
      if (specs_[s].devices[d].name != name) continue;
      if (best && spec_rank_[best->spec] == spec_rank_[s]) {
        const auto& a = specs_[best->spec];
        throw Error(Code::FailedPrecondition, "CDI device " + kind + "=" + name + " is defined twice: " + a.file + ": " +
                                                  a.devices[best->device].field + ".name and " + specs_[s].file + ": " +
                                                  specs_[s].devices[d].field + ".name");
      }
      if (!best || spec_rank_[s] > spec_rank_[best->spec]) best = Ref{s, d};
    }
  }
  return best;
}

std::vector<CdiRegistry::Ref> CdiRegistry::expand(const std::string& qualified_name) const {
  auto q = parse_qualified_name(qualified_name);
  if (!q) throw Error(Code::InvalidArgument, "invalid CDI device name \"" + qualified_name + "\" (want vendor.com/class=name)");
  if (auto ref = lookup(q->kind, q->name)) return {*ref};
  std::vector<Ref> out;
  if (q->name == "all") {  // no explicit "all" device: every device of the kind
    std::set<std::string> seen;
    for (const auto& s : specs_)
      if (s.kind == q->kind)
        for (const auto& d : s.devices)
          if (seen.insert(d.name).second)
            if (auto ref = lookup(q->kind, d.name)) out.push_back(*ref);
  }
  if (out.empty()) throw Error(Code::NotFound, "CDI device " + qualified_name + " not found in any spec" + errors_suffix());
  return out;
}

bool CdiRegistry::can_resolve(const std::string& qualified_name) const {
  try {
    return !expand(qualified_name).empty();
  } catch (const Error&) {
    return false;
  }
}

std::string CdiRegistry::errors_suffix() const {
  if (errors_.empty()) return "";
  std::string s = "; specs that failed to load:";
  for (const auto& e : errors_) s += "\n  " + e;
  return s;
}

CdiResolution CdiRegistry::resolve(const std::vector<std::string>& qualified_names) const {
  std::vector<Ref> refs;
  for (const auto& n : qualified_names)
    for (const auto& r : expand(n))
      if (std::none_of(refs.begin(), refs.end(), [&](const Ref& x) { return x.spec == r.spec && x.device == r.device; }))
        refs.push_back(r);
  CdiResolution out;
  std::vector<size_t> spec_done;
  for (const auto& r : refs) {
    if (std::find(spec_done.begin(), spec_done.end(), r.spec) == spec_done.end()) {
      merge_edits(out.edits, specs_[r.spec].edits);
      spec_done.push_back(r.spec);
    }
  }
  for (const auto& r : refs) {
    merge_edits(out.edits, specs_[r.spec].devices[r.device].edits);
    out.devices.push_back(specs_[r.spec].kind + "=" + specs_[r.spec].devices[r.device].name);
  }
  return out;
}

}  // namespace nvproxy::gpu
