// How the "bayesian-linear" architecture (bayesian_linear_potential.h) learns: in closed form,
// from every labelled frame at once. Each frame's energy and forces are linear in the weights, so
// a frame gives one per-atom energy row and one row per force component (the basis's gradient,
// by one backward pass per descriptor feature), and the normal equations of all of them fix the
// posterior (bayesian_evidence.h). Data-parallel like the optimizer's training
// (potential_training.h): a rank holds its part of each frame, its rows of ghost atoms go to their
// owners through the same force routing, and the sums are reduced over ranks, so every rank fits
// the same weights.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "bayesian_evidence.h"
#include "bayesian_linear_potential.h"
#include "communicator.h"
#include "training_batch.h"

namespace otf {

// The rows each frame gives (its force rows on this rank, its energy row), kept between fits: a
// refit after a new label then computes that label's rows only (one backward pass per feature and
// frame is most of a fit's cost: 27 frames took 2 s a fit, examples/si-walkers). The normal
// equations are still summed from every frame's rows in order, so a fit gives the same bits with
// or without the rows kept (and after a restart, which starts with none). An entry holds its
// frame's tensors, so no other frame can take its key while it is kept; entries of frames not in
// a fit are dropped, and a change of the basis (descriptor statistics, energy shifts) drops all.
// Rows past a memory budget are not kept (computed again in each fit).
class FrameRowsCache {
 public:
  // The rows kept on a rank, at most (the oldest frames' first).
  static constexpr std::size_t kBudgetBytes = std::size_t{256} << 20;

  std::size_t frames() const { return rows_.size(); }

 private:
  friend NormalEquations bayesian_normal_equations(BayesianLinearPotential&,
                                                   const std::vector<TrainingBatch>&,
                                                   const std::shared_ptr<Communicator>&,
                                                   FrameRowsCache*);
  struct FrameRows {
    torch::Tensor anchor;       // the frame's forces: keeps its storage, the key, alive
    torch::Tensor x, y;         // force rows [P, components] and labels on this rank
    bool fits_forces = false;   // not a perfect crystal's rounding (agreed over the ranks)
    torch::Tensor energy_row;   // [P], summed over the ranks, per atom
    double energy_target = 0.0;
  };
  // The frame's forces tensor: its storage, offset and size (frames that were views of one
  // storage still differ).
  using Key = std::tuple<const void*, int64_t, int64_t>;
  static Key key_of(const TrainingBatch& frame);
  std::map<Key, FrameRows> rows_;
  uint64_t basis_ = 0;
};

// Collective (every rank with its parts of the same frames, in the same order): the normal
// equations of the frames' force components and per-atom energies (less the per-element energy
// shifts), summed over ranks. Frames as potential_training.h stores them. `cache`: rows kept
// from earlier calls on the same ranks (null: none).
NormalEquations bayesian_normal_equations(BayesianLinearPotential& potential,
                                          const std::vector<TrainingBatch>& frames,
                                          const std::shared_ptr<Communicator>& communicator,
                                          FrameRowsCache* cache = nullptr);

// Collective: the posterior of the frames made the model's committee (set_posterior). Returns it.
BayesianPosterior fit_bayesian_linear(BayesianLinearPotential& potential,
                                      const std::vector<TrainingBatch>& frames,
                                      const std::shared_ptr<Communicator>& communicator,
                                      const EvidenceOptions& options = {},
                                      FrameRowsCache* cache = nullptr);

}  // namespace otf
