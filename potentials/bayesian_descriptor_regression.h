// A learner that is accurate after a handful of labels (issue 39): Bayesian regression of the
// energy on a fixed many-body descriptor, per element, linear (degree 1) or quadratic (degree 2)
// in the standardised features, fitted in closed form to energies and forces of every labelled
// frame, with the posterior variance as an uncertainty in eV/A.
//
// Model: E = sum_centres w_{species(c)} . phi(d~_c), with d~ = (d - mean) / scale the descriptor
// (three_body_descriptor.h) standardised over the labelled centres of each species, and phi(d~) =
// [1, d~, (d~_i d~_j for i <= j)]. Energy and forces are linear in w, so one labelled frame gives
// one energy row and 3N force rows of a linear model; the prior w ~ N(0, 1/alpha) on every
// weight but the per-element bias, and Gaussian noise of precision beta_F on force components and
// beta_E on per-atom energies, give the posterior N(m, A^-1) with
//   A = alpha I' + beta_F X_F^T X_F + beta_E X_E^T X_E,  m = A^-1 (beta_F X_F^T y_F + beta_E X_E^T
//   y_E).
// alpha and beta_F maximise the evidence (MacKay's fixed point): nothing to tune per system. The
// per-atom energy noise is also fitted, with one pseudo-observation pulling it towards
// force noise x energy_length (a frame's energy is one number; with one or two frames the
// evidence alone cannot estimate its noise).
//
// The descriptor's Jacobian costs one backward pass per feature: fine for labelled frames and
// check steps; the posterior mean alone (mean_energy_and_forces) costs one.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "periodic_system.h"
#include "three_body_descriptor.h"

namespace otf {

struct BayesianRegressionOptions {
  int64_t degree = 2;  // 1: linear in the features; 2: also their pairwise products
  // Length (A) that relates the prior on the per-atom energy noise to the force noise: sigma_E ~
  // sigma_F x energy_length. One pseudo-observation; the data take over after a few frames.
  double energy_length = 0.01;
  int evidence_iterations = 50;
  // Throws std::invalid_argument naming the bad option.
  void check() const;
};

// One frame's rows of the linear model: E = energy_row . w, F = force_rows . w.
struct RegressionRows {
  torch::Tensor energy_row;  // [parameters] float64
  torch::Tensor force_rows;  // [3 atoms, parameters] float64 (owned atoms, x y z per atom)
};

// Posterior prediction of one frame.
struct RegressionPrediction {
  double energy = 0.0;      // eV
  double energy_std = 0.0;  // eV, posterior (model) part, without the noise
  torch::Tensor forces;     // [atoms, 3] float64
  torch::Tensor force_std;  // [atoms, 3] float64, posterior (model) part
};

// A frame's descriptors and their derivatives, independent of the standardisation, so the model
// can be refitted with new statistics from stored frames.
struct DescriptorFrame {
  torch::Tensor features;           // [centres, F] float64
  torch::Tensor feature_gradients;  // [centres, F, atoms, 3]: d(feature)/d(owned atom position)
  torch::Tensor species;            // [centres] int64 (centres are the owned atoms, in order)
};

class BayesianDescriptorRegression {
 public:
  BayesianDescriptorRegression(ThreeBodyDescriptorOptions descriptor,
                               BayesianRegressionOptions options);

  // Descriptors and their gradients with respect to the owned atoms' positions (ghost images
  // folded onto their owners) of a periodic configuration.
  DescriptorFrame describe(const PeriodicConfiguration& configuration) const;

  // Adds a labelled frame (energy in eV, forces [atoms, 3] in eV/A). Call fit() afterwards.
  void add_frame(const PeriodicConfiguration& configuration, double energy,
                 const torch::Tensor& forces);
  // Standardises over the stored frames and maximises the evidence. Throws std::logic_error
  // without frames.
  void fit();

  // Posterior mean and standard deviation of the energy and every force component.
  RegressionPrediction predict(const PeriodicConfiguration& configuration) const;
  // The posterior mean's energy and forces alone (force_std undefined): one descriptor
  // evaluation and one backward pass, the cost of an MD step.
  RegressionPrediction mean_energy_and_forces(const PeriodicConfiguration& configuration) const;

  // The rows of a described frame under the current standardisation.
  RegressionRows rows(const DescriptorFrame& frame) const;

  int64_t num_parameters() const;
  int64_t num_frames() const { return static_cast<int64_t>(frames_.size()); }
  bool fitted() const { return mean_.defined(); }
  // Fitted hyperparameters: prior precision, force-noise and per-atom-energy-noise standard
  // deviations.
  double prior_precision() const { return alpha_; }
  double force_noise() const;
  double energy_noise() const;
  const torch::Tensor& weights() const { return mean_; }

 private:
  struct Labelled {
    DescriptorFrame frame;
    double energy;
    torch::Tensor forces;  // [atoms * 3]
  };
  int64_t block_size() const;
  torch::Tensor block_features(const torch::Tensor& standardised) const;  // [centres, block]
  ThreeBodyDescriptor descriptor_;
  ThreeBodyDescriptorOptions descriptor_options_;
  BayesianRegressionOptions options_;
  std::vector<Labelled> frames_;
  torch::Tensor feature_mean_;   // [species, F]
  torch::Tensor feature_scale_;  // [species, F]
  torch::Tensor mean_;           // [parameters]
  torch::Tensor covariance_;     // [parameters, parameters] = A^-1
  double alpha_ = 1.0;
  double beta_force_ = 1.0;
  double beta_energy_ = 1.0;
};

}  // namespace otf
