// Frames split over MPI ranks (potentials/potential_training.h): each rank evaluates its owned
// atoms only and the forces on ghosts of other ranks' atoms reach their owners through the halo
// exchange. Checked against the whole frame evaluated by one process: energies, forces and virials
// (float64, 1e-10), the parameter gradient of a force-and-energy loss (the exchange's backward
// pass), the committee's force spread, and whole training runs (float32 loss history, replicas
// bitwise identical). Run with 1, 2 and 4 ranks; atoms are dealt to ranks in turn (atom i to rank
// i % ranks), so every rank's part has ghosts of every other rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../potentials/potential_test_support.h"
#include "frame_intake.h"
#include "mpi_communicator.h"
#include "potential_training.h"
#include "training_session.h"
#include "world_ranks.h"

namespace otf::testing {
namespace {

// One rank's part of a periodic frame, laid out as an MD code with domain decomposition hands it
// over: the rank's owned atoms first (whole-frame atoms i with i % ranks == rank), then every
// other atom and periodic image of the whole frame as ghosts, each named by its owner's rank and
// centre index there (owned atom i is centre i / ranks of rank i % ranks).
class SplitPart {
 public:
  SplitPart(const PeriodicSystem& whole, int rank, int ranks) {
    const AtomicSystemView w = whole.view();
    const int frame_atoms = whole.num_local();
    std::vector<int> part_index(static_cast<std::size_t>(w.num_atoms), -1);
    for (int i = rank; i < frame_atoms; i += ranks) order_.push_back(i);
    num_local_ = static_cast<int>(order_.size());
    for (int j = 0; j < w.num_atoms; ++j)
      if (j >= frame_atoms || j % ranks != rank) order_.push_back(j);
    for (std::size_t p = 0; p < order_.size(); ++p) part_index[static_cast<std::size_t>(order_[p])] = static_cast<int>(p);
    for (const int j : order_) {
      for (int d = 0; d < 3; ++d) positions_.push_back(w.positions[3 * j + d]);
      species_.push_back(w.species[j]);
      const int owner = whole.owner()[static_cast<std::size_t>(j)];
      owner_rank_.push_back(owner % ranks);
      owner_centre_.push_back(owner / ranks);
    }
    // The whole frame's centres are its atoms in order: centre i's row is atom i's neighbours.
    for (int p = 0; p < num_local_; ++p) {
      const int i = order_[static_cast<std::size_t>(p)];
      std::vector<int> row;
      for (int k = 0; k < w.neighbor_counts[i]; ++k) row.push_back(part_index[static_cast<std::size_t>(w.neighbors[i][k])]);
      rows_.push_back(row);
      centers_.push_back(p);
      counts_.push_back(static_cast<int>(row.size()));
    }
    for (const auto& row : rows_) row_pointers_.push_back(row.data());
  }

  FramePart frame() const {
    FramePart frame;
    frame.system.num_atoms = static_cast<int>(order_.size());
    frame.system.num_local = num_local_;
    frame.system.positions = positions_.data();
    frame.system.species = species_.data();
    frame.system.num_centers = num_local_;
    frame.system.centers = centers_.data();
    frame.system.neighbor_counts = counts_.data();
    frame.system.neighbors = row_pointers_.data();
    frame.owner_rank = owner_rank_.data();
    frame.owner_centre = owner_centre_.data();
    return frame;
  }
  // The whole-frame atom of each owned atom of the part.
  std::vector<int64_t> owned_atoms() const { return {order_.begin(), order_.begin() + num_local_}; }
  int num_local() const { return num_local_; }

 private:
  std::vector<int> order_;  // whole-frame atom (or image) of each part atom
  int num_local_ = 0;
  std::vector<double> positions_;
  std::vector<int> species_, owner_rank_, owner_centre_, centers_, counts_;
  std::vector<std::vector<int>> rows_;
  std::vector<const int*> row_pointers_;
};

struct WholeFrame {
  double energy = 0.0;
  torch::Tensor forces;         // [atoms, 3] folded onto the frame's atoms
  torch::Tensor member_forces;  // [members, atoms, 3] folded
  torch::Tensor virial;         // [3, 3]
  torch::Tensor member_energy;  // [members]
};

WholeFrame whole_frame(Potential& model, const PeriodicSystem& system) {
  const NeighborGraph graph = neighbor_graph_from_view(system.view(), model.cutoff());
  PredictionOptions options;
  options.member_forces = true;
  const Prediction p = predict(model, graph, options);
  const torch::Tensor owner =
      torch::tensor(std::vector<int64_t>(system.owner().begin(), system.owner().end()));
  WholeFrame whole;
  whole.energy = p.energy.item<double>();
  whole.forces = torch::zeros({system.num_local(), 3}, torch::kFloat64).index_add(0, owner, p.forces.detach());
  whole.member_forces = torch::zeros({p.member_forces.size(0), system.num_local(), 3}, torch::kFloat64)
                            .index_add(1, owner, p.member_forces.detach());
  whole.virial = p.virial.detach()[0];
  whole.member_energy = p.member_energy.detach().reshape({-1});
  return whole;
}

// The part as a stored training frame (labels: zeros, the volume for the stress).
TrainingBatch split_batch(const SplitPart& part, double cutoff, int rank, int frame_atoms, double volume) {
  const FramePart frame = part.frame();
  const FrameGraph graph = frame_graph(frame, cutoff, rank);
  std::vector<double> zero_forces(3 * static_cast<std::size_t>(part.num_local()), 0.0);
  FramePart labelled = frame;
  labelled.owned_forces = zero_forces.data();
  labelled.volume = volume;
  labelled.atoms_in_frame = frame_atoms;
  return labelled_frame(graph.graph, frame_labels(labelled, graph, /*stress=*/true));
}

double cell_volume(const PeriodicConfiguration& config) {
  const auto& c = config.cell;
  return std::abs(c[0][0] * (c[1][1] * c[2][2] - c[1][2] * c[2][1]) -
                  c[0][1] * (c[1][0] * c[2][2] - c[1][2] * c[2][0]) +
                  c[0][2] * (c[1][0] * c[2][1] - c[1][1] * c[2][0]));
}

std::shared_ptr<MpiCommunicator> world_communicator() {
  return std::make_shared<MpiCommunicator>(MPI_COMM_WORLD);
}

// Two frames in one batch (the halo rows of the second shifted by the first's atoms): energies,
// every member's forces on the owned atoms and the stress are the whole frames'.
TEST(SplitFrames, PredictionsOfABatchAreTheWholeFramesToFloat64Rounding) {
  const int rank = world_rank(), ranks = world_size();
  const std::shared_ptr<Potential> model = create_potential(small_spec({"Si", "C"}, "float64", 3.6));
  std::vector<PeriodicConfiguration> configs = {random_configuration(40, 2, false, 11, 0.06, 1.9),
                                                random_configuration(36, 2, true, 12, 0.06, 1.9)};
  fit_statistics(*model, configs);
  std::vector<TrainingBatch> parts;
  std::vector<WholeFrame> wholes;
  std::vector<std::vector<int64_t>> owned;
  for (const PeriodicConfiguration& config : configs) {
    const PeriodicSystem system(config, model->cutoff());
    wholes.push_back(whole_frame(*model, system));
    const SplitPart part(system, rank, ranks);
    owned.push_back(part.owned_atoms());
    parts.push_back(split_batch(part, model->cutoff(), rank, system.num_local(), cell_volume(config)));
  }
  const TrainingBatch batch = concatenate_frames(parts);
  if (ranks > 1) {
    EXPECT_GT(batch.at("halo_rows").numel(), 0) << "no atom of another rank near rank " << rank;
  }
  PotentialTrainingOptions options;
  options.train_members = true;
  options.stress = true;
  options.communicator = world_communicator();
  const Predictions predicted = potential_training_function(options)({{"main", model}}, batch);
  const int64_t members = model->committee_size();
  const int64_t atoms = batch.at("positions").size(0);
  const torch::Tensor forces = predicted.at("forces").detach().reshape({members, atoms, 3});
  const torch::Tensor energy = predicted.at("energy").detach().reshape({members, 2});
  const torch::Tensor stress = predicted.at("stress").detach().reshape({members, 2, 3, 3});
  int64_t offset = 0;
  for (std::size_t f = 0; f < parts.size(); ++f) {
    const WholeFrame& whole = wholes[f];
    const torch::Tensor rows = torch::arange(static_cast<int64_t>(owned[f].size())) + offset;
    const torch::Tensor expected = whole.member_forces.index_select(1, torch::tensor(owned[f]));
    const torch::Tensor got = forces.index_select(1, rows);
    EXPECT_LE((got - expected).abs().max().item<double>(), 1e-10 * expected.abs().max().item<double>())
        << "frame " << f << ", rank " << rank;
    EXPECT_TRUE(torch::allclose(energy.select(1, static_cast<int64_t>(f)), whole.member_energy, 1e-12, 1e-10));
    const double volume = cell_volume(configs[f]);
    EXPECT_TRUE(torch::allclose(stress.select(1, static_cast<int64_t>(f)).mean(0), -whole.virial / volume, 1e-10, 1e-12))
        << "frame " << f;
    // Rows of ghosts come out zero: their forces went to the owners.
    const torch::Tensor ghost_rows =
        torch::arange(static_cast<int64_t>(owned[f].size()), parts[f].at("positions").size(0)) + offset;
    EXPECT_EQ(forces.index_select(1, ghost_rows).abs().sum().item<double>(), 0.0);
    offset += parts[f].at("positions").size(0);
  }
}

// The parameter gradient of sum_i w_i . F_i + 0.3 E over the owned atoms of every rank, summed over
// ranks, is the whole frame's: the halo exchange's backward pass sends each owner's gradient to the
// ghost rows that fed it.
TEST(SplitFrames, SummedParameterGradientsAreTheWholeFramesGradient) {
  const int rank = world_rank(), ranks = world_size();
  const std::shared_ptr<Potential> model = create_potential(small_spec({"Si", "C"}, "float64", 3.6));
  const PeriodicConfiguration config = random_configuration(40, 2, true, 21, 0.06, 1.9);
  fit_statistics(*model, {config});
  const PeriodicSystem system(config, model->cutoff());
  const torch::Tensor weights =
      torch::linspace(-1.0, 1.0, 3 * system.num_local(), torch::kFloat64).reshape({system.num_local(), 3});
  const std::vector<torch::Tensor> parameters = model->parameters();
  for (const bool members : {false, true}) {
    PotentialTrainingOptions options;
    options.train_members = members;
    // Whole frame, one process.
    const NeighborGraph graph = neighbor_graph_from_view(system.view(), model->cutoff());
    FrameLabels labels;
    labels.forces = torch::zeros({system.num_atoms(), 3}, torch::kFloat64);
    labels.force_mask = torch::arange(system.num_atoms()) < system.num_local();
    labels.atoms_in_frame = system.num_local();
    labels.force_owner = torch::tensor(std::vector<int64_t>(system.owner().begin(), system.owner().end()));
    const TrainingBatch whole_batch = labelled_frame(graph, labels);
    const Predictions whole = potential_training_function(options)({{"main", model}}, whole_batch);
    const int64_t copies = members ? model->committee_size() : 1;
    const auto loss_of = [&](const Predictions& p, int64_t atoms, const torch::Tensor& rows, const torch::Tensor& w) {
      const torch::Tensor forces = p.at("forces").reshape({copies, atoms, 3}).index_select(1, rows);
      return (forces * w).sum() + 0.3 * p.at("energy").sum();
    };
    const torch::Tensor all_rows = torch::arange(static_cast<int64_t>(system.num_local()));
    const std::vector<torch::Tensor> expected = torch::autograd::grad(
        {loss_of(whole, system.num_atoms(), all_rows, weights)}, parameters, {}, false, false, true);
    // Split over the ranks.
    const SplitPart part(system, rank, ranks);
    const TrainingBatch batch = split_batch(part, model->cutoff(), rank, system.num_local(), cell_volume(config));
    options.communicator = world_communicator();
    const Predictions split = potential_training_function(options)({{"main", model}}, batch);
    const torch::Tensor owned_rows = torch::arange(static_cast<int64_t>(part.num_local()));
    std::vector<torch::Tensor> gradients = torch::autograd::grad(
        {loss_of(split, batch.at("positions").size(0), owned_rows,
                 weights.index_select(0, torch::tensor(part.owned_atoms())))},
        parameters, {}, false, false, true);
    std::vector<torch::Tensor> reducible;
    for (std::size_t k = 0; k < gradients.size(); ++k)
      reducible.push_back(gradients[k].defined() && gradients[k].numel() > 0
                              ? gradients[k].contiguous()
                              : torch::zeros_like(parameters[k]));
    options.communicator->all_reduce_sum(reducible);
    double largest = 0.0, difference = 0.0;
    for (std::size_t k = 0; k < expected.size(); ++k) {
      const torch::Tensor e = expected[k].defined() ? expected[k] : torch::zeros_like(parameters[k]);
      largest = std::max(largest, e.abs().max().item<double>());
      difference = std::max(difference, (reducible[k] - e).abs().max().item<double>());
    }
    EXPECT_GT(largest, 0.0);
    EXPECT_LE(difference, 1e-10 * largest) << (members ? "member-resolved" : "committee mean")
                                           << ", rank " << rank << " of " << ranks;
  }
}

// A part whose halo cannot be right (rank 0 names itself as the owner of a ghost) stops every rank
// with the reason, instead of leaving the others waiting in an exchange; on one rank any halo row
// is refused.
TEST(SplitFrames, AnInconsistentHaloOnOneRankMakesEveryRankThrow) {
  const int rank = world_rank(), ranks = world_size();
  const std::shared_ptr<Potential> model = create_potential(small_spec({"Si", "C"}, "float64", 3.6));
  const PeriodicConfiguration config = random_configuration(40, 2, false, 31, 0.06, 1.9);
  const PeriodicSystem system(config, model->cutoff());
  const SplitPart part(system, rank, ranks);
  TrainingBatch batch = split_batch(part, model->cutoff(), rank, system.num_local(), cell_volume(config));
  std::map<std::string, torch::Tensor> tensors = batch.tensors();
  if (rank == 0) {
    tensors["halo_rows"] = torch::tensor({int64_t{0}});
    tensors["halo_ranks"] = torch::tensor({int64_t{0}});
    tensors["halo_owner_rows"] = torch::tensor({int64_t{0}});
    tensors["halo_frames"] = torch::tensor({int64_t{0}});
  }
  PotentialTrainingOptions options;
  options.train_members = false;
  options.communicator = world_communicator();
  try {
    potential_training_function(options)({{"main", model}}, TrainingBatch(tensors));
    FAIL() << "rank " << rank << " went on with an inconsistent halo";
  } catch (const std::invalid_argument& e) {
    const std::string expected = ranks == 1 ? "atoms of other ranks" : "halo exchange";
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
  // Nothing was left in flight: a later collective works.
  EXPECT_EQ(options.communicator->all_reduce_sum(1.0), static_cast<double>(ranks));
}

// A training session fed the split frames trains like one process fed the whole frames: the same
// loss history (float32: summation order only) and the committee's spread, with replicas bitwise
// identical on every rank.
TEST(SplitFrames, TrainingOnSplitFramesFollowsTheWholeFramesRun) {
  const int rank = world_rank(), ranks = world_size();
  ModelSpec spec = small_spec({"Si", "C"}, "float32", 3.6, 5);
  spec.units = "metal";
  TrainingSessionSettings settings;
  settings.batch_frames = 2;
  settings.steps_per_frame = 2;
  settings.stats_frames = 2;
  settings.validation_fraction = 0.0;
  settings.learning_rate = 3e-3;
  std::vector<PeriodicConfiguration> configs;
  for (uint64_t k = 0; k < 5; ++k) configs.push_back(random_configuration(32, 2, k % 2 == 1, 40 + k, 0.06, 1.9));
  // Labels: a Morse pair potential on the whole frame.
  TrainingSession split(create_potential(spec), settings, MPI_COMM_WORLD);
  TrainingSession whole(create_potential(spec), settings, MPI_COMM_SELF);
  std::vector<double> split_losses, whole_losses, split_spreads, whole_spreads;
  for (const PeriodicConfiguration& config : configs) {
    const PeriodicSystem system(config, spec.cutoff);
    const NeighborGraph graph = neighbor_graph_from_view(system.view(), spec.cutoff);
    const MorseLabels labels = morse_labels(graph, spec.cutoff);
    const torch::Tensor all = labels.forces.contiguous();
    const std::vector<double> folded =
        system.fold_onto_owners(std::vector<double>(all.data_ptr<double>(), all.data_ptr<double>() + all.numel()));
    const std::vector<int> owners =
        owner_centres(system.view(), std::vector<int>(system.owner().begin(), system.owner().end()));
    FramePart whole_part;
    whole_part.system = system.view();
    whole_part.owner_centre = owners.data();
    whole_part.owned_forces = folded.data();
    whole_part.energy = labels.energy;
    whole_part.volume = cell_volume(config);
    whole_part.atoms_in_frame = system.num_local();
    const SplitPart part(system, rank, ranks);
    FramePart split_part = part.frame();
    std::vector<double> owned_forces;
    for (const int64_t atom : part.owned_atoms())
      for (int d = 0; d < 3; ++d) owned_forces.push_back(folded[static_cast<std::size_t>(3 * atom + d)]);
    split_part.owned_forces = owned_forces.data();
    split_part.energy = labels.energy;
    split_part.volume = whole_part.volume;
    split_part.atoms_in_frame = system.num_local();

    std::vector<double> per_atom(static_cast<std::size_t>(system.num_local()));
    whole_spreads.push_back(whole.force_uncertainty(whole_part, per_atom.data()));
    split_spreads.push_back(split.force_uncertainty(split_part, per_atom.data()));
    whole.add_frame(whole_part);
    split.add_frame(split_part);
    whole.train();
    split.train();
    whole_losses.push_back(whole.report().last_loss);
    split_losses.push_back(split.report().last_loss);
    // Replicas: every rank's hash equals rank 0's.
    unsigned long long hash = split.weights_hash(), root_hash = hash;
    MPI_Bcast(&root_hash, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    int differs = hash != root_hash ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &differs, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_EQ(differs, 0) << "replicas differ after frame " << whole_losses.size();
  }
  ASSERT_GT(whole.report().optimizer_steps, 0);
  EXPECT_EQ(split.report().optimizer_steps, whole.report().optimizer_steps);
  for (std::size_t k = 0; k < whole_losses.size(); ++k) {
    EXPECT_NEAR(split_losses[k], whole_losses[k], 1e-5 * std::abs(whole_losses[k])) << "frame " << k;
    EXPECT_NEAR(split_spreads[k], whole_spreads[k], 1e-5 * std::abs(whole_spreads[k])) << "frame " << k;
  }
  if (rank == 0)
    std::printf("[ split ] %d rank(s): loss %.6g -> %.6g (whole frames: %.6g -> %.6g)\n", ranks,
                split_losses.front(), split_losses.back(), whole_losses.front(), whole_losses.back());
}

}  // namespace
}  // namespace otf::testing

// Every rank's result decides the job's: a test that failed on any rank fails everywhere. Each rank
// prints its own results (a failure names its rank).
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  // Ranks share the machine's cores; intra-op threads would oversubscribe them.
  torch::set_num_threads(1);
  ::testing::InitGoogleTest(&argc, argv);
  // An exception escaping a test on one rank must end the job, not let that rank run on into the
  // next test's collectives.
  GTEST_FLAG_SET(catch_exceptions, false);
  const int local_result = RUN_ALL_TESTS();
  int job_result = 0;
  MPI_Allreduce(&local_result, &job_result, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return job_result;
}
