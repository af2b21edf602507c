#include "label_journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <utility>

namespace otf {
namespace {

std::string system_reason(int error_number) { return std::strerror(error_number); }

std::string quoted_path(const std::string& path) { return "label journal '" + path + "'"; }

}  // namespace

// ---- LabelJournalWriter ------------------------------------------------------------------------

LabelJournalWriter::LabelJournalWriter(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw std::runtime_error("cannot open " + quoted_path(path_) +
                             " for appending: " + system_reason(errno));
  try {
    // A writer killed inside write() can leave part of a frame; frames appended after it would
    // turn that part into a malformed middle frame that stops every reader. Those bytes are no
    // label: drop them.
    std::ifstream existing(path_, std::ios::binary);
    const int64_t keep_bytes = extxyz_cut_short_tail_offset(existing);
    if (keep_bytes >= 0) {
      if (::ftruncate(fd_, keep_bytes) != 0 || ::fsync(fd_) != 0)
        throw std::runtime_error("cannot remove the frame cut short at the end of " +
                                 quoted_path(path_) + ": " + system_reason(errno));
      dropped_cut_short_frame_ = true;
    }
  } catch (...) {
    ::close(fd_);
    throw;
  }
  // A new file's directory entry must reach the disk too (fsync(2)); best effort, since some file
  // systems refuse to open or sync a directory.
  const std::size_t slash = path_.rfind('/');
  const std::string directory = slash == std::string::npos ? "."
                                : slash == 0               ? "/"
                                                           : path_.substr(0, slash);
  const int directory_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory_fd >= 0) {
    ::fsync(directory_fd);
    ::close(directory_fd);
  }
}

LabelJournalWriter::~LabelJournalWriter() {
  if (fd_ >= 0) ::close(fd_);  // every frame was fsync()ed already
}

LabelJournalWriter::LabelJournalWriter(LabelJournalWriter&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      frames_written_(other.frames_written_),
      dropped_cut_short_frame_(other.dropped_cut_short_frame_) {}

LabelJournalWriter& LabelJournalWriter::operator=(LabelJournalWriter&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    frames_written_ = other.frames_written_;
    dropped_cut_short_frame_ = other.dropped_cut_short_frame_;
  }
  return *this;
}

int64_t LabelJournalWriter::size_bytes() const {
  struct stat status {};
  if (::fstat(fd_, &status) != 0)
    throw std::runtime_error("cannot read the size of " + quoted_path(path_) + ": " +
                             system_reason(errno));
  return static_cast<int64_t>(status.st_size);
}

void LabelJournalWriter::append(const LabelledFrame& frame) {
  const std::string where = quoted_path(path_) + ", label of step " + std::to_string(frame.step);
  if (fd_ < 0) throw std::logic_error(where + ": the writer was moved from");
  const std::string text = extxyz_frame_text(frame, where);

  struct stat before {};
  if (::fstat(fd_, &before) != 0)
    throw std::runtime_error(where + ": cannot read the file's size: " + system_reason(errno));
  // The error to throw after cutting the file back to its size before this frame.
  auto failure = [&](int error) {
    std::string message = where + ": not written: " + system_reason(error);
    int truncated = -1;
    do {
      truncated = ::ftruncate(fd_, before.st_size);
    } while (truncated != 0 && errno == EINTR);
    if (truncated == 0) {
      ::fsync(fd_);
      message += " (the file is left as it was before this label)";
    } else {
      message += "; cutting the file back to its " + std::to_string(before.st_size) +
                 " bytes also failed: " + system_reason(errno) +
                 " (readers drop the frame cut short at its end)";
    }
    return std::runtime_error(message);
  };

  // One frame, one write() loop on an O_APPEND descriptor, then fsync: the frame is on disk
  // before the label is used, or cut back off.
  const char* data = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t written = ::write(fd_, data, left);
    if (written < 0) {
      if (errno == EINTR) continue;
      throw failure(errno);
    }
    if (written == 0) throw failure(EIO);
    data += written;
    left -= static_cast<std::size_t>(written);
  }
  if (::fsync(fd_) != 0) throw failure(errno);
  ++frames_written_;
}


}  // namespace otf
