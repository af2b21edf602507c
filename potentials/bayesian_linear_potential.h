// The "bayesian-linear" architecture (issue 39, docs/bayesian-learner.md): the energy of an atom
// is linear in a fixed basis of its standardised three-body descriptor (three_body_descriptor.h),
//   E_c = shift[s] + w_s . phi(d~_c),   phi(d~) = [1, d~ (, d~_i d~_j for i <= j with degree 2)],
// fitted in closed form to every labelled frame (bayesian_linear_training.h) instead of by an
// optimizer: accurate after a handful of labels, with nothing to tune. The committee members are
// antithetic draws from the weights' posterior (m + L z, m - L z; the mean itself for an odd
// member), so the committee mean is the posterior mean and the members' spread estimates the
// posterior standard deviation: the uncertainty the calibrated accuracy policy reads, in the
// same units as the forces. Evaluation costs one descriptor and a dot product per member.
//
// Hyperparameters (model spec "hyperparameters", all optional): radial_functions (8),
// angular_radial_functions (4), max_angular_order (3), degree (1).
#pragma once

#include <memory>

#include "bayesian_evidence.h"
#include "descriptor_potential.h"

namespace otf {

class BayesianLinearPotential final : public DescriptorPotential {
 public:
  static constexpr const char* kArchitecture = "bayesian-linear";

  explicit BayesianLinearPotential(ModelSpec spec);

  // One descriptor evaluation shared by the members: each member's pair gradients are one
  // backward pass through it.
  MemberPairGradients member_energies_and_pair_gradients(const LocalEnvironments& env,
                                                         const PairGradientOptions& options) override;

  bool learns_in_closed_form() const override { return true; }

  int64_t degree() const { return degree_; }
  // Basis functions per element (the constant included), and weights in all.
  int64_t block_size() const;
  int64_t num_weights() const { return num_species() * block_size(); }
  // The standardised descriptors of env's centres, differentiable in env.pair_vectors.
  using DescriptorPotential::standardised_descriptors;
  // The basis phi of standardised descriptors [..., features]: [..., block_size()].
  torch::Tensor basis(const torch::Tensor& standardised) const;
  // [num_weights()] float64: 1 for weights under the prior, 0 for each element's constant.
  torch::Tensor penalised_weights() const;

  // Makes the members draws from the posterior (the fit's count numbers the draws, so that
  // every rank and a restarted run draw the same). Marks the model fitted.
  void set_posterior(const BayesianPosterior& posterior);
  bool fitted() const { return fits_.item<int64_t>() > 0; }
  int64_t fits() const { return fits_.item<int64_t>(); }
  // The last fit's prior precision and force and per-atom-energy noise standard deviations
  // (eV/A, eV); zeros before the first fit.
  double prior_precision() const;
  double force_noise() const override;
  double energy_noise() const override;

 protected:
  torch::Tensor member_network_energies(const LocalEnvironments& env) override;

 private:
  // phi [members or 1, centres, block] with centre species [centres]: [members, centres].
  torch::Tensor member_energies_from_basis(const torch::Tensor& phi,
                                           const torch::Tensor& center_species) const;

  int64_t degree_ = 1;
  torch::Tensor weights_;      // parameter [members, species, block], the spec's dtype
  torch::Tensor fits_;         // buffer 0-d int64
  torch::Tensor hyperparameters_;  // buffer [3] float64: alpha, beta_F, beta_E of the last fit
};

}  // namespace otf
