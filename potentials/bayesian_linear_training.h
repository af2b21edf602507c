// How the "bayesian-linear" architecture (bayesian_linear_potential.h) learns: in closed form,
// from every labelled frame at once. Each frame's energy and forces are linear in the weights, so
// a frame gives one per-atom energy row and one row per force component (the basis's gradient,
// by one backward pass per descriptor feature), and the normal equations of all of them fix the
// posterior (bayesian_evidence.h). Data-parallel like the optimizer's training
// (potential_training.h): a rank holds its part of each frame, its rows of ghost atoms go to their
// owners through the same force routing, and the sums are reduced over ranks, so every rank fits
// the same weights.
#pragma once

#include <memory>
#include <vector>

#include "bayesian_evidence.h"
#include "bayesian_linear_potential.h"
#include "communicator.h"
#include "training_batch.h"

namespace otf {

// Collective (every rank with its parts of the same frames, in the same order): the normal
// equations of the frames' force components and per-atom energies (less the per-element energy
// shifts), summed over ranks. Frames as potential_training.h stores them.
NormalEquations bayesian_normal_equations(BayesianLinearPotential& potential,
                                          const std::vector<TrainingBatch>& frames,
                                          const std::shared_ptr<Communicator>& communicator);

// Collective: the posterior of the frames made the model's committee (set_posterior). Returns it.
BayesianPosterior fit_bayesian_linear(BayesianLinearPotential& potential,
                                      const std::vector<TrainingBatch>& frames,
                                      const std::shared_ptr<Communicator>& communicator,
                                      const EvidenceOptions& options = {});

}  // namespace otf
