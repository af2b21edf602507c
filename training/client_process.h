// The process of an i-PI client (an ab initio code started with a user's command line): started
// in its own process group so that stopping it also stops what its shell script started (mpirun,
// its ranks), watched while the server waits on it, its log kept for error messages.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>

#include "ipi_server.h"

namespace otf {

// The command with {host} (Unix: the name; Inet: the host), {port} (Inet; empty for Unix),
// {unix_path} (Unix; empty for Inet) and {address} (IpiAddress::describe()) replaced; one pass,
// so replaced text is not scanned again.
std::string substitute_address(const std::string& command, const IpiAddress& address);

class ClientProcess {
 public:
  // Starts `/bin/sh -c command` (the command is run as given: substitute_address() is the
  // caller's) in a new process group, stdin from /dev/null, stdout and stderr appended to log_path,
  // without the host's MPI job variables (OMPI_*, PMIX_*, PMI_*, ...), (created; empty: /dev/null).
  // With an address, OTF_IPI_MODE (unix|inet), OTF_IPI_HOST, OTF_IPI_PORT and OTF_IPI_UNIX_PATH
  // describe it in the client's environment (filled as substitute_address fills the placeholders).
  // Throws std::runtime_error when it cannot start (log file, /bin/sh).
  ClientProcess(const std::string& command, const std::string& log_path,
                const std::optional<IpiAddress>& address = std::nullopt);
  ~ClientProcess();  // stop()
  ClientProcess(const ClientProcess&) = delete;
  ClientProcess& operator=(const ClientProcess&) = delete;

  // Reaps the process (waitpid WNOHANG) if it has ended.
  bool running();
  // As of the last running() or stop(): "running", "exited with status 3", "killed by signal 9".
  std::string exit_description() const;
  // SIGTERM to the whole group, up to grace_seconds for it to end, then SIGKILL to the group;
  // reaps the shell (and members that are our children: we may be their subreaper). Returns once
  // no member is alive (zombies that init has yet to reap are waited for a moment only).
  // Idempotent; never throws.
  void stop(double grace_seconds = 5.0);
  long pid() const { return static_cast<long>(pid_); }
  // The end of the log, at most max_bytes, starting at a line (for error messages).
  std::string log_tail(std::size_t max_bytes = 2000) const;

 private:
  void reap_group();
  bool group_gone() const;
  bool group_has_live_members() const;
  bool wait_for_group(double seconds);
  void record_shell_status(pid_t result, int status);

  pid_t pid_ = -1;  // also the process group id
  std::string log_path_;
  bool reaped_ = false;
  bool status_known_ = false;  // false when the shell was reaped elsewhere
  int wait_status_ = 0;
  bool stopped_ = false;
};

}  // namespace otf
