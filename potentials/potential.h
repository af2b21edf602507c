// The interface of every ML potential architecture: a torch module that maps local environments to
// per-atom energies of each committee member, plus the state every architecture shares: its spec,
// per-element energy shifts, descriptor statistics hooks and training metadata. Callers (the
// evaluator, the training fix, the model file) use only this interface, so a second architecture
// plugs in through the registry (potential_registry.h) without changing them.
#pragma once

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "local_environments.h"
#include "model_spec.h"

namespace otf {

// Sums over labelled data that the per-element energy shifts and the descriptor statistics are
// fitted from. Sums, so that MPI ranks can add theirs (MPI_SUM) before fitting and every rank
// ends with the same model.
struct DescriptorMoments {
  torch::Tensor count;   // [species] float64
  torch::Tensor sum;     // [species, features] float64
  torch::Tensor sum_sq;  // [species, features] float64
};

// Options of Potential::member_energies_and_pair_gradients.
struct PairGradientOptions {
  // Keep the graph of the gradients (a training loss on forces needs their parameter gradients).
  bool create_graph = false;
  // Gradients are taken of gradient_scale * E and divided by it (the float16 recipe of
  // PredictionOptions::gradient_scale).
  double gradient_scale = 1.0;
};

// Every member's atomic energies with the gradient of that member's energy with respect to the
// pair vectors: every member's own forces and virials.
struct MemberPairGradients {
  torch::Tensor atomic_energies;  // [members, centres] float64, as member_atomic_energies
  torch::Tensor pair_gradients;   // [members, centres, K, 3]: d(sum_c E_hc) / d(pair vector c,k)
};

// d(sum of energies)/d(input), taken as d(gradient_scale x sum)/d(input) / gradient_scale; the
// graph is kept with options.create_graph. predict() and the member-resolved paths use it.
torch::Tensor energy_gradient(const torch::Tensor& energies, const torch::Tensor& input,
                              const PairGradientOptions& options);

class Potential : public torch::nn::Module {
 public:
  explicit Potential(ModelSpec spec);
  ~Potential() override = default;

  const ModelSpec& spec() const { return spec_; }
  double cutoff() const { return spec_.cutoff; }
  int64_t num_species() const { return spec_.num_species(); }
  int64_t committee_size() const { return spec_.committee_size; }
  // Dtype of the parameters (float32 or float64); inputs are cast to it.
  torch::ScalarType dtype() const;
  // Where the parameters and buffers live (the CPU, or the GPU a training moved them to).
  torch::Device device() const { return energy_shifts_.device(); }

  // Per-atom energies of every committee member, [members, centres], float64 (the per-element
  // shift is added in float64 so that total energies never lose digits: docs/design.md §7.8,
  // pitfall 1). Twice differentiable with respect to env.pair_vectors and the parameters. Inside an
  // autocast region the architecture chooses which products take the lower precision (the
  // default potential: its networks' matrix products).
  torch::Tensor member_atomic_energies(const LocalEnvironments& env);

  // Member-resolved energies and pair gradients of shared environments (env.pair_vectors
  // [centres, K, 3]). This generic version evaluates the architecture on one copy of the pair
  // vectors per member (one backward pass then separates the members), which repeats the
  // descriptor per member; an architecture overrides it when it can share that work. The
  // gradients are differentiable with respect to the parameters (with create_graph), not
  // necessarily with respect to the positions again.
  virtual MemberPairGradients member_energies_and_pair_gradients(const LocalEnvironments& env,
                                                                 const PairGradientOptions& options);

  // ---- Per-element energy shifts: E_atom = shift[species] + network output ----
  // Least squares fit of sum_s counts[f, s] * shift[s] = energies[f] over frames f (counts
  // [frames, species], energies [frames]); a tiny ridge makes it defined for one frame or an
  // absent species (minimum-norm solution). Marks the shifts fitted.
  void fit_energy_shifts(const torch::Tensor& species_counts, const torch::Tensor& energies);
  torch::Tensor energy_shifts() const { return energy_shifts_; }  // [species] float64
  bool energy_shifts_fitted() const { return energy_shifts_fitted_.item<bool>(); }

  // ---- Descriptor statistics (normalisation) ----
  // Moments of this architecture's descriptors over the centres of env (no gradient).
  virtual DescriptorMoments descriptor_moments(const LocalEnvironments& env) = 0;
  // Adds moments (possibly summed over ranks) to the running statistics, unless frozen.
  virtual void accumulate_descriptor_statistics(const DescriptorMoments& moments) = 0;
  // How much wider than the running statistics the descriptors of a frame (its moments, summed
  // over ranks) spread: about 1 for a frame like those seen, above while they still widen.
  virtual double descriptor_spread_ratio(const DescriptorMoments& frame) const = 0;
  virtual void freeze_descriptor_statistics() = 0;
  virtual bool descriptor_statistics_frozen() const = 0;

  // Whether training fits the model in closed form to every label at once instead of by optimizer
  // steps (bayesian_linear_potential.h): one fit learns a label completely.
  virtual bool learns_in_closed_form() const { return false; }
  // The standard deviation of the error the model's fit left, per force component and per atom's
  // energy, which the members' spread does not show (a Bayesian model's noise; 0 otherwise).
  // Uncertainties add it: per atom sqrt(deviation^2 + 3 force_noise^2).
  virtual double force_noise() const { return 0.0; }
  virtual double energy_noise() const { return 0.0; }

  TrainingMetadata& training_metadata() { return training_metadata_; }
  const TrainingMetadata& training_metadata() const { return training_metadata_; }

 protected:
  // An architecture completes its hyperparameters with its defaults, so a model file names all.
  void set_hyperparameters(nlohmann::json hyperparameters);
  // The networks' part: [members, centres] in any floating dtype (cast to float64 by the caller).
  virtual torch::Tensor member_network_energies(const LocalEnvironments& env) = 0;
  // Throws std::invalid_argument unless env holds shared pair vectors [centres, K, 3].
  static void require_shared_environments(const LocalEnvironments& env);
  // network [members, centres] in any floating dtype, plus the per-element shifts, in float64.
  torch::Tensor with_energy_shifts(const torch::Tensor& network, const torch::Tensor& center_species) const;

 private:
  ModelSpec spec_;
  torch::Tensor energy_shifts_;          // buffer [species] float64
  torch::Tensor energy_shifts_fitted_;   // buffer 0-d bool
  TrainingMetadata training_metadata_;
};

}  // namespace otf
