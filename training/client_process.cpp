// The i-PI client's process. Started with posix_spawn rather than fork: the parent is an MPI
// program, where fork() copies (and some MPI libraries warn about) registered memory, and where
// nothing but async-signal-safe calls may run between fork and exec; glibc's posix_spawn does the
// setpgid, signal resets and redirections in a vfork-like child and reports a failed exec as an
// error code.
#include "client_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

extern char** environ;

namespace otf {
namespace {

using Clock = std::chrono::steady_clock;

class LiveGroups;
LiveGroups& live_groups();

// The process groups of clients not stopped yet. A host program that ends through exit() without
// destroying its objects (LAMMPS 2021 does so after an error) would leave them running: an
// at-exit handler ends them. (A host killed outright closes its sockets, and a connected client
// ends at that end of file.)
class LiveGroups {
 public:
  void add(pid_t group) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!registered_) registered_ = std::atexit([] { live_groups().end_all(); }) == 0;
    groups_.insert(group);
  }
  void remove(pid_t group) {
    std::lock_guard<std::mutex> lock(mutex_);
    groups_.erase(group);
  }
  void end_all() {
    std::set<pid_t> groups;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      groups.swap(groups_);
    }
    for (const pid_t group : groups) ::kill(-group, SIGTERM);
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    for (const pid_t group : groups) {
      while (::kill(-group, 0) == 0 && Clock::now() < deadline) {
        while (::waitpid(-group, nullptr, WNOHANG) > 0) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      ::kill(-group, SIGKILL);
    }
  }

 private:
  std::mutex mutex_;
  std::set<pid_t> groups_;
  bool registered_ = false;
};

// Constructed before the at-exit handler is registered, so destroyed after it has run.
LiveGroups& live_groups() {
  static LiveGroups groups;
  return groups;
}

struct AddressFields {
  std::string mode, host, port, unix_path;
};

// Unix addresses have no port and Inet ones no socket file: those fields are empty.
AddressFields address_fields(const IpiAddress& address) {
  if (address.kind == IpiAddress::Kind::Unix)
    return {"unix", address.name, "", address.unix_path()};
  return {"inet", address.name.empty() ? std::string("127.0.0.1") : address.name,
          std::to_string(address.port), ""};
}

class SpawnFileActions {
 public:
  SpawnFileActions() { posix_spawn_file_actions_init(&actions_); }
  ~SpawnFileActions() { posix_spawn_file_actions_destroy(&actions_); }
  SpawnFileActions(const SpawnFileActions&) = delete;
  SpawnFileActions& operator=(const SpawnFileActions&) = delete;
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

class SpawnAttributes {
 public:
  SpawnAttributes() { posix_spawnattr_init(&attributes_); }
  ~SpawnAttributes() { posix_spawnattr_destroy(&attributes_); }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
  posix_spawnattr_t* get() { return &attributes_; }

 private:
  posix_spawnattr_t attributes_;
};

std::string errno_text(int error) { return std::strerror(error); }

}  // namespace

std::string substitute_address(const std::string& command, const IpiAddress& address) {
  const AddressFields fields = address_fields(address);
  const std::pair<const char*, std::string> placeholders[] = {{"{host}", fields.host},
                                                              {"{port}", fields.port},
                                                              {"{unix_path}", fields.unix_path},
                                                              {"{address}", address.describe()}};
  std::string result;
  std::size_t at = 0;
  while (at < command.size()) {
    bool replaced = false;
    for (const auto& [placeholder, value] : placeholders) {
      const std::size_t length = std::strlen(placeholder);
      if (command.compare(at, length, placeholder) == 0) {
        result += value;
        at += length;
        replaced = true;
        break;
      }
    }
    if (!replaced) result += command[at++];
  }
  return result;
}

ClientProcess::ClientProcess(const std::string& command, const std::string& log_path,
                             const std::optional<IpiAddress>& address)
    : log_path_(log_path) {
  const std::string output = log_path.empty() ? "/dev/null" : log_path;
  // Opened here first so that a log file we cannot write is reported as such, not as a failed
  // start of /bin/sh.
  const int probe = ::open(output.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (probe < 0)
    throw std::runtime_error("i-PI client: cannot open the log file '" + output +
                             "': " + errno_text(errno));
  ::close(probe);

  // Everything the child needs is built before the spawn.
  std::string shell = "/bin/sh", dash_c = "-c", command_text = command;
  std::vector<char*> argv = {&shell[0], &dash_c[0], &command_text[0], nullptr};
  std::vector<std::pair<std::string, std::string>> ours;
  if (address) {
    const AddressFields fields = address_fields(*address);
    ours = {{"OTF_IPI_MODE", fields.mode},
            {"OTF_IPI_HOST", fields.host},
            {"OTF_IPI_PORT", fields.port},
            {"OTF_IPI_UNIX_PATH", fields.unix_path}};
  }
  std::vector<std::string> environment;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    // The host's MPI job description: a client that is an MPI program itself (cp2k.psmp,
    // pw.x) would take it for its own and try to join the host's job.
    bool overridden = false;
    for (const char* prefix : {"OMPI_", "PMIX_", "PMI_", "OPAL_", "HYDRA_", "MPIR_"})
      overridden = overridden || std::strncmp(*entry, prefix, std::strlen(prefix)) == 0;
    for (const auto& [name, value] : ours)
      overridden = overridden || std::strncmp(*entry, (name + "=").c_str(), name.size() + 1) == 0;
    if (!overridden) environment.emplace_back(*entry);
  }
  for (const auto& [name, value] : ours) environment.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& entry : environment) envp.push_back(&entry[0]);
  envp.push_back(nullptr);

  SpawnFileActions actions;
  posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(actions.get(), STDOUT_FILENO, output.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(actions.get(), STDOUT_FILENO, STDERR_FILENO);
  // Nothing else of the host program: its log and input files, MPI's sockets and pipes (a client
  // holding the write end of a pipe its parent's caller reads would keep that caller waiting).
  posix_spawn_file_actions_addclosefrom_np(actions.get(), STDERR_FILENO + 1);

  // Its own group (pgid = its pid): stop() signals the shell and everything it started. Signals
  // the host program ignores or blocks (MPI runtimes do) would be inherited across exec: reset.
  SpawnAttributes attributes;
  posix_spawnattr_setflags(attributes.get(),
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(attributes.get(), 0);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(attributes.get(), &none);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (const int signal_number :
       {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM})
    sigaddset(&defaults, signal_number);
  posix_spawnattr_setsigdefault(attributes.get(), &defaults);

  pid_t child = -1;
  const int error = ::posix_spawn(&child, shell.c_str(), actions.get(), attributes.get(),
                                  argv.data(), envp.data());
  if (error != 0)
    throw std::runtime_error("i-PI client: cannot start '/bin/sh -c " + command +
                             "': " + errno_text(error));
  pid_ = child;
  live_groups().add(pid_);
}

ClientProcess::~ClientProcess() { stop(); }

bool ClientProcess::running() {
  if (pid_ <= 0 || reaped_) return false;
  int status = 0;
  pid_t result;
  do {
    result = ::waitpid(pid_, &status, WNOHANG);
  } while (result < 0 && errno == EINTR);
  if (result == 0) return true;
  record_shell_status(result, status);
  return false;
}

void ClientProcess::record_shell_status(pid_t result, int status) {
  reaped_ = true;
  // Otherwise ECHILD: reaped elsewhere (a host program that ignores SIGCHLD); the status is lost.
  status_known_ = result == pid_;
  wait_status_ = status;
}

std::string ClientProcess::exit_description() const {
  if (!reaped_) return "running";
  if (!status_known_) return "ended (exit status unknown)";
  if (WIFEXITED(wait_status_))
    return "exited with status " + std::to_string(WEXITSTATUS(wait_status_));
  if (WIFSIGNALED(wait_status_))
    return "killed by signal " + std::to_string(WTERMSIG(wait_status_));
  return "ended";
}

void ClientProcess::reap_group() {
  for (;;) {
    int status = 0;
    const pid_t result = ::waitpid(-pid_, &status, WNOHANG);
    if (result > 0) {
      if (result == pid_) record_shell_status(result, status);
      continue;
    }
    if (result < 0 && errno == EINTR) continue;
    if (result < 0 && errno == ECHILD && !reaped_) record_shell_status(result, status);
    return;
  }
}

// Zombies count as members for kill(): the group is gone only once they are reaped too.
bool ClientProcess::group_gone() const { return ::kill(-pid_, 0) == -1 && errno == ESRCH; }

// Members that still run. Orphaned members that died wait for init to reap them, which some
// container inits do only every second or so; /proc tells them from live ones (Linux). Without
// /proc every member counts as alive.
bool ClientProcess::group_has_live_members() const {
  if (group_gone()) return false;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return true;
  const std::unique_ptr<DIR, int (*)(DIR*)> closer(proc, ::closedir);
  while (const dirent* entry = ::readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    std::ifstream stat_file(std::string("/proc/") + entry->d_name + "/stat");
    std::string stat_line;
    if (!std::getline(stat_file, stat_line)) continue;
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, hence the last ')'.
    const std::size_t after_name = stat_line.rfind(')');
    if (after_name == std::string::npos) continue;
    char state = '?';
    long parent = 0, group = 0;
    if (std::sscanf(stat_line.c_str() + after_name + 1, " %c %ld %ld", &state, &parent, &group) !=
        3)
      continue;
    if (group == static_cast<long>(pid_) && state != 'Z' && state != 'X') return true;
  }
  return false;
}

// Reaps what it can until no member is alive, or `seconds` have passed (false then). Dead members
// others must reap are given a moment, so that callers usually find the group gone.
bool ClientProcess::wait_for_group(double seconds) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(seconds));
  const auto tick = std::chrono::milliseconds(10);
  const auto zombie_patience = std::chrono::milliseconds(300);
  Clock::time_point only_zombies_since = Clock::time_point::max();
  for (;;) {
    reap_group();
    if (group_gone()) return true;
    const auto now = Clock::now();
    if (!reaped_ || group_has_live_members()) {
      only_zombies_since = Clock::time_point::max();
    } else if (only_zombies_since == Clock::time_point::max()) {
      only_zombies_since = now;
    } else if (now - only_zombies_since >= zombie_patience) {
      return true;
    }
    if (now >= deadline) return !group_has_live_members() && reaped_;
    std::this_thread::sleep_for(tick);
  }
}

void ClientProcess::stop(double grace_seconds) {
  if (pid_ <= 0 || stopped_) return;
  stopped_ = true;
  live_groups().remove(pid_);
  reap_group();
  // Once the shell is reaped and its group is empty the id may be reused: signal nothing then.
  if (reaped_ && group_gone()) return;
  ::kill(-pid_, SIGTERM);
  if (wait_for_group(std::max(0.0, grace_seconds))) return;
  // While a member lives the group id cannot be reused, so this reaches only the client's
  // processes.
  ::kill(-pid_, SIGKILL);
  if (!reaped_) {
    int status = 0;
    pid_t result;
    do {
      result = ::waitpid(pid_, &status, 0);
    } while (result < 0 && errno == EINTR);
    record_shell_status(result, status);
  }
  wait_for_group(1.0);
}

std::string ClientProcess::log_tail(std::size_t max_bytes) const {
  if (log_path_.empty() || max_bytes == 0) return "";
  std::ifstream log(log_path_, std::ios::binary);
  if (!log) return "";
  log.seekg(0, std::ios::end);
  const std::streamoff size = log.tellg();
  if (size <= 0) return "";
  const std::streamoff start = size > static_cast<std::streamoff>(max_bytes)
                                   ? size - static_cast<std::streamoff>(max_bytes)
                                   : 0;
  log.seekg(start);
  std::string tail(static_cast<std::size_t>(size - start), '\0');
  log.read(&tail[0], static_cast<std::streamsize>(tail.size()));
  tail.resize(static_cast<std::size_t>(log.gcount()));
  // Cut in the middle of a line: start at the next whole one.
  if (start > 0) {
    const std::size_t newline = tail.find('\n');
    if (newline != std::string::npos && newline + 1 < tail.size()) tail.erase(0, newline + 1);
  }
  return tail;
}

}  // namespace otf
