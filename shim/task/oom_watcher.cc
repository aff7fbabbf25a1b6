#include "shim/task/oom_watcher.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <vector>

#include "cgroup/files.h"
#include "cgroup/paths.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/log.h"

namespace nvproxy::shim {

namespace {

struct Counters {
  uint64_t oom = 0, oom_kill = 0;
};

// memory.events: "oom N" and (kernels >= 4.13) "oom_kill N"; nullopt while the file is half written.
std::optional<Counters> read_counters(const std::filesystem::path& file) {
  std::map<std::string, uint64_t> kv;
  try {
    kv = cgroup::read_cgroup_kv(file);
  } catch (const Error&) {
    return std::nullopt;
  }
  auto oom = kv.find("oom");
  if (oom == kv.end()) return std::nullopt;
  return Counters{.oom = oom->second, .oom_kill = kv.count("oom_kill") ? kv.at("oom_kill") : 0};
}

// The init's memory cgroup path (cgroup/paths.h): the unified one on a v2 host, else the v1
// memory controller's.
std::string cgroup_path(const std::filesystem::path& cgroup_file, bool unified) {
  cgroup::CgroupPaths paths = cgroup::parse_proc_cgroup(read_file(cgroup_file));
  if (unified && paths.unified) return *paths.unified;
  if (auto m = paths.v1.find("memory"); !unified && m != paths.v1.end()) return m->second.path;
  throw Error(Code::NotFound, std::string("no ") + (unified ? "unified" : "memory") + " cgroup in " + cgroup_file.string());
}

}  // namespace

OomWatcher::OomWatcher(Logger& log, std::function<void(const std::string&)> on_oom, Paths paths)
    : log_(log), on_oom_(std::move(on_oom)), paths_(std::move(paths)) {
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) throw sys_error("epoll for the OOM watcher");
  stop_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_) throw sys_error("eventfd for the OOM watcher");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, stop_.get(), &ev) < 0) throw sys_error("epoll_ctl for the OOM watcher");
  thread_ = std::thread([this] { run(); });
}

OomWatcher::~OomWatcher() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(stop_.get(), &one, sizeof one);
  thread_.join();
}

OomWatcher::Entry OomWatcher::open_entry(const std::string& id, pid_t pid) const {
  Entry e;
  e.id = id;
  e.v2 = std::filesystem::exists(paths_.cgroup_root / "cgroup.controllers");
  std::string rel = cgroup_path(paths_.proc / std::to_string(pid) / "cgroup", e.v2);
  // A process that has already exited (a zombie) reads as the root cgroup: watching that would
  // report every OOM of the host as this container's.
  if (rel == "/")
    throw Error(Code::NotFound, "pid " + std::to_string(pid) + " of container \"" + id + "\" has exited; its cgroup reads /");
  e.dir = join_within(e.v2 ? paths_.cgroup_root : paths_.cgroup_root / "memory", rel);
  if (e.v2) {
    auto events = e.dir / "memory.events";
    e.fd.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    if (!e.fd) throw sys_error("inotify for " + events.string());
    if (::inotify_add_watch(e.fd.get(), events.c_str(), IN_MODIFY | IN_DELETE_SELF) < 0)
      throw sys_error("watch " + events.string());
    auto c = read_counters(events);
    if (!c) throw Error(Code::Internal, "no oom counter in " + events.string());
    e.oom = c->oom;
    e.oom_kill = c->oom_kill;
    return e;
  }
  // v1: "<eventfd> <fd of memory.oom_control>" into cgroup.event_control. The kernel keeps its own
  // reference to memory.oom_control; closing our eventfd unregisters.
  e.fd.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!e.fd) throw sys_error("eventfd for " + e.dir.string());
  auto oc_path = e.dir / "memory.oom_control", ec_path = e.dir / "cgroup.event_control";
  UniqueFd oc(::open(oc_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!oc) throw sys_error("open " + oc_path.string());
  UniqueFd ec(::open(ec_path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!ec) throw sys_error("open " + ec_path.string());
  std::string line = std::to_string(e.fd.get()) + " " + std::to_string(oc.get());
  if (::write(ec.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    throw sys_error("write " + ec_path.string());
  return e;
}

void OomWatcher::add(const std::string& container_id, pid_t init_pid) {
  try {
    Entry e = open_entry(container_id, init_pid);
    std::string what =
        "watching container \"" + container_id + "\" for OOM in " + e.dir.string() + (e.v2 ? " (cgroup v2)" : " (cgroup v1)");
    std::lock_guard lk(mu_);
    drop_locked(container_id);
    uint64_t token = next_token_++;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = token;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, e.fd.get(), &ev) < 0) throw sys_error("epoll_ctl for " + e.dir.string());
    entries_.emplace(token, std::move(e));
    log_.debug(what);
  } catch (const std::exception& ex) {
    log_.warn("OOM events of container \"" + container_id + "\" (pid " + std::to_string(init_pid) +
              ") are not watched: " + ex.what());
  }
}

void OomWatcher::remove(const std::string& container_id) {
  {
    std::lock_guard lk(mu_);
    drop_locked(container_id);
  }
  // Wait out a delivery in progress; from on_oom itself that would be waiting on ourselves.
  if (delivering_.load() != std::this_thread::get_id()) {
    std::lock_guard d(deliver_mu_);
  }
}

// Explicit EPOLL_CTL_DEL: a close alone leaves the registration while a forked child (a runtime
// between fork and exec) still holds the file, and a readable eventfd would then spin epoll.
void OomWatcher::drop_locked(const std::string& container_id) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.id != container_id) {
      ++it;
      continue;
    }
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second.fd.get(), nullptr);
    it = entries_.erase(it);
  }
}

size_t OomWatcher::watched() {
  std::lock_guard lk(mu_);
  return entries_.size();
}

OomWatcher::Seen OomWatcher::check(Entry& e) const {
  if (!e.v2) {
    uint64_t count;
    if (::read(e.fd.get(), &count, sizeof count) != sizeof count) return Seen::Nothing;
    // The kernel also signals when the cgroup is removed: not an OOM.
    return ::access((e.dir / "memory.oom_control").c_str(), F_OK) == 0 ? Seen::Oom : Seen::Gone;
  }
  alignas(inotify_event) char buf[4096];
  bool gone = false;
  for (ssize_t n; (n = ::read(e.fd.get(), buf, sizeof buf)) > 0;) {
    for (ssize_t off = 0; off < n;) {
      auto* ev = reinterpret_cast<inotify_event*>(buf + off);
      if (ev->mask & (IN_IGNORED | IN_DELETE_SELF)) gone = true;
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
    }
  }
  if (gone) return Seen::Gone;
  std::optional<Counters> c;
  try {
    c = read_counters(e.dir / "memory.events");
  } catch (const Error&) {
    return Seen::Gone;
  }
  if (!c) return Seen::Nothing;
  bool grew = c->oom > e.oom || c->oom_kill > e.oom_kill;
  e.oom = std::max(e.oom, c->oom);
  e.oom_kill = std::max(e.oom_kill, c->oom_kill);
  return grew ? Seen::Oom : Seen::Nothing;
}

bool OomWatcher::examine_locked(std::map<uint64_t, Entry>::iterator it) {
  Seen s = check(it->second);
  if (s == Seen::Gone) {
    log_.debug("container \"" + it->second.id + "\": memory cgroup " + it->second.dir.string() + " is gone, OOM watch ends");
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second.fd.get(), nullptr);
    entries_.erase(it);
  }
  return s == Seen::Oom;
}

void OomWatcher::deliver_locked(const std::vector<std::pair<uint64_t, std::string>>& fired) {
  delivering_ = std::this_thread::get_id();
  struct Done {
    std::atomic<std::thread::id>& who;
    ~Done() { who = std::thread::id{}; }
  } done{delivering_};
  for (const auto& [token, id] : fired) {
    {
      std::lock_guard lk(mu_);
      if (!entries_.count(token)) continue;  // remove() ran meanwhile
    }
    log_.info("container \"" + id + "\": out of memory event");
    try {
      on_oom_(id);
    } catch (const std::exception& ex) {
      log_.error("container \"" + id + "\": OOM handler failed: " + ex.what());
    }
  }
}

void OomWatcher::poll(const std::string& container_id) {
  // Under deliver_mu_: a signal the watcher's thread has taken is delivered before this returns.
  std::lock_guard d(deliver_mu_);
  std::vector<std::pair<uint64_t, std::string>> fired;
  {
    std::lock_guard lk(mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      auto next = std::next(it);
      const uint64_t token = it->first;
      if (it->second.id == container_id && examine_locked(it)) fired.emplace_back(token, container_id);
      it = next;
    }
  }
  deliver_locked(fired);
}

void OomWatcher::run() {
  epoll_event evs[16];
  while (true) {
    int n = ::epoll_wait(epoll_.get(), evs, 16, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      log_.error(sys_error("OOM watcher: epoll_wait").what());
      return;
    }
    std::lock_guard d(deliver_mu_);  // from taking a signal until it is delivered (see poll)
    std::vector<std::pair<uint64_t, std::string>> fired;
    {
      std::lock_guard lk(mu_);
      for (int i = 0; i < n; ++i) {
        uint64_t token = evs[i].data.u64;
        if (token == 0) return;  // stop_
        auto it = entries_.find(token);
        if (it == entries_.end()) continue;  // removed after epoll_wait returned
        std::string id = it->second.id;
        if (examine_locked(it)) fired.emplace_back(token, std::move(id));
      }
    }
    deliver_locked(fired);
  }
}

}  // namespace nvproxy::shim
