// The server ("driver") side of the i-PI socket protocol, through which ab initio codes (CP2K's
// RUN_TYPE DRIVER, Quantum ESPRESSO's pw.x --ipi, ASE's SocketClient) label configurations: we
// listen, the code connects, we send cell and positions and read energy, forces and virial.
// Transport only: atomic units in and out, one connection at a time, every wait bounded.
#pragma once

#include <sys/types.h>

#include <array>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "owned_file.h"

namespace otf {

struct IpiAddress {
  enum class Kind { Unix, Inet };
  Kind kind = Kind::Unix;
  // Unix: the name the client is given (the socket file is /tmp/ipi_<name>, every client's
  // convention). Inet: the host to bind; empty means "127.0.0.1".
  std::string name;
  // Inet only; 0 lets the system pick a free port (IpiServer::address() then has the real one).
  int port = 0;
  std::string unix_path() const;  // "/tmp/ipi_" + name
  std::string describe() const;   // "unix:/tmp/ipi_si" or "inet:127.0.0.1:31415"
};

// The address of walker `walker` (0-based) when several walkers each run their own client
// (docs/design.md §14): unix NAME -> NAME-walkerK, inet port P -> P + K (port 0 stays 0: the
// system picks one per walker). std::invalid_argument, on every walker alike, when the last
// walker's port would pass 65535.
IpiAddress walker_address(const IpiAddress& address, int walker, int walkers);

enum class IpiFailureKind {
  NeverConnected,  // no client connected within the timeout
  ClientExited,    // the client process ended while we waited for it
  Disconnected,    // EOF, connection reset, broken pipe
  Timeout,         // no complete answer within the call's deadline
  ProtocolError,   // unexpected header or impossible lengths
  NonFinite,       // NaN or inf in energy, forces or virial
  WrongAtomCount,  // the reply has another number of atoms than was sent
  NotConverged,    // the client's extra JSON says its SCF did not converge
};
std::string to_string(IpiFailureKind kind);

// A failed exchange; the message names the address and what was expected, for the user.
class IpiFailure : public std::runtime_error {
 public:
  IpiFailure(IpiFailureKind kind, const std::string& message);
  IpiFailureKind kind() const { return kind_; }

 private:
  IpiFailureKind kind_;
};

// Atomic units (Bohr, Hartree), as on the wire.
struct IpiRequest {
  std::array<double, 9> cell{};   // lattice vectors as rows a, b, c (Bohr); must be invertible
  std::vector<double> positions;  // [natoms][3] (Bohr)
};

struct IpiResult {
  double energy = 0.0;             // Hartree
  std::vector<double> forces;      // [natoms][3] (Hartree/Bohr)
  std::array<double, 9> virial{};  // 3x3 row-major (Hartree): sum r_i (x) f_i, LAMMPS' sign
  std::string extra;               // the client's free-form string, trailing NUL bytes removed
};

class IpiServer {
 public:
  // Binds and listens. Unix: the socket file is created with mode 0600 (only this user can
  // connect) before it listens; a stale socket file of this user (a socket nobody accepts on) is
  // replaced; a path over the sockaddr_un limit, a file that is not a socket, another user's
  // socket and a socket in use are refused. Inet: binds host:port with SO_REUSEADDR. Throws
  // std::runtime_error naming the address.
  explicit IpiServer(IpiAddress address);
  // Sends nothing (send_exit_and_close() is the polite end); closes, removes the socket file
  // (also removed at exit() when no destructor runs: OwnedFile).
  ~IpiServer();
  IpiServer(const IpiServer&) = delete;
  IpiServer& operator=(const IpiServer&) = delete;

  // With the real port when port 0 was asked for.
  const IpiAddress& address() const { return address_; }

  // True for an Inet server bound to an address other than loopback (reachable from other hosts).
  bool beyond_loopback() const { return beyond_loopback_; }
  // Where refused peers are reported (may be empty).
  void set_warn(std::function<void(const std::string&)> warn) { warn_ = std::move(warn); }

  // Drops any previous connection, then waits up to timeout_seconds for a client. Every 0.1 s
  // asks client_alive (may be empty): IpiFailure(ClientExited) when it returns false,
  // IpiFailure(NeverConnected) at the timeout. A peer that peer_refusal() refuses (another user;
  // when client_pid >= 0, a process that is not client_pid or its descendant) is disconnected,
  // reported through the warn sink, and the wait goes on.
  void accept_client(double timeout_seconds, const std::function<bool()>& client_alive = {},
                     long client_pid = -1);
  bool connected() const { return client_.valid(); }

  // One energy/forces/virial call; timeout_seconds bounds the whole call (the client's
  // computation included). Throws IpiFailure (the connection is then dropped), or
  // std::logic_error, the connection untouched, for a call that cannot be made: no client
  // connected, or a request that cannot be sent (singular cell, positions not [natoms][3]).
  IpiResult compute(const IpiRequest& request, double timeout_seconds,
                    const std::function<bool()>& client_alive = {});

  // Best effort: sends EXIT if connected (waiting at most a second), closes the connection.
  void send_exit_and_close();
  void drop_client();

 private:
  // A file descriptor that closes itself.
  class Descriptor {
   public:
    Descriptor() = default;
    explicit Descriptor(int fd) : fd_(fd) {}
    ~Descriptor() { reset(); }
    Descriptor(Descriptor&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
    Descriptor& operator=(Descriptor&& other) noexcept;
    Descriptor(const Descriptor&) = delete;
    Descriptor& operator=(const Descriptor&) = delete;
    int get() const { return fd_; }
    bool valid() const { return fd_ >= 0; }
    void reset(int fd = -1);

   private:
    int fd_ = -1;
  };

  IpiResult exchange(const IpiRequest& request, double timeout_seconds,
                     const std::function<bool()>& client_alive);

  IpiAddress address_;
  Descriptor listener_;
  Descriptor client_;
  // The socket file this server created (none for Inet).
  OwnedFile socket_file_;
  bool beyond_loopback_ = false;
  std::function<void(const std::string&)> warn_;
};

}  // namespace otf
