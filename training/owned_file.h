// A file this process created and must remove when it is done with it (the i-PI server's socket
// file): removed by the owner's destructor, or at process exit when the host ends through exit()
// without destroying its objects (LAMMPS after an ERROR). Removed only while it is still the file
// we created (same device and inode) and only by the process that created it, so a file another
// process put at the same path since, or a forked child's exit, never removes anything.
#pragma once

#include <sys/types.h>

#include <string>

namespace otf {

class OwnedFile {
 public:
  OwnedFile() = default;
  // Takes `path` as ours if it exists now (lstat); registers it for removal at exit.
  explicit OwnedFile(const std::string& path);
  ~OwnedFile();  // remove()
  OwnedFile(OwnedFile&& other) noexcept;
  OwnedFile& operator=(OwnedFile&& other) noexcept;
  OwnedFile(const OwnedFile&) = delete;
  OwnedFile& operator=(const OwnedFile&) = delete;

  bool owned() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  // Unlinks the file if it is still ours; idempotent, never throws.
  void remove() noexcept;

 private:
  std::string path_;
  dev_t device_ = 0;
  ino_t inode_ = 0;
  pid_t creator_ = -1;
};

// What the at-exit handler does: removes every registered file that is still ours (exposed for
// tests). Returns the number of files removed.
int remove_owned_files_now() noexcept;
// The number of files registered for removal at exit (for tests).
int owned_files_registered();

}  // namespace otf
