// The statistics phase of on-the-fly training: the first frames' descriptor moments (reduced
// over ranks) standardise the descriptors, and their energies fit per-species energy shifts;
// then both are frozen and training starts (docs/potentials.md, descriptor statistics).
// The phase takes at least the frames asked for and goes on while they are not yet
// representative: as long as the newest frame's descriptors spread wider than the statistics
// gathered before it (a perfect crystal warming up, whose first frames are nearly identical),
// up to default_max_frames() (docs/design.md §9.5).
#pragma once

#include <torch/serialize.h>
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "communicator.h"
#include "neighbor_graph.h"
#include "potential.h"

namespace otf {

class StatisticsPhase {
 public:
  // A frame whose descriptors spread at most this much wider than the statistics before it
  // (Potential::descriptor_spread_ratio) shows that they are representative; a frame of n atoms
  // is allowed its sampling noise on top (representative_limit). A crystal warming up from rest
  // spreads about sqrt(3) x wider with each frame (displacements growing linearly in time).
  static constexpr double kRepresentativeSpread = 1.25;
  static double representative_limit(double atoms);
  // The phase ends after max(kMaxFramesFactor x the frames asked for, kMinFrameLimit) frames even
  // if they still widen (a run that heats up); a crystal warming up from rest with a label every
  // step needs about 20 frames.
  static constexpr int64_t kMaxFramesFactor = 10;
  static constexpr int64_t kMinFrameLimit = 50;
  static int64_t default_max_frames(int64_t frames_needed);

  // frames_needed 0, or a model whose statistics are frozen already: ready at once. max_frames
  // (0: default_max_frames) bounds the phase.
  // keeps_gathering (a model fitted in closed form, which is refitted from every frame with the
  // statistics of the moment): ready after the first frame, whose energy fits the shifts, and
  // every later frame still adds its moments; nothing is frozen.
  StatisticsPhase(int64_t frames_needed, bool already_frozen, int64_t max_frames = 0,
                  bool keeps_gathering = false);

  bool ready() const { return ready_; }
  // Frames the statistics came from so far, and how much wider than those before it the last
  // one spread (0 before the second frame).
  int64_t frames() const { return static_cast<int64_t>(energies_.size()); }
  int64_t frames_needed() const { return frames_needed_; }
  int64_t max_frames() const { return max_frames_; }
  double last_spread_ratio() const { return last_spread_ratio_; }
  // The limit the last frame was compared with.
  double last_limit() const { return last_limit_; }
  // Collective: adds a frame (this rank's part as `graph`, the whole frame's energy). The last
  // needed frame (the first representative one from frames_needed on, or the last allowed) fits
  // the energy shifts (unless fitted already) and freezes the statistics.
  void add_frame(Potential& potential, const NeighborGraph& graph, double frame_energy,
                 Communicator& communicator);

  void save(torch::serialize::OutputArchive& archive) const;
  void load(torch::serialize::InputArchive& archive, const std::string& what);

 private:
  int64_t frames_needed_;
  int64_t max_frames_;
  bool ready_;
  bool keeps_gathering_ = false;
  double last_spread_ratio_ = 0.0;
  double last_limit_ = kRepresentativeSpread;
  std::vector<torch::Tensor> counts_;  // per frame: [species] atom counts over all ranks
  std::vector<double> energies_;
};

}  // namespace otf
