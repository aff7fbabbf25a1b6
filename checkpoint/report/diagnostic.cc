#include "checkpoint/report/diagnostic.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>

#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::checkpoint {

namespace {

constexpr size_t kMaxCommand = 60;  // COMMAND column: enough to recognise the program
constexpr size_t kMaxFdsShown = 4;  // a CUDA process holds ~23 fds per GPU, most on one device: the first few

std::string shorten(const std::string& s, size_t max) {
  return s.size() <= max ? s : s.substr(0, max) + " ...";
}

std::string join_pids(const std::vector<pid_t>& pids) {
  std::string s;
  for (pid_t p : pids) s += (s.empty() ? "" : ", ") + std::to_string(p);
  return s;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> group_by_device(const std::vector<Holder>& holders) {
  // Devices in the order they first appear; per device its fds (numeric order kept) and "map".
  std::vector<std::string> order;
  std::map<std::string, std::pair<std::vector<int>, bool>> by;
  for (const auto& h : holders) {
    auto [it, fresh] = by.try_emplace(h.path);
    if (fresh) order.push_back(h.path);
    if (h.kind == HolderKind::Fd)
      it->second.first.push_back(h.fd);
    else
      it->second.second = true;
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& path : order) {
    const auto& [fds, mapped] = by[path];
    std::string col;
    for (size_t i = 0; i < fds.size() && i < kMaxFdsShown; ++i) col += (col.empty() ? "" : ",") + std::to_string(fds[i]);
    if (fds.size() > kMaxFdsShown) col += " +" + std::to_string(fds.size() - kMaxFdsShown);
    if (mapped) col += col.empty() ? "map" : ",map";
    out.emplace_back(col, path);
  }
  return out;
}

std::string count_processes(size_t n) {
  return std::to_string(n) + (n == 1 ? " process" : " processes");
}

std::string phases_text(const std::vector<PhaseTiming>& phases) {
  std::string s;
  for (const auto& p : phases) s += " " + p.name + "=" + std::to_string(static_cast<long>(p.ms)) + "ms";
  return s;
}

std::string render_text(const Diagnostic& d) {
  std::string out = d.verdict.empty() ? "container \"" + d.container + "\": " + d.reason
                                      : "checkpoint of container \"" + d.container + "\" " + d.verdict + ": " + d.reason;
  out += "\n";
  // Rows first, then column widths (at least the header's, two spaces apart).
  std::vector<std::array<std::string, 6>> rows;
  for (const auto& p : d.processes) {
    for (const auto& g : group_by_device(p.holders))
      rows.push_back({std::to_string(p.pid), p.name, p.cuda_state, g.first, g.second, shorten(p.cmdline, kMaxCommand)});
    if (p.holders.empty())
      rows.push_back({std::to_string(p.pid), p.name, p.cuda_state, "-", "-", shorten(p.cmdline, kMaxCommand)});
  }
  if (!rows.empty()) {
    std::array<std::string, 6> head{"PID", "NAME", "CUDA STATE", "FD", "DEVICE", "COMMAND"};
    // Fixed column widths, wider where a value needs it (two spaces between columns).
    std::array<size_t, 6> w{6, 9, 13, 5, 17, 0};
    for (size_t c = 0; c < 5; ++c)
      for (const auto& r : rows) w[c] = std::max(w[c], r[c].size() + 2);
    auto line = [&](const std::array<std::string, 6>& r) {
      std::string l;
      for (size_t c = 0; c < 5; ++c) l += r[c] + std::string(w[c] - r[c].size(), ' ');
      l += r[5];
      while (!l.empty() && l.back() == ' ') l.pop_back();
      return l + "\n";
    };
    out += line(head);
    for (const auto& r : rows) out += line(r);
  }
  for (const auto& p : d.processes)
    if (!p.hint.empty()) out += "hint: " + p.hint + "\n";
  for (const auto& w : d.warnings) out += "warning: " + w + "\n";
  if (!d.rolled_back.empty())
    out += "rolled back: pid " + join_pids(d.rolled_back) + " CUDA-running again; the container keeps running\n";
  for (const auto& s : d.stuck) out += "STUCK: pid " + std::to_string(s.pid) + " is left " + s.state + ": " + s.detail + "\n";
  return out;
}

nlohmann::json to_json(const Diagnostic& d) {
  using nlohmann::json;
  json procs = json::array();
  for (const auto& p : d.processes) {
    json holders = json::array();
    for (const auto& h : p.holders) {
      if (h.kind == HolderKind::Fd)
        holders.push_back({{"fd", h.fd}, {"path", h.path}});
      else
        holders.push_back({{"mapping", true}, {"path", h.path}});
    }
    json jp = {{"pid", p.pid},       {"name", p.name}, {"cmdline", p.cmdline}, {"cuda_state", p.cuda_state},
               {"holders", holders}, {"hint", p.hint}};
    if (!p.gpus.empty()) jp["gpus"] = p.gpus;
    if (p.inherited_from > 0) jp["inherited"] = {{"from", p.inherited_from}, {"fds", p.inherited_fds}, {"own_fds", p.own_fds}};
    procs.push_back(jp);
  }
  json phases = json::object();
  for (const auto& ph : d.phases) phases[ph.name + "_ms"] = ph.ms;
  json stuck = json::array();
  for (const auto& s : d.stuck) stuck.push_back({{"pid", s.pid}, {"state", s.state}, {"detail", s.detail}});
  json j = {{"container", d.container}, {"verdict", d.verdict},  {"reason", d.reason},           {"processes", procs},
            {"phases", phases},         {"toggled", d.toggled},  {"rolled_back", d.rolled_back}, {"stuck", stuck},
            {"warnings", d.warnings},   {"text", render_text(d)}};
  if (d.details.is_object())
    for (const auto& [k, v] : d.details.items()) j[k] = v;
  return j;
}

void write_json(const Diagnostic& d, const std::filesystem::path& file) {
  write_file_atomic(file, to_json(d).dump(2) + "\n");
}

}  // namespace nvproxy::checkpoint
