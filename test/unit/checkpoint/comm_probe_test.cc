// The comm probe against fake /proc trees: NCCL shared memory, NCCL unix sockets, TCP links between
// the given processes (and none for independent processes).
#include "checkpoint/shared/comm_probe.h"

#include <gtest/gtest.h>

#include "fake_gpu.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;
using namespace nvproxy::checkpoint::testing;

namespace {

const char* kTcpHeader = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
const char* kUnixHeader = "Num       RefCount Protocol Flags    Type St Inode Path\n";

// One tcp line: local/remote as hex "ADDR:PORT", state hex, inode.
std::string tcp_line(int sl, const std::string& local, const std::string& remote, const std::string& st, unsigned long ino) {
  return "   " + std::to_string(sl) + ": " + local + " " + remote + " " + st +
         " 00000000:00000000 00:00000000 00000000     0        0 " + std::to_string(ino) + " 1 0000000000000000 20 4 30 10 -1\n";
}

struct FakeProc {
  fs::path root = make_temp_dir();
  ~FakeProc() { fs::remove_all(root); }
  // fds: fd -> link target; net: tcp/tcp6/unix tables for this pid's namespace; ns: netns link.
  void add(pid_t pid, std::vector<std::pair<int, std::string>> fds, const std::string& maps, const std::string& tcp,
           const std::string& unix_table = "", const std::string& ns = "net:[4026531840]") {
    fs::path d = root / std::to_string(pid);
    fs::create_directories(d / "fd");
    fs::create_directories(d / "net");
    fs::create_directories(d / "ns");
    spit(d / "maps", maps);
    spit(d / "net" / "tcp", std::string(kTcpHeader) + tcp);
    spit(d / "net" / "tcp6", kTcpHeader);
    spit(d / "net" / "unix", std::string(kUnixHeader) + unix_table);
    fs::create_symlink(ns, d / "ns" / "net");
    for (const auto& [fd, target] : fds) fs::create_symlink(target, d / "fd" / std::to_string(fd));
  }
};

// 127.0.0.1:29511 <-> 127.0.0.1:40000 (rank 1 connected to rank 0's store), plus a listener.
std::string two_rank_tcp() {
  return tcp_line(0, "0100007F:7347", "00000000:0000", "0A", 100) +  // listen 29511 (rank 0)
         tcp_line(1, "0100007F:7347", "0100007F:9C40", "01", 101) +  // rank 0 accepted
         tcp_line(2, "0100007F:9C40", "0100007F:7347", "01", 201) +  // rank 1 client
         tcp_line(3, "0100007F:7347", "0100007F:9C41", "01", 102) +  // rank 0 to itself (own store client)
         tcp_line(4, "0100007F:9C41", "0100007F:7347", "01", 103);
}

}  // namespace

TEST(CommProbe, EndpointsDecode) {
  EXPECT_EQ(tcp_endpoint("0100007F:7347"), "127.0.0.1:29511");
  EXPECT_EQ(tcp_endpoint("0A00000A:01BB"), "10.0.0.10:443");
  EXPECT_EQ(tcp_endpoint("0000000000000000FFFF00000100007F:7347"), "127.0.0.1:29511");  // as seen on the GPU machine
  auto t = parse_tcp_table(std::string(kTcpHeader) + two_rank_tcp());
  EXPECT_EQ(t.size(), 4u);  // the listener is not established
  EXPECT_EQ(t.at(201).first, "0100007F:9C40");
  auto u = parse_unix_table(std::string(kUnixHeader) +
                            "0000000000000000: 00000002 00000000 00010000 0001 01 555 @/tmp/nccl-socket-0-abc@@@@\n"
                            "0000000000000000: 00000003 00000000 00000000 0001 03 556\n");
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u.at(555), "@/tmp/nccl-socket-0-abc");
}

TEST(CommProbe, TcpLinkedRanksFindEachOther) {
  FakeProc p;
  std::string tcp = two_rank_tcp();
  p.add(10, {{0, "/dev/null"}, {5, "socket:[100]"}, {6, "socket:[101]"}, {7, "socket:[102]"}, {8, "socket:[103]"}}, "", tcp);
  p.add(11, {{5, "socket:[201]"}, {6, "/dev/nvidia1"}}, "", tcp);
  ProcCommProbe probe(p.root);
  auto f = probe.scan({10, 11});
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[10].tcp_peers, std::set<pid_t>{11});  // its link to itself does not count
  EXPECT_EQ(f[11].tcp_peers, std::set<pid_t>{10});
  EXPECT_FALSE(f[10].nccl);
  ASSERT_EQ(f[11].evidence.size(), 1u);
  EXPECT_EQ(f[11].evidence[0], "tcp-peer 127.0.0.1:40000 <-> 127.0.0.1:29511 (pid 10)");
  // A connection to a process outside the list is not a link.
  EXPECT_TRUE(probe.scan({11}).empty());
}

TEST(CommProbe, NcclSharedMemoryAndSocketsAreNcclSignals) {
  FakeProc p;
  p.add(20, {{9, "/dev/shm/nccl-Ab12Cd (deleted)"}},
        "7f00-7f10 rw-s 00000000 00:1a 77 /dev/shm/nccl-Ab12Cd (deleted)\n"
        "7f10-7f20 rw-s 00000000 00:1a 78 /dev/shm/nccl-Zz99 (deleted)\n",
        "");
  p.add(21, {{4, "socket:[555]"}}, "", "", "0000000000000000: 00000002 00000000 00010000 0001 01 555 @/tmp/nccl-socket-1-ff\n");
  ProcCommProbe probe(p.root);
  auto f = probe.scan({20, 21});
  ASSERT_EQ(f.size(), 2u);
  EXPECT_TRUE(f[20].nccl);
  EXPECT_EQ(f[20].evidence, (std::vector<std::string>{"nccl-shm /dev/shm/nccl-Ab12Cd", "nccl-shm /dev/shm/nccl-Zz99"}));
  EXPECT_TRUE(f[21].nccl);
  EXPECT_EQ(f[21].evidence, std::vector<std::string>{"nccl-unix @/tmp/nccl-socket-1-ff"});
}

TEST(CommProbe, IndependentProcessesHaveNoFindings) {
  FakeProc p;
  // Like indep2: device fds, driver libraries (libnccl is loaded by torch everywhere), torch's own
  // shared memory and unconnected sockets; no link between the two.
  std::string maps =
      "7f00-7f10 r-xp 00000000 08:01 5 /opt/torch/lib/libnccl.so.2\n"
      "7f10-7f20 rw-s 00000000 00:05 12 /dev/nvidia0\n"
      "7f20-7f30 rw-s 00000000 00:1a 13 /dev/shm/torch_1234_5678\n";
  std::string tcp = tcp_line(0, "0100007F:1F90", "0100007F:C000", "01", 300);  // to something else
  p.add(30, {{3, "/dev/nvidiactl"}, {4, "socket:[300]"}, {5, "pipe:[9]"}}, maps, tcp,
        "0000000000000000: 00000002 00000000 00010000 0001 01 556 /tmp/pymp-x/listener\n");
  p.add(31, {{3, "/dev/nvidiactl"}, {4, "socket:[556]"}}, maps, tcp,
        "0000000000000000: 00000002 00000000 00010000 0001 01 556 /tmp/pymp-x/listener\n");
  ProcCommProbe probe(p.root);
  EXPECT_TRUE(probe.scan({30, 31, 99999 /* gone */}).empty());
}

// Issue 33: NCCL's signals are there in a group of one (single-GPU torchrun); what says there are
// other ranks: a rank number above 0, a segment shared with another process, a TCP link to another
// given process or to another host.
TEST(CommProbe, TellsTheOnlyRankOfAGroupFromOneWithOthers) {
  FakeProc p;
  const std::string sock0 = "0000000000000000: 00000002 00000000 00010000 0001 01 555 @/tmp/nccl-socket-0-ab\n";
  // Alone: rank 0, its store connection to itself (loopback, same process).
  std::string self_tcp =
      tcp_line(0, "0100007F:7347", "0100007F:9C41", "01", 102) + tcp_line(1, "0100007F:9C41", "0100007F:7347", "01", 103);
  p.add(40, {{4, "socket:[555]"}, {5, "socket:[102]"}, {6, "socket:[103]"}}, "", self_tcp, sock0);
  ProcCommProbe probe(p.root);
  auto f = probe.scan({40});
  ASSERT_TRUE(f[40].nccl);
  EXPECT_TRUE(f[40].maybe_alone) << "rank 0 connected to itself only";

  FakeProc q;
  q.add(41, {{4, "socket:[556]"}}, "", "", "0000000000000000: 00000002 00000000 00010000 0001 01 556 @/tmp/nccl-socket-3-ab\n");
  EXPECT_FALSE(ProcCommProbe(q.root).scan({41})[41].maybe_alone) << "rank 3 has others";

  FakeProc r;  // rank 0 with a connection to another host (a rank on another node)
  r.add(42, {{4, "socket:[555]"}, {5, "socket:[300]"}}, "", tcp_line(0, "0A00000A:7347", "0B00000A:9C40", "01", 300), sock0);
  auto g = ProcCommProbe(r.root).scan({42});
  EXPECT_FALSE(g[42].maybe_alone);
  EXPECT_EQ(g[42].remote_tcp, std::vector<std::string>{"10.0.0.11:40000"});

  FakeProc s;  // two processes with one NCCL segment
  s.add(43, {{9, "/dev/shm/nccl-Same"}}, "", "");
  s.add(44, {{9, "/dev/shm/nccl-Same"}}, "", "");
  auto h = ProcCommProbe(s.root).scan({43, 44});
  EXPECT_FALSE(h[43].maybe_alone);
  EXPECT_FALSE(h[44].maybe_alone);
}
