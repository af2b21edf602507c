// The i-PI server. The wire format follows ASE's ase/calculators/socketio.py (IPIProtocol), which
// talks to i-PI, CP2K and Quantum ESPRESSO: 12-byte space-padded ASCII headers, native byte order,
// int32 counts, float64 values in atomic units.
#include "ipi_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include "scf_convergence.h"
#include "socket_peer.h"

namespace otf {
namespace {

using Clock = std::chrono::steady_clock;

// Waits are cut into slices this long so that a client process that died is noticed.
constexpr int kAliveCheckMilliseconds = 100;
constexpr std::size_t kHeaderBytes = 12;
// What a reply may announce before we stop believing it: beyond these the stream is not i-PI (or
// is corrupt), and reading on would only allocate. Extra strings are JSON of a few kB in practice.
constexpr int32_t kMaxExtraBytes = 64 << 20;

std::string errno_text(int error) { return std::strerror(error); }

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", seconds);
  return text;
}

// A header as a user can read it in a message: trailing padding dropped, other bytes escaped.
std::string printable(const std::string& bytes) {
  std::string text;
  std::size_t end = bytes.size();
  while (end > 0 && (bytes[end - 1] == ' ' || bytes[end - 1] == '\0')) --end;
  for (std::size_t i = 0; i < end; ++i) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      text += static_cast<char>(c);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      text += escaped;
    }
  }
  return text;
}

std::string header_name(const std::string& bytes) {
  std::size_t end = bytes.size();
  while (end > 0 && bytes[end - 1] == ' ') --end;
  return bytes.substr(0, end);
}

// One call's reads and writes on the connected (non-blocking) socket. Every wait is a poll() up to
// the call's deadline, in slices, asking client_alive between them; a short read or write simply
// continues, so no message is ever left half-sent on success.
class Channel {
 public:
  Channel(int fd, std::string address, double timeout_seconds, std::function<bool()> client_alive)
      : fd_(fd),
        address_(std::move(address)),
        timeout_seconds_(timeout_seconds),
        deadline_(Clock::now() +
                  std::chrono::duration_cast<Clock::duration>(
                      std::chrono::duration<double>(std::max(0.0, timeout_seconds)))),
        client_alive_(std::move(client_alive)) {}

  void write(const void* data, std::size_t bytes, const std::string& context) {
    const char* cursor = static_cast<const char*>(data);
    while (bytes > 0) {
      wait(POLLOUT, context);
      // MSG_NOSIGNAL: a client that went away gives EPIPE here, not a SIGPIPE that ends LAMMPS.
      const ssize_t sent = ::send(fd_, cursor, bytes, MSG_NOSIGNAL);
      if (sent < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
        throw failure(IpiFailureKind::Disconnected,
                      "the client disconnected (" + errno_text(errno) + ") while " + context);
      }
      cursor += sent;
      bytes -= static_cast<std::size_t>(sent);
    }
  }

  void read(void* data, std::size_t bytes, const std::string& context) {
    char* cursor = static_cast<char*>(data);
    while (bytes > 0) {
      wait(POLLIN, context);
      const ssize_t got = ::recv(fd_, cursor, bytes, 0);
      if (got == 0)
        throw failure(IpiFailureKind::Disconnected,
                      "the client disconnected (end of stream) while " + context);
      if (got < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
        throw failure(IpiFailureKind::Disconnected,
                      "the client disconnected (" + errno_text(errno) + ") while " + context);
      }
      cursor += got;
      bytes -= static_cast<std::size_t>(got);
    }
  }

  std::string read_header(const std::string& context) {
    std::string header(kHeaderBytes, ' ');
    read(&header[0], kHeaderBytes, context);
    return header;
  }
  int32_t read_int32(const std::string& context) {
    int32_t value = 0;
    read(&value, sizeof value, context);
    return value;
  }
  double read_double(const std::string& context) {
    double value = 0.0;
    read(&value, sizeof value, context);
    return value;
  }
  void read_doubles(std::vector<double>& values, const std::string& context) {
    if (!values.empty()) read(values.data(), values.size() * sizeof(double), context);
  }

  // Waits up to `seconds` (within the deadline) without reading: the pause between STATUS polls.
  void pause(double seconds, const std::string& context) {
    const auto until =
        std::min(deadline_, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(seconds)));
    std::this_thread::sleep_until(until);
    check_deadline(context);
  }

  IpiFailure failure(IpiFailureKind kind, const std::string& what) const {
    return IpiFailure(kind, "i-PI client at " + address_ + ": " + what);
  }

 private:
  void check_deadline(const std::string& context) const {
    if (Clock::now() >= deadline_)
      throw failure(IpiFailureKind::Timeout,
                    "timed out after " + seconds_text(timeout_seconds_) + " while " + context);
  }

  void wait(short events, const std::string& context) {
    for (;;) {
      check_deadline(context);
      const auto remaining =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
      const int slice = static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(
          remaining.count() + 1, 1, kAliveCheckMilliseconds));
      pollfd descriptor{fd_, events, 0};
      const int ready = ::poll(&descriptor, 1, slice);
      // POLLHUP and POLLERR come back as well: the recv or send that follows reports them.
      if (ready > 0) return;
      if (ready < 0 && errno != EINTR)
        throw failure(IpiFailureKind::Disconnected,
                      "poll() failed (" + errno_text(errno) + ") while " + context);
      if (client_alive_ && !client_alive_())
        throw failure(IpiFailureKind::ClientExited, "the client process ended while " + context);
    }
  }

  int fd_;
  std::string address_;
  double timeout_seconds_;
  Clock::time_point deadline_;
  std::function<bool()> client_alive_;
};

void append_bytes(std::vector<char>& buffer, const void* data, std::size_t bytes) {
  // resize + memcpy rather than insert: g++ 12 at -O3 in C++20 reports a false
  // -Wstringop-overflow for insert after reserve (GCC bug 106199).
  const std::size_t offset = buffer.size();
  buffer.resize(offset + bytes);
  std::memcpy(buffer.data() + offset, data, bytes);
}

void append_header(std::vector<char>& buffer, const char* name) {
  char header[kHeaderBytes];
  std::memset(header, ' ', kHeaderBytes);
  std::memcpy(header, name, std::strlen(name));
  append_bytes(buffer, header, kHeaderBytes);
}

void write_header(Channel& channel, const char* name, const std::string& context) {
  std::vector<char> buffer;
  append_header(buffer, name);
  channel.write(buffer.data(), buffer.size(), context);
}

// h has the lattice vectors as columns (i-PI's convention; ASE sends cell.T): h = cell^T.
std::array<double, 9> cell_columns(const std::array<double, 9>& rows) {
  std::array<double, 9> h{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) h[3 * i + j] = rows[3 * j + i];
  return h;
}

std::array<double, 9> inverse(const std::array<double, 9>& m) {
  const double c00 = m[4] * m[8] - m[5] * m[7];
  const double c01 = m[5] * m[6] - m[3] * m[8];
  const double c02 = m[3] * m[7] - m[4] * m[6];
  const double det = m[0] * c00 + m[1] * c01 + m[2] * c02;
  double scale = 1.0;
  for (int r = 0; r < 3; ++r)
    scale *=
        std::sqrt(m[3 * r] * m[3 * r] + m[3 * r + 1] * m[3 * r + 1] + m[3 * r + 2] * m[3 * r + 2]);
  if (!std::isfinite(det) || std::abs(det) <= 1e-12 * scale)
    throw std::invalid_argument(
        "i-PI request: the cell is singular (zero volume); i-PI clients need a periodic cell "
        "with three independent lattice vectors");
  const double s = 1.0 / det;
  return {c00 * s, (m[2] * m[7] - m[1] * m[8]) * s, (m[1] * m[5] - m[2] * m[4]) * s,
          c01 * s, (m[0] * m[8] - m[2] * m[6]) * s, (m[2] * m[3] - m[0] * m[5]) * s,
          c02 * s, (m[1] * m[6] - m[0] * m[7]) * s, (m[0] * m[4] - m[1] * m[3]) * s};
}

const char* const kAxes[3] = {"x", "y", "z"};

}  // namespace

std::string IpiAddress::unix_path() const { return "/tmp/ipi_" + name; }

std::string IpiAddress::describe() const {
  if (kind == Kind::Unix) return "unix:" + unix_path();
  return "inet:" + (name.empty() ? std::string("127.0.0.1") : name) + ":" + std::to_string(port);
}

IpiAddress walker_address(const IpiAddress& address, int walker, int walkers) {
  IpiAddress mine = address;
  if (mine.kind == IpiAddress::Kind::Unix) {
    mine.name += "-walker" + std::to_string(walker);
  } else if (mine.port != 0) {
    const int last = walkers - 1;
    if (mine.port + last > 65535)
      throw std::invalid_argument("walker " + std::to_string(last) + " would listen on port " +
                                  std::to_string(mine.port + last) +
                                  " (each walker listens on the given port plus its number): "
                                  "give a port of at most " + std::to_string(65535 - last) +
                                  ", or 0");
    mine.port += walker;
  }
  return mine;
}

std::string to_string(IpiFailureKind kind) {
  switch (kind) {
    case IpiFailureKind::NeverConnected:
      return "never_connected";
    case IpiFailureKind::ClientExited:
      return "client_exited";
    case IpiFailureKind::Disconnected:
      return "disconnected";
    case IpiFailureKind::Timeout:
      return "timeout";
    case IpiFailureKind::ProtocolError:
      return "protocol_error";
    case IpiFailureKind::NonFinite:
      return "non_finite";
    case IpiFailureKind::WrongAtomCount:
      return "wrong_atom_count";
    case IpiFailureKind::NotConverged:
      return "not_converged";
  }
  return "unknown";
}

IpiFailure::IpiFailure(IpiFailureKind kind, const std::string& message)
    : std::runtime_error(message), kind_(kind) {}

IpiServer::Descriptor& IpiServer::Descriptor::operator=(Descriptor&& other) noexcept {
  if (this != &other) {
    reset(other.fd_);
    other.fd_ = -1;
  }
  return *this;
}

void IpiServer::Descriptor::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

IpiServer::IpiServer(IpiAddress address) : address_(std::move(address)) {
  if (address_.kind == IpiAddress::Kind::Unix) {
    const std::string path = address_.unix_path();
    const std::string where = "i-PI server at unix:" + path;
    sockaddr_un socket_address{};
    socket_address.sun_family = AF_UNIX;
    if (path.size() >= sizeof socket_address.sun_path)
      throw std::runtime_error(where + ": the path is " + std::to_string(path.size()) +
                               " characters, over the limit of " +
                               std::to_string(sizeof socket_address.sun_path - 1) +
                               " for UNIX sockets; choose a shorter name");
    std::memcpy(socket_address.sun_path, path.c_str(), path.size() + 1);
    const auto* generic = reinterpret_cast<const sockaddr*>(&socket_address);

    // A socket file left by a run that died is replaced; one somebody still accepts on is theirs.
    struct stat existing {};
    if (::lstat(path.c_str(), &existing) == 0) {
      if (!S_ISSOCK(existing.st_mode))
        throw std::runtime_error(where +
                                 ": the path exists and is not a socket; remove it or "
                                 "choose another name");
      if (existing.st_uid != ::geteuid())
        throw std::runtime_error(where + ": the socket file belongs to another user (uid " +
                                 std::to_string(existing.st_uid) + "); choose another name");
      Descriptor probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
      if (!probe.valid())
        throw std::runtime_error(where + ": socket() failed: " + errno_text(errno));
      // Non-blocking: a listener with a full backlog answers EAGAIN instead of making us wait.
      if (::connect(probe.get(), generic, sizeof socket_address) == 0 || errno == EAGAIN ||
          errno == EINPROGRESS)
        throw std::runtime_error(where +
                                 ": address in use (another server is listening on it, "
                                 "perhaps another run); choose another name");
      if (errno != ECONNREFUSED && errno != ENOENT)
        throw std::runtime_error(where +
                                 ": cannot check the existing socket file: " + errno_text(errno));
      if (::unlink(path.c_str()) != 0 && errno != ENOENT)
        throw std::runtime_error(where +
                                 ": cannot remove the stale socket file: " + errno_text(errno));
    }

    listener_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!listener_.valid())
      throw std::runtime_error(where + ": socket() failed: " + errno_text(errno));
    // Only this user may connect: Linux creates the file with the socket inode's mode less the
    // umask, so fchmod before bind gives 0600 from the start; the chmod after bind covers other
    // kernels, and nobody can connect before listen() anyway.
    ::fchmod(listener_.get(), S_IRUSR | S_IWUSR);
    if (::bind(listener_.get(), generic, sizeof socket_address) != 0)
      throw std::runtime_error(where + ": bind() failed: " + errno_text(errno));
    socket_file_ = OwnedFile(path);  // removed again if anything below throws
    struct stat created {};
    if (::chmod(path.c_str(), S_IRUSR | S_IWUSR) != 0 || ::lstat(path.c_str(), &created) != 0 ||
        (created.st_mode & (S_IRWXG | S_IRWXO)) != 0)
      throw std::runtime_error(
          where + ": cannot make the socket file private (mode 0600): " + errno_text(errno));
    if (::listen(listener_.get(), 4) != 0)
      throw std::runtime_error(where + ": listen() failed: " + errno_text(errno));
    return;
  }

  if (address_.name.empty()) address_.name = "127.0.0.1";
  const std::string where = "i-PI server at " + address_.describe();
  if (address_.port < 0 || address_.port > 65535)
    throw std::runtime_error(where + ": the port must be in 0..65535 (0: any free port)");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int lookup =
      ::getaddrinfo(address_.name.c_str(), std::to_string(address_.port).c_str(), &hints, &found);
  if (lookup != 0)
    throw std::runtime_error(where + ": cannot resolve the host: " + ::gai_strerror(lookup));
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> candidates(found, ::freeaddrinfo);
  std::string last_error = "no address";
  for (const addrinfo* candidate = found; candidate != nullptr; candidate = candidate->ai_next) {
    Descriptor fd(::socket(candidate->ai_family,
                           candidate->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                           candidate->ai_protocol));
    if (!fd.valid()) {
      last_error = "socket() failed: " + errno_text(errno);
      continue;
    }
    // A port held in TIME_WAIT by a previous run's connection can be bound again at once.
    const int on = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd.get(), candidate->ai_addr, candidate->ai_addrlen) != 0) {
      last_error = "bind() failed: " + errno_text(errno);
      continue;
    }
    if (::listen(fd.get(), 4) != 0) {
      last_error = "listen() failed: " + errno_text(errno);
      continue;
    }
    listener_ = std::move(fd);
    sockaddr_storage bound_address{};
    std::memcpy(&bound_address, candidate->ai_addr,
                std::min<std::size_t>(candidate->ai_addrlen, sizeof bound_address));
    beyond_loopback_ = !is_loopback(bound_address);
    break;
  }
  if (!listener_.valid()) throw std::runtime_error(where + ": " + last_error);
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  if (::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&bound), &length) == 0) {
    if (bound.ss_family == AF_INET)
      address_.port = ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
    else if (bound.ss_family == AF_INET6)
      address_.port = ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port);
  }
}

IpiServer::~IpiServer() {
  client_.reset();
  listener_.reset();
  socket_file_.remove();
}

void IpiServer::accept_client(double timeout_seconds, const std::function<bool()>& client_alive,
                              long client_pid) {
  drop_client();
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(std::max(0.0, timeout_seconds)));
  const std::string where = "i-PI server at " + address_.describe();
  int refused = 0;
  std::string last_refused;
  for (;;) {
    const auto remaining =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    const int slice = static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(
        remaining.count() + 1, 0, kAliveCheckMilliseconds));
    pollfd descriptor{listener_.get(), POLLIN, 0};
    const int ready = ::poll(&descriptor, 1, slice);
    if (ready > 0) {
      const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) {
        Descriptor accepted(fd);
        const PeerCredentials peer = peer_credentials(fd);
        sockaddr_storage remote{};
        socklen_t length = sizeof remote;
        const bool on_loopback =
            ::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &length) != 0 ||
            is_loopback(remote);
        const std::string refusal = peer_refusal(peer, on_loopback, static_cast<long>(::geteuid()),
                                                 client_pid, parent_pid_of);
        if (refusal.empty()) {
          // Messages are small and strictly alternating: Nagle's delay would only add latency.
          if (address_.kind == IpiAddress::Kind::Inet) {
            const int on = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
          }
          client_ = std::move(accepted);
          return;
        }
        // Closed (`accepted`); the wait goes on within the same deadline.
        ++refused;
        last_refused = describe_peer(peer) + ": " + refusal;
        if (warn_)
          warn_(where + ": refused a connection from " + describe_peer(peer) + ": " + refusal +
                "; waiting for the right client");
      } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK &&
                 errno != ECONNABORTED && errno != EPROTO) {
        // (Those: the connection may be gone before we take it; keep waiting for the next.)
        throw IpiFailure(IpiFailureKind::NeverConnected,
                         where + ": accept() failed: " + errno_text(errno));
      }
    } else if (ready < 0 && errno != EINTR) {
      throw IpiFailure(IpiFailureKind::NeverConnected,
                       where + ": poll() failed: " + errno_text(errno));
    }
    if (client_alive && !client_alive())
      throw IpiFailure(IpiFailureKind::ClientExited,
                       where + ": the client process ended before connecting");
    if (Clock::now() >= deadline)
      throw IpiFailure(IpiFailureKind::NeverConnected,
                       where + ": no client connected within " + seconds_text(timeout_seconds) +
                           (refused > 0 ? " (refused " + std::to_string(refused) +
                                              " connection(s), the last from " + last_refused + ")"
                                        : std::string()));
  }
}

IpiResult IpiServer::compute(const IpiRequest& request, double timeout_seconds,
                             const std::function<bool()>& client_alive) {
  if (!connected())
    throw std::logic_error("i-PI server at " + address_.describe() +
                           ": compute() without a connected client (call accept_client first)");
  if (request.positions.size() % 3 != 0 || request.positions.size() / 3 > INT32_MAX)
    throw std::invalid_argument(
        "i-PI request: positions must be [natoms][3] with natoms < 2^31, got " +
        std::to_string(request.positions.size()) + " values");
  inverse(cell_columns(request.cell));  // throws for a singular cell before anything is sent
  try {
    return exchange(request, timeout_seconds, client_alive);
  } catch (...) {
    // Whatever was half-read or half-written leaves the stream at an unknown place.
    drop_client();
    throw;
  }
}

IpiResult IpiServer::exchange(const IpiRequest& request, double timeout_seconds,
                              const std::function<bool()>& client_alive) {
  const std::array<double, 9> h = cell_columns(request.cell);
  const std::array<double, 9> h_inverse = inverse(h);
  const int32_t natoms = static_cast<int32_t>(request.positions.size() / 3);
  Channel channel(client_.get(), address_.describe(), timeout_seconds, client_alive);

  // STATUS until READY. NEEDINIT gets INIT: bead 0 and a one-byte string, as i-PI and ASE send
  // (some clients mistake an empty string for a closed socket). ASE's client asks for INIT again
  // after every call, so this happens at any call, not only the first.
  bool init_sent = false;
  for (;;) {
    write_header(channel, "STATUS", "sending STATUS");
    const std::string status = channel.read_header("waiting for the reply to STATUS");
    const std::string name = header_name(status);
    if (name == "READY") break;
    if (name == "NEEDINIT" && !init_sent) {
      std::vector<char> init;
      append_header(init, "INIT");
      const int32_t bead = 0, length = 1;
      const char init_string = '\0';
      append_bytes(init, &bead, sizeof bead);
      append_bytes(init, &length, sizeof length);
      append_bytes(init, &init_string, 1);
      channel.write(init.data(), init.size(), "sending INIT");
      init_sent = true;
      continue;
    }
    throw channel.failure(IpiFailureKind::ProtocolError,
                          std::string("expected READY") + (init_sent ? "" : " or NEEDINIT") +
                              " in reply to STATUS, got '" + printable(status) + "'");
  }

  std::vector<char> positions;
  positions.reserve(kHeaderBytes + 18 * sizeof(double) + sizeof natoms +
                    request.positions.size() * sizeof(double));
  append_header(positions, "POSDATA");
  append_bytes(positions, h.data(), sizeof h);
  append_bytes(positions, h_inverse.data(), sizeof h_inverse);
  append_bytes(positions, &natoms, sizeof natoms);
  append_bytes(positions, request.positions.data(), request.positions.size() * sizeof(double));
  channel.write(positions.data(), positions.size(), "sending POSDATA");

  // A client answers the STATUS after POSDATA only once it has computed (ASE, CP2K, QE read the
  // next message after the calculation), so this read waits for the whole ab initio step. One
  // still answering READY is asked again after a short pause.
  for (;;) {
    write_header(channel, "STATUS", "sending STATUS after POSDATA");
    const std::string status =
        channel.read_header("waiting for HAVEDATA after POSDATA (the client computing)");
    const std::string name = header_name(status);
    if (name == "HAVEDATA") break;
    if (name == "READY") {
      channel.pause(0.01, "waiting for HAVEDATA after POSDATA (the client computing)");
      continue;
    }
    throw channel.failure(
        IpiFailureKind::ProtocolError,
        "expected HAVEDATA in reply to STATUS after POSDATA, got '" + printable(status) + "'");
  }

  write_header(channel, "GETFORCE", "sending GETFORCE");
  const std::string reply = channel.read_header("waiting for FORCEREADY");
  if (header_name(reply) != "FORCEREADY")
    throw channel.failure(
        IpiFailureKind::ProtocolError,
        "expected FORCEREADY in reply to GETFORCE, got '" + printable(reply) + "'");
  const std::string reading = "reading the FORCEREADY message";
  IpiResult result;
  result.energy = channel.read_double(reading);
  const int32_t reply_atoms = channel.read_int32(reading);
  if (reply_atoms < 0)
    throw channel.failure(IpiFailureKind::ProtocolError,
                          "FORCEREADY announces " + std::to_string(reply_atoms) + " atoms");
  const std::string wrong_count = "returned forces for " + std::to_string(reply_atoms) +
                                  " atoms, " + std::to_string(natoms) + " were sent";
  // A count far off is not worth reading: the connection is dropped anyway.
  if (reply_atoms != natoms && reply_atoms > 2 * static_cast<int64_t>(natoms) + 16)
    throw channel.failure(IpiFailureKind::WrongAtomCount, wrong_count);
  result.forces.assign(3 * static_cast<std::size_t>(reply_atoms), 0.0);
  channel.read_doubles(result.forces, reading);
  std::vector<double> virial_wire(9);
  channel.read_doubles(virial_wire, reading);
  const int32_t extra_bytes = channel.read_int32(reading);
  if (extra_bytes < 0 || extra_bytes > kMaxExtraBytes)
    throw channel.failure(IpiFailureKind::ProtocolError, "FORCEREADY announces " +
                                                             std::to_string(extra_bytes) +
                                                             " bytes of extra data (expected 0.." +
                                                             std::to_string(kMaxExtraBytes) + ")");
  result.extra.assign(static_cast<std::size_t>(extra_bytes), '\0');
  if (extra_bytes > 0) channel.read(&result.extra[0], result.extra.size(), reading);
  // ASE sends a single zero byte for "no extra data".
  while (!result.extra.empty() && result.extra.back() == '\0') result.extra.pop_back();

  // The whole message is read; now judge it.
  if (reply_atoms != natoms) throw channel.failure(IpiFailureKind::WrongAtomCount, wrong_count);
  // The virial travels transposed (column-major): ASE's client sends virial.T and its server
  // reads .T back (socketio.py sendforce / sendrecv_force), as i-PI does for Fortran clients.
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) result.virial[3 * r + c] = virial_wire[3 * c + r];
  // Before the finiteness checks: an SCF that did not converge explains a NaN better than the NaN.
  if (extra_says_not_converged(result.extra))
    throw channel.failure(IpiFailureKind::NotConverged,
                          "the client reports that its calculation did not converge (extra: " +
                              printable(result.extra.substr(0, 200)) + ")");
  if (!std::isfinite(result.energy))
    throw channel.failure(IpiFailureKind::NonFinite,
                          "the energy is " + std::to_string(result.energy));
  for (std::size_t i = 0; i < result.forces.size(); ++i)
    if (!std::isfinite(result.forces[i]))
      throw channel.failure(IpiFailureKind::NonFinite,
                            "the force on atom " + std::to_string(i / 3) + " (" + kAxes[i % 3] +
                                ", 0-based) is " + std::to_string(result.forces[i]));
  for (int k = 0; k < 9; ++k)
    if (!std::isfinite(result.virial[k]))
      throw channel.failure(IpiFailureKind::NonFinite, std::string("the virial component ") +
                                                           kAxes[k / 3] + kAxes[k % 3] + " is " +
                                                           std::to_string(result.virial[k]));
  return result;
}

void IpiServer::send_exit_and_close() {
  if (connected()) {
    try {
      Channel channel(client_.get(), address_.describe(), 1.0, {});
      write_header(channel, "EXIT", "sending EXIT");
    } catch (const IpiFailure&) {
      // The client is gone already: nothing left to tell it.
    }
  }
  drop_client();
}

void IpiServer::drop_client() { client_.reset(); }

}  // namespace otf
