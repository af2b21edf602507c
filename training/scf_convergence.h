// Whether an ab initio client's calculation (its SCF) converged, judged in one place from both
// things a client may say about it: the extra string of its i-PI reply (IpiServer) and the text
// its log gains during the call (IpiReference); docs/design.md §12.1.
#pragma once

#include <cstdint>
#include <string>

namespace otf {

// True when `extra` is JSON saying "converged": false or "scf_converged": false. Just enough of
// JSON to find that key's value: a client's extra string is free-form and may not be JSON at all.
bool extra_says_not_converged(const std::string& extra);

// The log's side: the client writes `marker` (e.g. CP2K's "SCF run NOT converged") to its log
// when its SCF did not converge; only what the log gained during a call counts for that call.
class ClientLogConvergence {
 public:
  // An empty log path or marker: off (the log is never read, nothing is judged not converged).
  ClientLogConvergence(std::string log_path, std::string marker);

  // Before a call: remembers where the log ends now (0 when it does not exist yet).
  void begin_call();
  // After the call: whether what the log gained since begin_call() holds the marker.
  bool gained_marker() const;

  const std::string& log_path() const { return log_path_; }
  const std::string& marker() const { return marker_; }

 private:
  bool enabled() const { return !log_path_.empty() && !marker_.empty(); }

  std::string log_path_;
  std::string marker_;
  std::uintmax_t call_start_offset_ = 0;
};

}  // namespace otf
