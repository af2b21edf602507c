#include "bayesian_linear_training.h"

#include <stdexcept>

#include "neighbor_graph.h"
#include "potential_training.h"

namespace otf {
namespace {

// Forces (eV/A, or the model's force unit) below which a frame's labels are a perfect crystal's
// rounding rather than information.
constexpr double kRoundingForce = 1e-8;

// Rows of one frame part: the energy row (this rank's counted centres, [S * B]) and the force
// rows of every atom of the part, [S * B, atoms, 3] (F = -dE/dx for each unit weight).
struct PartRows {
  torch::Tensor energy_row;
  torch::Tensor force_rows;
  double energy_shift = 0.0;  // the per-element shifts of the counted centres
};

PartRows part_rows(BayesianLinearPotential& potential, const TrainingBatch& frame) {
  const NeighborGraph graph = neighbor_graph_from_batch(frame);
  torch::AutoGradMode grad_mode(true);
  LocalEnvironments env = local_environments(graph, potential.num_species(), potential.cutoff(),
                                             torch::kFloat64);
  const torch::Tensor pair_vectors = env.pair_vectors.detach().requires_grad_(true);
  env.pair_vectors = pair_vectors;
  const torch::Tensor standardised = potential.standardised_descriptors(env).to(torch::kFloat64);
  const int64_t centres = standardised.size(0), features = standardised.size(1);
  const int64_t species_count = potential.num_species(), block = potential.block_size();
  const int64_t atoms = graph.positions.size(0), width = pair_vectors.size(1);
  const torch::Tensor species = env.center_species;
  const torch::Tensor counted = graph.center_energy_mask.to(torch::kFloat64);

  PartRows rows;
  const torch::Tensor phi = potential.basis(standardised.detach()) * counted.unsqueeze(1);
  rows.energy_row = torch::zeros({species_count, block}, torch::kFloat64)
                        .index_add(0, species, phi)
                        .flatten();
  rows.energy_shift = (potential.energy_shifts().cpu().index_select(0, species) * counted)
                          .sum()
                          .item<double>();

  // d(d~_cf)/d(pair vector c,k): one backward pass per feature (a centre's descriptor depends on
  // its own pair vectors only).
  std::vector<torch::Tensor> per_feature;
  per_feature.reserve(static_cast<std::size_t>(features));
  for (int64_t f = 0; f < features; ++f)
    per_feature.push_back(torch::autograd::grad({standardised.select(1, f).sum()}, {pair_vectors},
                                                {}, /*retain_graph=*/f + 1 < features)[0]);
  torch::Tensor jacobian = torch::stack(per_feature, 1);  // [C, F, K, 3]
  torch::Tensor basis_jacobian;                            // [C, B, K, 3]
  {
    std::vector<torch::Tensor> parts{torch::zeros({centres, 1, width, 3}, torch::kFloat64),
                                     jacobian};
    if (potential.degree() == 2) {
      // d(d_i d_j) = d_i dd_j + d_j dd_i.
      const torch::Tensor upper = torch::triu_indices(features, features, 0, torch::kInt64);
      const torch::Tensor d = standardised.detach();
      parts.push_back(d.index_select(1, upper[0]).view({centres, -1, 1, 1}) *
                          jacobian.index_select(1, upper[1]) +
                      d.index_select(1, upper[1]).view({centres, -1, 1, 1}) *
                          jacobian.index_select(1, upper[0]));
    }
    basis_jacobian = torch::cat(parts, 1);
  }
  // Pair vector r_ck = x_k - x_c: a gradient g on it is a force +g on the centre and -g on the
  // neighbour (as predict() assembles forces).
  const torch::Tensor padding = graph.neighbor_index.lt(0).view({centres, 1, width, 1});
  basis_jacobian = basis_jacobian.masked_fill(padding, 0.0);
  rows.force_rows = torch::zeros({species_count, block, atoms, 3}, torch::kFloat64);
  for (int64_t s = 0; s < species_count; ++s) {
    const torch::Tensor of_species = species.eq(s).nonzero().flatten();
    if (of_species.numel() == 0) continue;
    const torch::Tensor g = basis_jacobian.index_select(0, of_species).transpose(0, 1);  // [B,c,K,3]
    const int64_t n = of_species.size(0);
    rows.force_rows[s] =
        torch::zeros({block, atoms, 3}, torch::kFloat64)
            .index_add(1, graph.centers.index_select(0, of_species), g.sum(2))
            .index_add(1, graph.neighbor_index.index_select(0, of_species).clamp_min(0).reshape({-1}),
                       -g.reshape({block, n * width, 3}));
  }
  rows.force_rows = rows.force_rows.reshape({species_count * block, atoms, 3});
  return rows;
}

}  // namespace

NormalEquations bayesian_normal_equations(BayesianLinearPotential& potential,
                                          const std::vector<TrainingBatch>& frames,
                                          const std::shared_ptr<Communicator>& communicator) {
  const int64_t parameters = potential.num_weights();
  NormalEquations equations(parameters);
  for (const TrainingBatch& frame : frames) {
    if (frame.at("energy").size(0) != 1)
      throw std::invalid_argument("bayesian_normal_equations: one frame per batch expected");
    const PartRows rows = part_rows(potential, frame);
    // Forces: the rows of ghost atoms go to their owners; each owned atom's rows then count once.
    const torch::Tensor owned = owned_forces(rows.force_rows, force_routing(frame), communicator);
    const torch::Tensor mask = frame.at("force_mask");
    const torch::Tensor x = owned.index({torch::indexing::Slice(), mask}).reshape({parameters, -1});
    const torch::Tensor y = frame.at("forces").index({mask}).to(torch::kFloat64).reshape({-1});
    // A perfect crystal's forces are rounding, and so are its force rows: fitted, they would
    // set the noise and the prior by rounding, differently on every rank count.
    torch::Tensor largest =
        (y.numel() > 0 ? y.abs().max() : torch::zeros({}, torch::kFloat64)).reshape({1}).contiguous();
    if (communicator) communicator->all_reduce_max({largest});
    if (largest.item<double>() > kRoundingForce) {
      equations.gram_force += x.mm(x.t());
      equations.moment_force += x.mv(y);
      equations.squares_force += y.dot(y).item<double>();
      equations.count_force += static_cast<double>(y.numel());
    }
    // The energy: the whole frame's row, summed over the ranks' counted centres first.
    torch::Tensor energy = torch::cat(
        {rows.energy_row, torch::tensor({rows.energy_shift}, torch::kFloat64)});
    if (communicator) communicator->all_reduce_sum({energy});
    const double atoms_in_frame = frame.at("atoms_per_frame").item<double>();
    const torch::Tensor row = energy.narrow(0, 0, parameters) / atoms_in_frame;
    const double target =
        (frame.at("energy").item<double>() - energy[parameters].item<double>()) / atoms_in_frame;
    // Every rank holds the same energy sums; they are not reduced again below.
    equations.gram_energy += torch::outer(row, row);
    equations.moment_energy += row * target;
    equations.squares_energy += target * target;
    equations.count_energy += 1.0;
  }
  if (communicator) {
    torch::Tensor counts = torch::tensor({equations.squares_force, equations.count_force},
                                         torch::kFloat64);
    communicator->all_reduce_sum({equations.gram_force, equations.moment_force, counts});
    equations.squares_force = counts[0].item<double>();
    equations.count_force = counts[1].item<double>();
  }
  return equations;
}

BayesianPosterior fit_bayesian_linear(BayesianLinearPotential& potential,
                                      const std::vector<TrainingBatch>& frames,
                                      const std::shared_ptr<Communicator>& communicator,
                                      const EvidenceOptions& options) {
  const NormalEquations equations = bayesian_normal_equations(potential, frames, communicator);
  const BayesianPosterior posterior =
      maximise_evidence(equations, potential.penalised_weights(), options);
  potential.set_posterior(posterior);
  return posterior;
}

}  // namespace otf
