#include "scf_convergence.h"

#include <sys/stat.h>

#include <cctype>
#include <fstream>
#include <iterator>
#include <utility>

namespace otf {

bool extra_says_not_converged(const std::string& extra) {
  for (const char* key_text : {"\"converged\"", "\"scf_converged\""}) {
    const std::string key = key_text;
    for (std::size_t at = extra.find(key); at != std::string::npos; at = extra.find(key, at + 1)) {
      std::size_t p = at + key.size();
      auto skip_space = [&] {
        while (p < extra.size() && std::isspace(static_cast<unsigned char>(extra[p]))) ++p;
      };
      skip_space();
      if (p >= extra.size() || extra[p] != ':') continue;
      ++p;
      skip_space();
      if (extra.compare(p, 5, "false") == 0) return true;
    }
  }
  return false;
}

ClientLogConvergence::ClientLogConvergence(std::string log_path, std::string marker)
    : log_path_(std::move(log_path)), marker_(std::move(marker)) {}

void ClientLogConvergence::begin_call() {
  struct stat status {};
  call_start_offset_ = enabled() && ::stat(log_path_.c_str(), &status) == 0
                           ? static_cast<std::uintmax_t>(status.st_size)
                           : 0;
}

bool ClientLogConvergence::gained_marker() const {
  if (!enabled()) return false;
  std::ifstream log(log_path_, std::ios::binary);
  if (!log) return false;
  log.seekg(static_cast<std::streamoff>(call_start_offset_));
  const std::string gained((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  return gained.find(marker_) != std::string::npos;
}

}  // namespace otf
