// The default architecture ("behler-parrinello"): a three-body descriptor (three_body_descriptor.h),
// per-element standardisation (descriptor_normalizer.h) and one MLP per element and committee
// member (element_committee.h). Strictly local: an atom's energy depends on its neighbours within
// the cutoff only.
//
// Hyperparameters (model spec "hyperparameters", all optional):
//   radial_functions (8), angular_radial_functions (4), max_angular_order (3),
//   hidden ([64, 64]), activation ("silu")
#pragma once

#include "descriptor_potential.h"
#include "element_committee.h"

namespace otf {

class BehlerParrinelloPotential final : public DescriptorPotential {
 public:
  static constexpr const char* kArchitecture = "behler-parrinello";

  explicit BehlerParrinelloPotential(ModelSpec spec);

  // Shares the pair work between the members: the pair basis (pair_moments.h) and the moments
  // are computed once, each member differentiates its energy with respect to its own copy of
  // the moments, and the chain rule to the pair vectors runs for all members in two matrix
  // products per centre (docs/design.md §6.7).
  MemberPairGradients member_energies_and_pair_gradients(const LocalEnvironments& env,
                                                         const PairGradientOptions& options) override;

 protected:
  torch::Tensor member_network_energies(const LocalEnvironments& env) override;

 private:
  // standardised [C, D] shared or [members, C, D] member-resolved: [members, C].
  torch::Tensor network_energies(const torch::Tensor& standardised, const torch::Tensor& center_species);

  std::shared_ptr<ElementCommittee> networks_;
};

}  // namespace otf
