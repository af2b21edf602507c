// Resuming after a kill (doc/fix_otf_train.md, restart): the labels the label journal holds beyond
// the point a restart file was written at, served in place of reference calls when the resumed MD
// reaches the configurations they label, so that a job killed at any moment and resumed from its
// last restart file pays no label twice and loses none. No LibTorch or LAMMPS types.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "extxyz.h"
#include "reference.h"

namespace otf {

class JournalReplay {
 public:
  // How far a replayed configuration's atoms may be from the journal's (MD length units): the
  // resumed MD repeats the killed one bitwise when its neighbour lists and ranks are the same.
  static constexpr double kPositionTolerance = 1e-6;

  // Collective. Rank 0 reads the journal (its size was `offset` when the restart file was written)
  // and every rank gets the frames from `offset` on, and the last frame before it (the restart
  // step's, when the reference drove it: LAMMPS' setup of the continued run evaluates that step
  // again). The frames after `offset` must continue the restart's reference calls (call numbers
  // calls_at_restart + 1, + 2, ...): otherwise, or when `offset` is not where a frame ends,
  // throws std::runtime_error on every rank saying which journal does not continue it.
  JournalReplay(const std::string& path, int64_t offset, int64_t calls_at_restart, MPI_Comm world);

  // Nothing left to serve.
  bool finished() const { return frames_.empty() && !restart_frame_; }
  // Frames not yet replayed, and the steps of the first and last of them.
  int64_t pending() const { return static_cast<int64_t>(frames_.size()); }
  int64_t first_step() const { return frames_.empty() ? -1 : frames_.front().frame.step; }
  int64_t last_step() const { return frames_.empty() ? -1 : frames_.back().frame.step; }
  // The journal's size up to the first frame not yet replayed (what a restart file written now
  // records, so that those frames are replayed after it too).
  int64_t next_offset() const { return frames_.empty() ? end_offset_ : frames_.front().offset; }

  // Collective: the label of this configuration when the next frame holds it (same step, same
  // atoms at the same positions), the rank's owned atoms in its order, taken out of the replay.
  // Otherwise nullopt, and a frame of this step that does not match is taken out as missed.
  std::optional<ReferenceLabel> take(const ReferenceConfiguration& configuration);
  // Collective: for the repeated evaluation of the restart step, the label of the last frame
  // before the restart file's point when it holds this configuration (served once).
  std::optional<ReferenceLabel> take_repeated(const ReferenceConfiguration& configuration);
  // Frames the resumed MD went past without asking for them (before `step`), and with every_one
  // all of them (a new reference call makes the rest unreachable): whole, on every rank.
  std::vector<LabelledFrame> take_missed(int64_t step, bool every_one = false);

 private:
  struct Entry {
    LabelledFrame frame;
    int64_t offset = 0;  // of the frame's first byte in the journal
  };
  // Collective: the frame's label in the rank's atom order when it holds this configuration.
  std::optional<ReferenceLabel> label_if_same(const LabelledFrame& frame,
                                              const ReferenceConfiguration& configuration) const;

  MPI_Comm world_;
  std::optional<LabelledFrame> restart_frame_;
  std::deque<Entry> frames_;
  std::vector<LabelledFrame> missed_;
  int64_t end_offset_ = 0;
};

}  // namespace otf
