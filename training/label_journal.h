// The label journal: every labelled configuration appended to an extended-XYZ file (the codec of
// training/extxyz.h) and on disk (fsync) before it is used, so that a crash, a kill or a full disk
// loses no label that the ab initio reference was paid for. A warm start reads such files back
// with read_extxyz_file.
#pragma once

#include <cstdint>
#include <string>

#include "extxyz.h"

namespace otf {

// A journal record is one extxyz frame.
using JournalFrame = LabelledFrame;

// Appends frames to one journal file; each append is on disk when it returns, or not there at all.
class LabelJournalWriter {
 public:
  // Opens `path` for appending (creates it, 0644). A last frame cut short by a killed writer is
  // removed first (so that new frames do not follow half a frame); dropped_cut_short_frame() tells.
  // Throws std::runtime_error naming the path and the system's reason.
  explicit LabelJournalWriter(std::string path);
  ~LabelJournalWriter();
  LabelJournalWriter(const LabelJournalWriter&) = delete;
  LabelJournalWriter& operator=(const LabelJournalWriter&) = delete;
  LabelJournalWriter(LabelJournalWriter&& other) noexcept;
  LabelJournalWriter& operator=(LabelJournalWriter&& other) noexcept;

  // Appends one frame, then fsync()s. All-or-nothing: when any byte cannot be written (ENOSPC,
  // EIO...) the file is truncated back to its size before the call and std::runtime_error names
  // the path, the step and the system's reason. An invalid frame (sizes that disagree, a number
  // that is not finite, an empty symbol) throws std::invalid_argument and writes nothing.
  void append(const LabelledFrame& frame);

  const std::string& path() const { return path_; }
  int64_t frames_written() const { return frames_written_; }  // by this writer
  // The file's size in bytes (every frame appended so far, whole). Throws std::runtime_error.
  int64_t size_bytes() const;
  bool dropped_cut_short_frame() const { return dropped_cut_short_frame_; }

 private:
  std::string path_;
  int fd_ = -1;
  int64_t frames_written_ = 0;
  bool dropped_cut_short_frame_ = false;
};

}  // namespace otf
