// warm_start: labelled frames from extended-XYZ files (the label journals of earlier runs, or
// files from other tools) fill the replay buffer and are trained on before the first step of a
// run that does not continue from a restart file (doc/fix_otf_train.md, warm_start). No LibTorch
// or LAMMPS types.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "frame_part.h"

namespace otf {

class PeriodicSystem;
class TrainingSession;
struct LabelledFrame;

// What a warm start learned: the same on every rank, but the log line (meaningful on rank 0).
struct WarmStartSummary {
  std::string log_line;
  long long frames = 0;
  // Over the frames: the largest force component, and the range of the energies per atom
  // (lowest > highest without frames), for the trainer's outlier guards.
  double largest_force = 0.0;
  double lowest_energy_per_atom = 0.0;
  double highest_energy_per_atom = 0.0;
  // The longest stretch of MD steps one file's labels came from (first to last step; 0 without
  // steps): the labelled history the policy's verifications are spaced against.
  long long labelled_span = 0;
};

// Collective. Rank 0 reads the files and holds each frame whole (its periodic images folded); the
// other ranks hold empty parts of the same frames, so the data-parallel sums stay exact. Frames
// must be in the run's unit style and hold only elements the model knows. Throws TrainingError on
// every rank.
WarmStartSummary warm_start(TrainingSession& session, const std::vector<std::string>& paths,
                            const std::string& unit_style, MPI_Comm world);

// A labelled frame held whole by rank 0 (`whole`; null on the other ranks, which hold empty parts
// of it), as this rank's FramePart. Collective (the frame's energy, virial, volume and atom count
// reach every rank). The part points into `whole` and into this object: both must outlive it.
class WholeFramePart {
 public:
  WholeFramePart(const TrainingSession& session, const LabelledFrame* whole, MPI_Comm world);
  ~WholeFramePart();
  WholeFramePart(const WholeFramePart&) = delete;
  WholeFramePart& operator=(const WholeFramePart&) = delete;

  const FramePart& part() const { return part_; }

 private:
  std::unique_ptr<PeriodicSystem> system_;
  std::vector<int> owners_;
  FramePart part_;
};

// Collective: adds one labelled frame, held whole by rank 0 (`whole`; null on the other ranks,
// which hold empty parts of it), to the replay buffer, without training. Throws std::exception.
void add_whole_frame(TrainingSession& session, const LabelledFrame* whole, MPI_Comm world);

// Collective: adds one labelled frame, held whole by rank 0 (`whole`; null on the other ranks,
// which hold empty parts of it), to the replay buffer and trains on it. Throws std::exception.
void learn_whole_frame(TrainingSession& session, const LabelledFrame* whole, MPI_Comm world);

}  // namespace otf
