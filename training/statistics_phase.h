// The statistics phase of on-the-fly training: the first frames' descriptor moments (reduced
// over ranks) standardise the descriptors, and their energies fit per-species energy shifts;
// then both are frozen and training starts (docs/potentials.md, descriptor statistics).
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
  // frames_needed 0, or a model whose statistics are frozen already: ready at once.
  StatisticsPhase(int64_t frames_needed, bool already_frozen);

  bool ready() const { return ready_; }
  // Collective: adds a frame (this rank's part as `graph`, the whole frame's energy). The last
  // needed frame fits the energy shifts (unless fitted already) and freezes the statistics.
  void add_frame(Potential& potential, const NeighborGraph& graph, double frame_energy,
                 Communicator& communicator);

  void save(torch::serialize::OutputArchive& archive) const;
  void load(torch::serialize::InputArchive& archive, const std::string& what);

 private:
  int64_t frames_needed_;
  bool ready_;
  std::vector<torch::Tensor> counts_;  // per frame: [species] atom counts over all ranks
  std::vector<double> energies_;
};

}  // namespace otf
