// The peer check of the i-PI server (training/socket_peer.h): /proc parsing, the ancestry walk,
// the rule, and one real connection of each kind from this process (same user: accepted).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <optional>
#include <string>

#include "socket_peer.h"

namespace otf {
namespace {

sockaddr_storage inet4(const char* address, int port) {
  sockaddr_storage storage{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  v4->sin_family = AF_INET;
  v4->sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, address, &v4->sin_addr);
  return storage;
}

sockaddr_storage inet6(const char* address, int port) {
  sockaddr_storage storage{};
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  v6->sin6_family = AF_INET6;
  v6->sin6_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET6, address, &v6->sin6_addr);
  return storage;
}

TEST(SocketPeer, ParentPidFromStatSurvivesSpacesAndParenthesesInTheName) {
  EXPECT_EQ(parent_pid_from_stat("123 (cp2k.psmp) S 77 123 123 0 -1 4194560"), 77);
  EXPECT_EQ(parent_pid_from_stat("9 (a b) c) (d) R 1 9 9 0"), 1);
  EXPECT_EQ(parent_pid_from_stat("1 (init) S 0 1 1"), 0);
  EXPECT_FALSE(parent_pid_from_stat(""));
  EXPECT_FALSE(parent_pid_from_stat("123 cp2k S 77"));
  EXPECT_FALSE(parent_pid_from_stat("123 (cp2k) S"));
}

TEST(SocketPeer, ParentOfThisProcessIsReadFromProc) {
  EXPECT_EQ(parent_pid_of(::getpid()), static_cast<long>(::getppid()));
  EXPECT_FALSE(parent_pid_of(-5));
}

TEST(SocketPeer, DescendsFromFollowsTheParentChain) {
  // 40 -> 30 -> 20 -> 1; 50 -> 1; 60's parent unknown.
  const std::map<long, long> parents{{40, 30}, {30, 20}, {20, 1}, {50, 1}};
  const auto parent_of = [&](long pid) -> std::optional<long> {
    const auto found = parents.find(pid);
    if (found == parents.end()) return std::nullopt;
    return found->second;
  };
  EXPECT_TRUE(descends_from(40, 40, parent_of));
  EXPECT_TRUE(descends_from(40, 20, parent_of));
  EXPECT_FALSE(descends_from(50, 20, parent_of));
  EXPECT_FALSE(descends_from(60, 20, parent_of));
  EXPECT_FALSE(descends_from(20, 40, parent_of));
  EXPECT_FALSE(descends_from(-1, 20, parent_of));
  // A cycle in bad data ends.
  EXPECT_FALSE(
      descends_from(7, 20, [](long pid) -> std::optional<long> { return pid == 7 ? 8 : 7; }));
  // This test is a descendant of its parent, through /proc.
  EXPECT_TRUE(descends_from(::getpid(), ::getppid(), parent_pid_of));
}

TEST(SocketPeer, ProcNetAddressesAreHostOrderHexWords) {
  const uint32_t one = 1;
  unsigned char first_byte = 0;
  std::memcpy(&first_byte, &one, 1);
  const bool little_endian = first_byte == 1;
  EXPECT_EQ(proc_net_address(inet4("127.0.0.1", 8080)),
            little_endian ? "0100007F:1F90" : "7F000001:1F90");
  EXPECT_EQ(proc_net_address(inet6("::1", 31415)), little_endian
                                                       ? "00000000000000000000000001000000:7AB7"
                                                       : "00000000000000000000000000000001:7AB7");
  sockaddr_storage unix_address{};
  unix_address.ss_family = AF_UNIX;
  EXPECT_EQ(proc_net_address(unix_address), "");
}

TEST(SocketPeer, OwnerIsTheUidOfTheEntryWithThoseEnds) {
  const std::string table =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
      "timeout inode\n"
      "   0: 0100007F:7AB7 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 "
      "1001 1 0000000000000000 100 0 0 10 0\n"
      "   1: 0100007F:7AB7 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 "
      "1002 1 0000000000000000 20 4 30 10 -1\n"
      "   2: 0100007F:D2F0 0100007F:7AB7 01 00000000:00000000 00:00000000 00000000 65534        0 "
      "1003 1 0000000000000000 20 4 30 10 -1\n"
      "garbage line\n";
  EXPECT_EQ(socket_owner_in_table(table, "0100007F:D2F0", "0100007F:7AB7"), 65534);
  EXPECT_EQ(socket_owner_in_table(table, "0100007F:7AB7", "0100007F:D2F0"), 0);
  EXPECT_FALSE(socket_owner_in_table(table, "0100007F:1111", "0100007F:7AB7"));
  EXPECT_FALSE(socket_owner_in_table("", "0100007F:D2F0", "0100007F:7AB7"));
}

TEST(SocketPeer, LoopbackAddresses) {
  EXPECT_TRUE(is_loopback(inet4("127.0.0.1", 1)));
  EXPECT_TRUE(is_loopback(inet4("127.3.2.1", 1)));
  EXPECT_FALSE(is_loopback(inet4("0.0.0.0", 1)));
  EXPECT_FALSE(is_loopback(inet4("10.1.2.3", 1)));
  EXPECT_TRUE(is_loopback(inet6("::1", 1)));
  EXPECT_TRUE(is_loopback(inet6("::ffff:127.0.0.1", 1)));
  EXPECT_FALSE(is_loopback(inet6("::", 1)));
}

TEST(SocketPeer, TheRule) {
  const auto parent_of = [](long pid) -> std::optional<long> {
    if (pid == 300) return 200;  // 300 is a child of the started client 200
    return 1;
  };
  const auto refusal = [&](long pid, long uid, bool loopback, long client_pid) {
    return peer_refusal({pid, uid, "peer"}, loopback, 1000, client_pid, parent_of);
  };
  EXPECT_EQ(refusal(300, 1000, true, -1), "");   // same user, a client started by hand
  EXPECT_EQ(refusal(300, 1000, true, 200), "");  // a descendant of the started client
  EXPECT_EQ(refusal(200, 1000, true, 200), "");  // the started client itself
  EXPECT_NE(refusal(400, 1000, true, 200).find("not the client this run started (pid 200)"),
            std::string::npos);
  EXPECT_NE(refusal(300, 65534, true, -1).find("uid 65534"), std::string::npos);
  EXPECT_NE(refusal(300, 65534, false, -1).find("uid 65534"), std::string::npos);
  // TCP: a local peer whose uid cannot be found is refused; a remote one (when listening beyond
  // loopback was asked for) cannot be checked and is accepted.
  EXPECT_NE(refusal(-1, -1, true, -1).find("cannot be determined"), std::string::npos);
  EXPECT_EQ(refusal(-1, -1, false, 200), "");
  // A TCP peer of the right user: its pid is unknown, so the ancestry is not checked.
  EXPECT_EQ(refusal(-1, 1000, true, 200), "");
  EXPECT_EQ(describe_peer({12, 34, "127.0.0.1:5"}), "127.0.0.1:5 (pid 12, uid 34)");
  EXPECT_EQ(describe_peer({-1, -1, ""}), "a peer (pid unknown, uid unknown)");
}

// One end of a connected pair, as the server's accept() would have it.
struct Pair {
  int server = -1, client = -1;
  ~Pair() {
    if (server >= 0) ::close(server);
    if (client >= 0) ::close(client);
  }
};

TEST(SocketPeer, CredentialsOfARealUnixPeerAreThisProcess) {
  Pair pair;
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  pair.server = fds[0];
  pair.client = fds[1];
  const PeerCredentials peer = peer_credentials(pair.server);
  EXPECT_EQ(peer.pid, static_cast<long>(::getpid()));
  EXPECT_EQ(peer.uid, static_cast<long>(::geteuid()));
}

TEST(SocketPeer, UidOfARealLoopbackTcpPeerIsFoundInProc) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_storage address = inet4("127.0.0.1", 0);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(sockaddr_in)), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  socklen_t length = sizeof address;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  Pair pair;
  pair.client = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(::connect(pair.client, reinterpret_cast<sockaddr*>(&address), sizeof(sockaddr_in)), 0);
  pair.server = ::accept(listener, nullptr, nullptr);
  ::close(listener);
  ASSERT_GE(pair.server, 0);
  const PeerCredentials peer = peer_credentials(pair.server);
  EXPECT_EQ(peer.uid, static_cast<long>(::geteuid()));
  EXPECT_EQ(peer.pid, -1);
  EXPECT_NE(peer.address.find("127.0.0.1:"), std::string::npos) << peer.address;
}

// An IPv4 client of a dual-stack IPv6 listener (inet [::]:port): its socket is found in
// /proc/net/tcp, not tcp6.
TEST(SocketPeer, UidOfAnIpv4PeerOfADualStackListenerIsFound) {
  const int listener = ::socket(AF_INET6, SOCK_STREAM, 0);
  if (listener < 0) GTEST_SKIP() << "no IPv6 here";
  const int off = 0;
  ::setsockopt(listener, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  sockaddr_storage address = inet6("::", 0);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(sockaddr_in6)) != 0) {
    ::close(listener);
    GTEST_SKIP() << "cannot bind [::]";
  }
  ASSERT_EQ(::listen(listener, 1), 0);
  socklen_t length = sizeof address;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  const int port = ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  sockaddr_storage to = inet4("127.0.0.1", port);
  Pair pair;
  pair.client = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(::connect(pair.client, reinterpret_cast<sockaddr*>(&to), sizeof(sockaddr_in)), 0);
  pair.server = ::accept(listener, nullptr, nullptr);
  ::close(listener);
  ASSERT_GE(pair.server, 0);
  const PeerCredentials peer = peer_credentials(pair.server);
  EXPECT_EQ(peer.uid, static_cast<long>(::geteuid())) << peer.address;
}

}  // namespace
}  // namespace otf
