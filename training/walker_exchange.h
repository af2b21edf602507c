// Many walkers, one model (docs/design.md §14): MD runs in several LAMMPS partitions (walkers),
// each under its own conditions and with its own reference, and every walker learns every
// walker's labels, so the model replicas stay identical everywhere. A walker that learns a label
// opens a round: the labels of that round, whole, go to every walker, which adds them to its
// replay buffer in walker order and trains; a walker that has finished its step joins the rounds
// until every walker has finished it. A label thus costs its own walker's reference call only,
// and labels of different walkers at the same step are computed side by side. MPI only; no
// LibTorch or LAMMPS types.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "extxyz.h"

namespace otf {

// Where this rank sits among the walkers (from the MD code: LAMMPS' -partition).
struct WalkerLayout {
  int walker = 0;   // this walker (partition), 0-based
  int walkers = 1;  // how many walkers share the model
  // World rank 0 of every walker, ordered by walker; MPI_COMM_NULL on other ranks (and with one
  // walker). Not owned.
  MPI_Comm roots = MPI_COMM_NULL;
};

// What one round brought, the same on every rank of every walker but `frames`.
struct WalkerRound {
  std::vector<LabelledFrame> frames;  // world rank 0: the round's labels, by walker; else empty
  std::vector<int> frame_walkers;     // world rank 0: the walker of each frame
  int64_t frame_count = 0;            // every rank: frames.size() on world rank 0
  // Every walker has finished its step: no more rounds for it.
  bool all_at_step_end = false;
  // A walker asked the run to stop (the reference-call budget): all walkers stop together.
  std::string stop_reason;
  // When every walker is at the step end: the earliest step at which some walker may bring a
  // label (the least of their next_label_step); no walker needs a round before it.
  int64_t next_round_step = 0;
};

// The path of a file written by each walker (label journal, learning log): the walker's number
// before the extension, "labels.extxyz" -> "labels.walker2.extxyz"; one walker: the path itself.
std::string walker_file_path(const std::string& path, const WalkerLayout& layout);

class WalkerExchange {
 public:
  // Checks that every walker has the same number of ranks (std::invalid_argument otherwise,
  // on every rank). Collective over all walkers.
  WalkerExchange(const WalkerLayout& layout, MPI_Comm world);

  bool shared() const { return layout_.walkers > 1; }
  const WalkerLayout& layout() const { return layout_; }

  // Collective over every rank of every walker. `label`: this walker's new label, whole, on world
  // rank 0 (null elsewhere, or when it has none). at_step_end: this walker has finished its step
  // and only follows others' rounds. stop_reason: why this walker wants the run to stop (empty:
  // it does not; read at the step end only). next_label_step: at the step end, the earliest step
  // at which this walker may bring a label (0: any).
  WalkerRound round(const LabelledFrame* label, bool at_step_end, const std::string& stop_reason,
                    int64_t next_label_step = 0);

  // Collective over every rank of every walker: whether `value` (a weights hash) is the same on
  // every rank of every walker.
  bool same_everywhere(uint64_t value) const;

  // Collective over every rank of every walker: `text` as world rank 0 of walker 0 holds it, on
  // every rank. Also a barrier: no walker goes on before walker 0 got here (e.g. had written the
  // model file the others read next).
  std::string from_first_walker(const std::string& text) const;

 private:
  WalkerLayout layout_;
  MPI_Comm world_;
  int rank_ = 0;
};

}  // namespace otf
