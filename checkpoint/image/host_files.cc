#include "checkpoint/image/host_files.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::checkpoint {

namespace {

struct BindMount {
  std::string destination;  // normalized, no trailing slash ("/" for the root)
  std::string source;
};

std::string normal(const std::string& p) {
  std::string n = std::filesystem::path(p).lexically_normal().string();
  while (n.size() > 1 && n.back() == '/') n.pop_back();
  return n;
}

bool is_bind(const nlohmann::json& m) {
  if (m.value("type", std::string()) == "bind") return true;
  if (auto it = m.find("options"); it != m.end() && it->is_array())
    for (const auto& o : *it)
      if (o.is_string() && (o == "bind" || o == "rbind")) return true;
  return false;
}

// The spec's bind mounts; a malformed entry is the runtime's to refuse, not this list's.
std::vector<BindMount> bind_mounts(const nlohmann::json& spec) {
  std::vector<BindMount> out;
  auto it = spec.find("mounts");
  if (it == spec.end() || !it->is_array()) return out;
  for (const auto& m : *it) {
    if (!m.is_object() || !is_bind(m)) continue;
    auto d = m.find("destination");
    auto s = m.find("source");
    if (d == m.end() || s == m.end() || !d->is_string() || !s->is_string()) continue;
    const std::string dest = d->get<std::string>();
    if (dest.empty() || dest.front() != '/') continue;
    out.push_back({normal(dest), s->get<std::string>()});
  }
  return out;
}

// The most specific mount `path` lies on (the last of equals: a later mount shadows); null if none.
const BindMount* mount_of(const std::vector<BindMount>& mounts, const std::string& path) {
  const BindMount* best = nullptr;
  for (const auto& m : mounts) {
    const bool under = path == m.destination || m.destination == "/" ||
                       (path.size() > m.destination.size() && path.compare(0, m.destination.size(), m.destination) == 0 &&
                        path[m.destination.size()] == '/');
    if (under && (!best || m.destination.size() >= best->destination.size())) best = &m;
  }
  return best;
}

std::string who_held(const HostFile& f) {
  const std::string on = " on the bind mount " + f.source + " -> " + f.mount;
  if (f.pid > 0)
    return "pid " + std::to_string(f.pid) + " (" + f.comm + ") held " + f.path + on +
           (f.writing ? " open for writing" : " open for reading") + " at the checkpoint";
  if (f.path == f.mount) return "the bind mount " + f.source + " -> " + f.mount;
  return f.path + on + " (mapped, a working directory or an executable at the checkpoint)";
}

}  // namespace

nlohmann::json to_json(const HostFile& f) {
  nlohmann::json j{{"pid", f.pid},       {"comm", f.comm},           {"fd", f.fd},           {"path", f.path}, {"mount", f.mount},
                   {"source", f.source}, {"host_path", f.host_path}, {"writing", f.writing}, {"pos", f.pos}};
  if (f.size) j["size"] = *f.size;
  if (f.mode) j["mode"] = *f.mode;
  return j;
}

HostFile host_file_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw Error(Code::InvalidArgument, where + ": not an object");
  HostFile f;
  try {
    f.pid = j.value("pid", 0);
    f.comm = j.value("comm", std::string());
    f.fd = j.value("fd", -1);
    f.path = j.at("path").get<std::string>();
    f.mount = j.value("mount", std::string());
    f.source = j.value("source", std::string());
    f.host_path = j.at("host_path").get<std::string>();
    f.writing = j.value("writing", false);
    f.pos = j.value("pos", std::uint64_t{0});
    if (j.contains("size")) f.size = j.at("size").get<std::uint64_t>();
    if (j.contains("mode")) f.mode = j.at("mode").get<std::uint32_t>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(Code::InvalidArgument, where + ": " + e.what());
  }
  return f;
}

std::vector<HostFile> on_bind_mounts(const std::vector<CriuOpenFile>& open, const nlohmann::json& spec) {
  const auto mounts = bind_mounts(spec);
  std::vector<HostFile> out;
  for (const auto& o : open) {
    if (o.path.empty() || o.path.front() != '/') continue;
    const std::string path = normal(o.path);
    const BindMount* m = mount_of(mounts, path);
    if (!m) continue;
    std::string rest = m->destination == "/" ? path.substr(1) : path.substr(m->destination.size());
    while (!rest.empty() && rest.front() == '/') rest.erase(0, 1);
    const std::string host = rest.empty() ? m->source : (std::filesystem::path(m->source) / rest).string();
    out.push_back({.pid = o.pid,
                   .comm = o.comm,
                   .fd = o.fd,
                   .path = o.path,
                   .mount = m->destination,
                   .source = m->source,
                   .host_path = host,
                   .writing = o.writing(),
                   .pos = o.pos,
                   .size = o.size,
                   .mode = o.mode});
  }
  return out;
}

std::vector<HostFile> bind_mount_sources(const nlohmann::json& spec) {
  std::vector<HostFile> out;
  for (const auto& m : bind_mounts(spec)) {
    HostFile f{.path = m.destination, .mount = m.destination, .source = m.source, .host_path = m.source};
    struct stat st {};
    if (::stat(m.source.c_str(), &st) == 0) f.mode = st.st_mode & S_IFMT;
    out.push_back(std::move(f));
  }
  return out;
}

HostFileCheck check_on_this_node(const std::vector<HostFile>& files) {
  HostFileCheck out;
  for (const auto& f : files) {
    struct stat st {};
    if (::stat(f.host_path.c_str(), &st) != 0) {
      const int err = errno;
      out.refusals.push_back(who_held(f) + "; " +
                             (err == ENOENT || err == ENOTDIR
                                  ? std::string("it is gone on this node")
                                  : "it cannot be looked at on this node: " + std::string(std::strerror(err))) +
                             " (" + f.host_path + ")");
      continue;
    }
    if (f.mode && (*f.mode & S_IFMT) != (st.st_mode & S_IFMT)) {
      out.refusals.push_back(who_held(f) + "; it was " + std::string(file_kind(*f.mode)) + " and is now " +
                             std::string(file_kind(st.st_mode)) + " (" + f.host_path + ")");
      continue;
    }
    if (!S_ISREG(st.st_mode)) continue;
    const auto now = static_cast<std::uint64_t>(st.st_size);
    if (f.size && *f.size != now)
      out.refusals.push_back(who_held(f) + "; it was " + std::to_string(*f.size) + " bytes and is " + std::to_string(now) +
                             " now, and CRIU restores a file opened for reading only at its recorded size (" + f.host_path + ")");
    else if (f.pid > 0 && f.writing && f.pos > now)
      out.warnings.push_back(who_held(f) + "; it is " + std::to_string(now) + " bytes now, shorter than the offset " +
                             std::to_string(f.pos) + " the process held it at (" + f.host_path + ")");
  }
  return out;
}

}  // namespace nvproxy::checkpoint
