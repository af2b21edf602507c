#include "potential.h"

#include <stdexcept>

#include "autocast_region.h"

namespace otf {

Potential::Potential(ModelSpec spec) : spec_(std::move(spec)) {
  energy_shifts_ =
      register_buffer("energy_shifts", torch::zeros({spec_.num_species()}, torch::kFloat64));
  energy_shifts_fitted_ = register_buffer("energy_shifts_fitted", torch::zeros({}, torch::kBool));
}

torch::ScalarType Potential::dtype() const {
  return spec_.dtype == "float64" ? torch::kFloat64 : torch::kFloat32;
}

void Potential::set_hyperparameters(nlohmann::json hyperparameters) {
  spec_.hyperparameters = std::move(hyperparameters);
}

torch::Tensor Potential::member_atomic_energies(const LocalEnvironments& env) {
  return with_energy_shifts(member_network_energies(env), env.center_species);
}

torch::Tensor Potential::with_energy_shifts(const torch::Tensor& network,
                                            const torch::Tensor& center_species) const {
  const torch::Tensor shifts = energy_shifts_.index_select(0, center_species);
  return network.to(torch::kFloat64) + shifts.unsqueeze(0);
}

torch::Tensor energy_gradient(const torch::Tensor& energies, const torch::Tensor& input,
                              const PairGradientOptions& options) {
  const torch::Tensor scaled = energies.sum() * options.gradient_scale;
  // A backward pass, so outside any autocast region (docs/design.md §7.7), also where training
  // takes it inside one to build the forces' graph: each op's backward then runs in the dtype of
  // its forward. Inside, autocast would run the descriptor's backward products (kept in the input
  // precision in the forward) in float16, where the standardisation's inverse scales (up to 1e6
  // for a nearly constant feature) overflow them.
  const AutocastRegion backward_precision = AutocastRegion::disabled(input.device());
  torch::Tensor gradient = torch::autograd::grad({scaled}, {input}, {},
                                                 /*retain_graph=*/options.create_graph,
                                                 /*create_graph=*/options.create_graph)[0];
  if (options.gradient_scale != 1.0) gradient = gradient * (1.0 / options.gradient_scale);
  return gradient;
}

void Potential::require_shared_environments(const LocalEnvironments& env) {
  if (env.member_resolved()) {
    throw std::invalid_argument("member_energies_and_pair_gradients: expected shared pair vectors [centres, K, 3]");
  }
}

MemberPairGradients Potential::member_energies_and_pair_gradients(const LocalEnvironments& env,
                                                                  const PairGradientOptions& options) {
  require_shared_environments(env);
  torch::AutoGradMode grad_mode(true);
  const torch::Tensor shared =
      env.pair_vectors.requires_grad() ? env.pair_vectors : env.pair_vectors.detach().requires_grad_(true);
  LocalEnvironments resolved = env;
  resolved.pair_vectors = shared.unsqueeze(0).expand({committee_size(), -1, -1, -1});
  MemberPairGradients out;
  out.atomic_energies = member_atomic_energies(resolved);
  out.pair_gradients = energy_gradient(out.atomic_energies, resolved.pair_vectors, options);
  return out;
}

void Potential::fit_energy_shifts(const torch::Tensor& species_counts,
                                  const torch::Tensor& energies) {
  const int64_t species = num_species();
  if (species_counts.dim() != 2 || species_counts.size(1) != species || energies.dim() != 1 ||
      energies.size(0) != species_counts.size(0) || energies.size(0) == 0) {
    throw std::invalid_argument(
        "fit_energy_shifts: expected counts [frames, " + std::to_string(species) +
        "] and energies [frames] with at least one frame");
  }
  torch::NoGradGuard no_grad;
  const torch::Tensor a = species_counts.to(torch::kFloat64);
  const torch::Tensor b = energies.to(torch::kFloat64);
  const torch::Tensor normal = a.t().matmul(a);
  // The ridge is tiny relative to the data: it only picks the minimum-norm solution where the
  // frames do not determine a shift (one frame of two elements, an element not yet seen).
  const double ridge = 1e-10 * std::max(1.0, normal.trace().item<double>() / static_cast<double>(species));
  const torch::Tensor shifts = torch::linalg_solve(
      normal + ridge * torch::eye(species, torch::kFloat64), a.t().matmul(b).unsqueeze(-1));
  energy_shifts_.copy_(shifts.squeeze(-1));
  energy_shifts_fitted_.fill_(true);
}

}  // namespace otf
