#include "owned_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace otf {
namespace {

struct Entry {
  std::string path;
  dev_t device;
  ino_t inode;
  pid_t creator;
};

bool still_ours(const Entry& entry) {
  struct stat current {};
  return entry.creator == ::getpid() && ::lstat(entry.path.c_str(), &current) == 0 &&
         current.st_dev == entry.device && current.st_ino == entry.inode;
}

// Files to remove at exit. Never destroyed (a leaked singleton): the at-exit handler may run
// after static destructors of this library's other objects, and must still find it.
class ExitRegistry {
 public:
  void add(const Entry& entry) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!handler_registered_)
      handler_registered_ = std::atexit([] { remove_owned_files_now(); }) == 0;
    entries_.push_back(entry);
  }
  void erase(const std::string& path, dev_t device, ino_t inode) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                  [&](const Entry& e) {
                                    return e.path == path && e.device == device && e.inode == inode;
                                  }),
                   entries_.end());
  }
  std::vector<Entry> take() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<Entry> taken;
    taken.swap(entries_);
    return taken;
  }
  int size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int>(entries_.size());
  }

 private:
  std::mutex mutex_;
  std::vector<Entry> entries_;
  bool handler_registered_ = false;
};

ExitRegistry& registry() {
  static ExitRegistry* const instance = new ExitRegistry;
  return *instance;
}

}  // namespace

OwnedFile::OwnedFile(const std::string& path) {
  struct stat created {};
  if (::lstat(path.c_str(), &created) != 0) return;
  path_ = path;
  device_ = created.st_dev;
  inode_ = created.st_ino;
  creator_ = ::getpid();
  registry().add({path_, device_, inode_, creator_});
}

OwnedFile::~OwnedFile() { remove(); }

OwnedFile::OwnedFile(OwnedFile&& other) noexcept
    : path_(std::move(other.path_)),
      device_(other.device_),
      inode_(other.inode_),
      creator_(other.creator_) {
  other.path_.clear();
}

OwnedFile& OwnedFile::operator=(OwnedFile&& other) noexcept {
  if (this != &other) {
    remove();
    path_ = std::move(other.path_);
    device_ = other.device_;
    inode_ = other.inode_;
    creator_ = other.creator_;
    other.path_.clear();
  }
  return *this;
}

void OwnedFile::remove() noexcept {
  if (path_.empty()) return;
  try {
    registry().erase(path_, device_, inode_);
    if (still_ours({path_, device_, inode_, creator_})) ::unlink(path_.c_str());
    path_.clear();
  } catch (...) {
    path_.clear();
  }
}

int remove_owned_files_now() noexcept {
  int removed = 0;
  try {
    for (const Entry& entry : registry().take())
      if (still_ours(entry) && ::unlink(entry.path.c_str()) == 0) ++removed;
  } catch (...) {
  }
  return removed;
}

int owned_files_registered() { return registry().size(); }

}  // namespace otf
