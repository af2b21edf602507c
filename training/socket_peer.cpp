#include "socket_peer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace otf {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string hex_word(const unsigned char* bytes) {
  uint32_t word = 0;
  std::memcpy(&word, bytes, sizeof word);  // host byte order, as the kernel prints it
  char text[16];
  std::snprintf(text, sizeof text, "%08X", word);
  return text;
}

std::string address_text(const sockaddr_storage& address) {
  // snprintf rather than std::string concatenation: g++ 12 at -O3 reports a false
  // -Wstringop-overflow for the latter here (as in GCC bug 105329).
  char host[INET6_ADDRSTRLEN] = "?";
  char text[INET6_ADDRSTRLEN + 16];
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    ::inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
    std::snprintf(text, sizeof text, "%s:%u", host, static_cast<unsigned>(ntohs(v4->sin_port)));
    return text;
  }
  if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
    std::snprintf(text, sizeof text, "[%s]:%u", host, static_cast<unsigned>(ntohs(v6->sin6_port)));
    return text;
  }
  return "a local process";
}

// An IPv4-mapped IPv6 address (::ffff:a.b.c.d) as the IPv4 address it stands for.
sockaddr_storage unmapped_ipv4(const sockaddr_storage& address) {
  if (address.ss_family != AF_INET6) return address;
  const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
  if (!IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) return address;
  sockaddr_storage plain{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&plain);
  v4->sin_family = AF_INET;
  v4->sin_port = v6->sin6_port;
  std::memcpy(&v4->sin_addr, v6->sin6_addr.s6_addr + 12, 4);
  return plain;
}

}  // namespace

std::string describe_peer(const PeerCredentials& peer) {
  std::string text = peer.address.empty() ? std::string("a peer") : peer.address;
  text += " (pid " + (peer.pid >= 0 ? std::to_string(peer.pid) : std::string("unknown")) +
          ", uid " + (peer.uid >= 0 ? std::to_string(peer.uid) : std::string("unknown")) + ")";
  return text;
}

std::optional<long> parent_pid_from_stat(const std::string& stat_text) {
  // "pid (comm) state ppid ...": comm may hold ") ", so the last ')' ends it.
  const std::size_t close = stat_text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(stat_text.substr(close + 1));
  std::string state;
  long parent = -1;
  if (!(rest >> state >> parent) || state.size() != 1 || parent < 0) return std::nullopt;
  return parent;
}

std::optional<long> parent_pid_of(long pid) {
  if (pid <= 0) return std::nullopt;
  const std::string text = read_text("/proc/" + std::to_string(pid) + "/stat");
  if (text.empty()) return std::nullopt;
  return parent_pid_from_stat(text);
}

bool descends_from(long pid, long ancestor,
                   const std::function<std::optional<long>(long)>& parent_of) {
  if (pid < 0 || ancestor < 0) return false;
  for (int step = 0; step < 4096; ++step) {
    if (pid == ancestor) return true;
    if (pid <= 1) return false;
    const std::optional<long> parent = parent_of(pid);
    if (!parent) return false;
    pid = *parent;
  }
  return false;
}

std::string proc_net_address(const sockaddr_storage& address) {
  char port[8];
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    std::snprintf(port, sizeof port, "%04X", ntohs(v4->sin_port));
    return hex_word(reinterpret_cast<const unsigned char*>(&v4->sin_addr)) + ":" + port;
  }
  if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    std::snprintf(port, sizeof port, "%04X", ntohs(v6->sin6_port));
    std::string text;
    for (int word = 0; word < 4; ++word) text += hex_word(v6->sin6_addr.s6_addr + 4 * word);
    return text + ":" + port;
  }
  return {};
}

std::optional<long> socket_owner_in_table(const std::string& table, const std::string& local,
                                          const std::string& remote) {
  // "sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode"
  std::istringstream lines(table);
  std::string line;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string slot, entry_local, entry_remote, state, queues, timer, retransmits;
    long uid = -1;
    if (!(fields >> slot >> entry_local >> entry_remote >> state >> queues >> timer >>
          retransmits >> uid))
      continue;
    if (entry_local == local && entry_remote == remote) return uid;
  }
  return std::nullopt;
}

bool is_loopback(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    if (IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr) && v6->sin6_addr.s6_addr[12] == 127;
  }
  return address.ss_family == AF_UNIX;
}

PeerCredentials peer_credentials(int connected_fd) {
  PeerCredentials peer;
  sockaddr_storage remote{}, local{};
  socklen_t remote_length = sizeof remote, local_length = sizeof local;
  if (::getpeername(connected_fd, reinterpret_cast<sockaddr*>(&remote), &remote_length) != 0 ||
      ::getsockname(connected_fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0)
    return peer;
  peer.address = address_text(remote);
  if (local.ss_family == AF_UNIX) {
    ucred credentials{};
    socklen_t length = sizeof credentials;
    if (::getsockopt(connected_fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0) {
      peer.pid = credentials.pid;
      peer.uid = static_cast<long>(credentials.uid);
    }
    return peer;
  }
  // The peer's own socket: its local address is our remote one and the other way round. An IPv4
  // client of a dual-stack listener has an IPv4 socket: its entry is in /proc/net/tcp.
  remote = unmapped_ipv4(remote);
  local = unmapped_ipv4(local);
  const char* table = local.ss_family == AF_INET6 ? "/proc/net/tcp6" : "/proc/net/tcp";
  if (const auto uid = socket_owner_in_table(read_text(table), proc_net_address(remote),
                                             proc_net_address(local)))
    peer.uid = *uid;
  return peer;
}

std::string peer_refusal(const PeerCredentials& peer, bool peer_on_loopback, long our_uid,
                         long client_pid,
                         const std::function<std::optional<long>(long)>& parent_of) {
  if (peer.uid < 0) {
    if (!peer_on_loopback) return {};
    return "its user cannot be determined";
  }
  if (peer.uid != our_uid)
    return "it runs as uid " + std::to_string(peer.uid) + ", not as this run's uid " +
           std::to_string(our_uid);
  if (client_pid >= 0 && peer.pid >= 0 && !descends_from(peer.pid, client_pid, parent_of))
    return "it is not the client this run started (pid " + std::to_string(client_pid) +
           ") or one of its descendants";
  return {};
}

}  // namespace otf
