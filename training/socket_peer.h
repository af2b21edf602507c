// Who is on the other end of a local socket, and whether the i-PI server accepts them: the i-PI
// protocol has no authentication, so the operating system's account of the peer is the check
// (docs in doc/fix_otf_train.md, "Who may connect"). UNIX sockets: SO_PEERCRED gives the peer's
// pid and uid. Loopback TCP: the uid column of the peer's own entry in /proc/net/tcp(6). A
// client the fix started must be that process or one of its descendants (/proc/<pid>/stat).
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>

namespace otf {

struct PeerCredentials {
  long pid = -1;        // -1: not known (TCP)
  long uid = -1;        // -1: not known (a TCP peer on another host)
  std::string address;  // "127.0.0.1:47722", "a local process" (UNIX)
};
// "127.0.0.1:47722 (pid unknown, uid 1000)", for warnings.
std::string describe_peer(const PeerCredentials& peer);

// The parent pid in the text of /proc/<pid>/stat (field 4, after the parenthesised command name,
// which may itself hold spaces and parentheses); nullopt when the text is not of that form.
std::optional<long> parent_pid_from_stat(const std::string& stat_text);
// The parent of `pid` read from /proc; nullopt when it cannot be read (no such process).
std::optional<long> parent_pid_of(long pid);
// True when `pid` is `ancestor` or descends from it, following parent_of up to pid 1 (at most
// 4096 steps, so a cycle in bad data ends).
bool descends_from(long pid, long ancestor,
                   const std::function<std::optional<long>(long)>& parent_of);

// A socket address as /proc/net/tcp and tcp6 print it: the address as hexadecimal 32-bit words
// in host byte order, a colon, the port in hexadecimal ("0100007F:1F90" for 127.0.0.1:8080 on a
// little-endian host). Empty for other families.
std::string proc_net_address(const sockaddr_storage& address);
// The uid column of the entry of a /proc/net/tcp(6) table whose local and remote addresses are
// the given ones (in proc_net_address form); nullopt when there is none.
std::optional<long> socket_owner_in_table(const std::string& table, const std::string& local,
                                          const std::string& remote);
bool is_loopback(const sockaddr_storage& address);

// What the server knows of the peer of an accepted connection (UNIX: SO_PEERCRED; TCP: /proc).
PeerCredentials peer_credentials(int connected_fd);

// The rule: the peer must run as `our_uid`; when `client_pid` >= 0 (the fix started the client)
// and the peer's pid is known, it must be that process or a descendant. A TCP peer whose uid
// cannot be known is accepted only when it is not on the loopback address (a remote host, which
// the user allowed by asking to listen beyond loopback). Returns why the peer is refused, or an
// empty string when it is accepted.
std::string peer_refusal(const PeerCredentials& peer, bool peer_on_loopback, long our_uid,
                         long client_pid,
                         const std::function<std::optional<long>(long)>& parent_of);

}  // namespace otf
