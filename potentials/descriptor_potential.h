// What the architectures on the standardised three-body descriptor share (behler_parrinello_potential.h,
// bayesian_linear_potential.h): their hyperparameter check, the descriptor
// (three_body_descriptor.h), its per-element standardisation (descriptor_normalizer.h, registered
// as "normalizer", the name model files use) and the descriptor-statistics part of Potential.
#pragma once

#include <memory>
#include <set>
#include <string>

#include "descriptor_normalizer.h"
#include "potential.h"
#include "three_body_descriptor.h"

namespace otf {

class DescriptorPotential : public Potential {
 public:
  DescriptorMoments descriptor_moments(const LocalEnvironments& env) override;
  void accumulate_descriptor_statistics(const DescriptorMoments& moments) override;
  double descriptor_spread_ratio(const DescriptorMoments& frame) const override;
  void freeze_descriptor_statistics() override;
  bool descriptor_statistics_frozen() const override;

  const ThreeBodyDescriptor& descriptor() const { return *descriptor_; }

 protected:
  // Throws std::invalid_argument for a hyperparameter of the spec outside `accepted` (naming
  // `architecture` and the accepted keys), then builds the descriptor and the normalizer.
  DescriptorPotential(ModelSpec spec, const std::string& architecture,
                      const std::set<std::string>& accepted);
  // The standardised descriptors of env's centres: [centres, features] for shared environments,
  // [members, centres, features] for member-resolved ones.
  torch::Tensor standardised_descriptors(const LocalEnvironments& env);

  ThreeBodyDescriptorOptions descriptor_options_;
  std::unique_ptr<ThreeBodyDescriptor> descriptor_;
  std::shared_ptr<DescriptorNormalizer> normalizer_;
};

}  // namespace otf
