#include "bayesian_linear_training.h"

#include <stdexcept>

#include "fnv1a.h"
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

// What the frames' rows depend on besides the frame: every buffer of the model but the fit's own
// outputs (the descriptor statistics and the energy shifts), hashed (FNV-1a).
uint64_t basis_fingerprint(BayesianLinearPotential& potential) {
  uint64_t hash = kFnv1aOffset;
  for (const auto& item : potential.named_buffers(/*recurse=*/true)) {
    const std::string& name = item.key();
    if (name == "fits" || name == "posterior_hyperparameters") continue;
    hash = fnv1a64(name.data(), name.size(), hash);
    const torch::Tensor values = item.value().detach().cpu().contiguous();
    hash = fnv1a64(values.data_ptr(), values.nbytes(), hash);
  }
  return hash;
}

}  // namespace

FrameRowsCache::Key FrameRowsCache::key_of(const TrainingBatch& frame) {
  const torch::Tensor& forces = frame.at("forces");
  return {forces.storage().unsafeGetStorageImpl(), forces.storage_offset(), forces.numel()};
}

NormalEquations bayesian_normal_equations(BayesianLinearPotential& potential,
                                          const std::vector<TrainingBatch>& frames,
                                          const std::shared_ptr<Communicator>& communicator,
                                          FrameRowsCache* cache) {
  const int64_t parameters = potential.num_weights();
  NormalEquations equations(parameters);
  FrameRowsCache scratch;
  FrameRowsCache& kept = cache != nullptr ? *cache : scratch;
  const uint64_t basis = basis_fingerprint(potential);
  if (basis != kept.basis_) {
    kept.rows_.clear();
    kept.basis_ = basis;
  }
  // A frame's rows are computed collectively: every rank must find the same frames kept.
  torch::Tensor found = torch::zeros({static_cast<int64_t>(frames.size())}, torch::kFloat64);
  for (std::size_t k = 0; k < frames.size(); ++k)
    found[static_cast<int64_t>(k)] =
        kept.rows_.count(FrameRowsCache::key_of(frames[k])) > 0 ? 1.0 : 0.0;
  if (communicator) {
    torch::Tensor missing = 1.0 - found;
    communicator->all_reduce_max({missing});
    found = 1.0 - missing;
  }
  std::map<FrameRowsCache::Key, FrameRowsCache::FrameRows> used;
  std::size_t kept_bytes = 0;
  for (std::size_t k = 0; k < frames.size(); ++k) {
    const TrainingBatch& frame = frames[k];
    if (frame.at("energy").size(0) != 1)
      throw std::invalid_argument("bayesian_normal_equations: one frame per batch expected");
    const FrameRowsCache::Key key = FrameRowsCache::key_of(frame);
    FrameRowsCache::FrameRows rows;
    if (found[static_cast<int64_t>(k)].item<double>() > 0.5) {
      rows = kept.rows_.at(key);
    } else {
      const PartRows part = part_rows(potential, frame);
      // Forces: the rows of ghost atoms go to their owners; each owned atom's rows then count
      // once.
      const torch::Tensor owned = owned_forces(part.force_rows, force_routing(frame), communicator);
      const torch::Tensor mask = frame.at("force_mask");
      rows.anchor = frame.at("forces");
      rows.x = owned.index({torch::indexing::Slice(), mask}).reshape({parameters, -1});
      rows.y = frame.at("forces").index({mask}).to(torch::kFloat64).reshape({-1});
      // A perfect crystal's forces are rounding, and so are its force rows: fitted, they would
      // set the noise and the prior by rounding, differently on every rank count.
      torch::Tensor largest = (rows.y.numel() > 0 ? rows.y.abs().max()
                                                  : torch::zeros({}, torch::kFloat64))
                                  .reshape({1})
                                  .contiguous();
      if (communicator) communicator->all_reduce_max({largest});
      rows.fits_forces = largest.item<double>() > kRoundingForce;
      // The energy: the whole frame's row, summed over the ranks' counted centres first.
      torch::Tensor energy = torch::cat(
          {part.energy_row, torch::tensor({part.energy_shift}, torch::kFloat64)});
      if (communicator) communicator->all_reduce_sum({energy});
      const double atoms_in_frame = frame.at("atoms_per_frame").item<double>();
      rows.energy_row = energy.narrow(0, 0, parameters) / atoms_in_frame;
      rows.energy_target =
          (frame.at("energy").item<double>() - energy[parameters].item<double>()) / atoms_in_frame;
    }
    if (rows.fits_forces) {
      equations.gram_force += rows.x.mm(rows.x.t());
      equations.moment_force += rows.x.mv(rows.y);
      equations.squares_force += rows.y.dot(rows.y).item<double>();
      equations.count_force += static_cast<double>(rows.y.numel());
    }
    // Every rank holds the same energy sums; they are not reduced again below.
    equations.gram_energy += torch::outer(rows.energy_row, rows.energy_row);
    equations.moment_energy += rows.energy_row * rows.energy_target;
    equations.squares_energy += rows.energy_target * rows.energy_target;
    equations.count_energy += 1.0;
    // Up to the budget (a degree-2 basis of two elements has 4.7 MB of rows per 64-atom frame):
    // the frames after it are computed again in each fit.
    const std::size_t bytes = (rows.x.numel() + rows.y.numel()) * sizeof(double);
    if (kept_bytes + bytes <= FrameRowsCache::kBudgetBytes) {
      kept_bytes += bytes;
      used[key] = std::move(rows);
    }
  }
  kept.rows_ = std::move(used);
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
                                      const EvidenceOptions& options, FrameRowsCache* cache) {
  const NormalEquations equations =
      bayesian_normal_equations(potential, frames, communicator, cache);
  const BayesianPosterior posterior =
      maximise_evidence(equations, potential.penalised_weights(), options);
  potential.set_posterior(posterior);
  return posterior;
}

}  // namespace otf
