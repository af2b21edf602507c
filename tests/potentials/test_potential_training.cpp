// The bridge between the potential and the training engine: a frame split over "ranks" (owned
// atoms, ghost centres near them) gives exactly the whole frame's energy, owned forces and virial;
// frame energies are summed over ranks without double-counting gradients; and the default
// potential trains through TrainingStrategy + MixedPrecisionHook in all three precisions.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "mixed_precision_hook.h"
#include "optimizer_factory.h"
#include "potential_test_support.h"
#include "potential_training.h"

namespace otf::testing {
namespace {

// One rank's part of a periodic frame: owned atoms `owned` (indices among the cell's atoms), every
// atom within the cutoff of an owned atom as a further centre (energy not counted), neighbours
// from an atom array with ghosts out to twice the cutoff.
NeighborGraph rank_part(const PeriodicSystem& wide, const std::set<int>& owned, double cutoff) {
  const std::vector<double>& x = wide.positions();
  const int atoms = wide.num_atoms();
  auto distance_sq = [&](int a, int b) {
    double d2 = 0.0;
    for (int d = 0; d < 3; ++d) d2 += (x[static_cast<std::size_t>(3 * a + d)] - x[static_cast<std::size_t>(3 * b + d)]) *
                                      (x[static_cast<std::size_t>(3 * a + d)] - x[static_cast<std::size_t>(3 * b + d)]);
    return d2;
  };
  std::vector<int64_t> centers;
  std::vector<bool> counted;
  for (int a = 0; a < atoms; ++a) {
    bool near = owned.count(a) > 0;
    for (int o : owned) near = near || distance_sq(a, o) < cutoff * cutoff;
    if (!near) continue;
    centers.push_back(a);
    counted.push_back(owned.count(a) > 0);
  }
  std::vector<std::vector<int64_t>> lists(centers.size());
  int64_t width = 1;
  for (std::size_t c = 0; c < centers.size(); ++c) {
    for (int b = 0; b < atoms; ++b) {
      if (b != centers[c] && distance_sq(static_cast<int>(centers[c]), b) < cutoff * cutoff) lists[c].push_back(b);
    }
    width = std::max<int64_t>(width, static_cast<int64_t>(lists[c].size()));
  }
  NeighborGraph graph;
  graph.positions = torch::tensor(x, torch::kFloat64).reshape({atoms, 3});
  const AtomicSystemView view = wide.view();
  graph.species = torch::from_blob(const_cast<int*>(view.species), {atoms}, torch::kInt32).to(torch::kInt64);
  graph.centers = torch::tensor(centers, torch::kInt64);
  graph.neighbor_index = torch::full({static_cast<int64_t>(centers.size()), width}, -1, torch::kInt64);
  for (std::size_t c = 0; c < centers.size(); ++c) {
    for (std::size_t k = 0; k < lists[c].size(); ++k) graph.neighbor_index[static_cast<int64_t>(c)][static_cast<int64_t>(k)] = lists[c][k];
  }
  graph.center_frame = torch::zeros({static_cast<int64_t>(centers.size())}, torch::kInt64);
  std::vector<uint8_t> mask(counted.begin(), counted.end());
  graph.center_energy_mask = torch::tensor(std::vector<int64_t>(mask.begin(), mask.end())).to(torch::kBool);
  return graph;
}

TEST(PotentialTraining, AFrameSplitOverRanksGivesTheWholeFramesEnergyForcesAndVirial) {
  const PeriodicConfiguration config = random_configuration(24, 2, true, 31);
  const std::shared_ptr<Potential> model = create_potential(small_spec({"Si", "C"}, "float64"));
  fit_statistics(*model, {config});
  const double cutoff = model->cutoff();

  const PeriodicSystem system(config, cutoff);
  PredictionOptions options;
  options.virial = true;
  const Prediction whole = predict(*model, neighbor_graph_from_view(system.view(), cutoff), options);
  const torch::Tensor owner = torch::tensor(std::vector<int64_t>(system.owner().begin(), system.owner().end()));
  const torch::Tensor whole_forces = torch::zeros({system.num_local(), 3}, torch::kFloat64).index_add(0, owner, whole.forces);

  // Two "ranks": a spatial half each (by the first fractional coordinate).
  const PeriodicSystem wide(config, 2.0 * cutoff + 0.1);
  std::set<int> halves[2];
  for (int i = 0; i < wide.num_local(); ++i) {
    halves[wide.positions()[static_cast<std::size_t>(3 * i)] < 0.5 * config.cell[0][0] ? 0 : 1].insert(i);
  }
  ASSERT_FALSE(halves[0].empty());
  ASSERT_FALSE(halves[1].empty());
  double energy = 0.0;
  torch::Tensor virial = torch::zeros({3, 3}, torch::kFloat64);
  torch::Tensor forces = torch::zeros({wide.num_local(), 3}, torch::kFloat64);
  for (const auto& owned : halves) {
    const Prediction part = predict(*model, rank_part(wide, owned, cutoff), options);
    energy += part.energy.item<double>();
    virial += part.virial[0];
    for (int i : owned) forces[i] = part.forces[i];  // owned atoms' forces: exact, no folding
  }
  EXPECT_NEAR(energy, whole.energy.item<double>(), 1e-10 * std::abs(energy));
  EXPECT_TRUE(torch::allclose(forces, whole_forces, 1e-10, 1e-10));
  EXPECT_TRUE(torch::allclose(virial, whole.virial[0], 1e-10, 1e-10));
}

// One process holding the whole frame folds instead: owned centres only, ghost images hand their
// forces to their atoms (force_owner). The training function's forces on the owned atoms are the
// whole frame's, also for frames concatenated into a batch (owners shifted with the atoms).
TEST(PotentialTraining, FoldedImagesGiveTheOwnedForcesInABatchOfFrames) {
  const std::shared_ptr<Potential> model = create_potential(small_spec({"Si", "C"}, "float64"));
  const double cutoff = model->cutoff();
  std::vector<TrainingBatch> frames;
  std::vector<torch::Tensor> expected;
  for (uint64_t seed : {41, 42}) {
    const PeriodicConfiguration config = random_configuration(16, 2, seed == 42, seed);
    if (frames.empty()) fit_statistics(*model, {config});
    const PeriodicSystem system(config, cutoff);
    const NeighborGraph graph = neighbor_graph_from_view(system.view(), cutoff);
    const torch::Tensor owner =
        torch::tensor(std::vector<int64_t>(system.owner().begin(), system.owner().end()));
    const Prediction whole = predict(*model, graph);
    const torch::Tensor owned_forces = torch::zeros({system.num_local(), 3}, torch::kFloat64)
                                           .index_add(0, owner, whole.forces);
    expected.push_back(owned_forces);
    FrameLabels labels;
    labels.energy = whole.energy.item<double>();
    labels.forces = torch::zeros({system.num_atoms(), 3}, torch::kFloat64);
    labels.force_mask = torch::arange(system.num_atoms()) < system.num_local();
    labels.atoms_in_frame = system.num_local();
    labels.force_owner = owner;
    frames.push_back(labelled_frame(graph, labels));
  }
  PotentialTrainingOptions options;
  options.train_members = false;
  const TrainingFunction train = potential_training_function(options);
  const TrainingBatch batch = concatenate_frames(frames);
  ASSERT_TRUE(batch.contains("force_owner"));
  const torch::Tensor forces = train({{"main", model}}, batch).at("forces").detach();
  const torch::Tensor mask = batch.at("force_mask");
  const torch::Tensor owned = forces.index({mask});
  const torch::Tensor reference = torch::cat(expected);
  ASSERT_EQ(owned.sizes(), reference.sizes());
  EXPECT_TRUE(torch::allclose(owned, reference, 1e-10, 1e-10));
  // Images keep no force of their own after folding.
  EXPECT_EQ(forces.index({mask.logical_not()}).abs().max().item<double>(), 0.0);
  // Without owners the images' forces stay where they are: the owned rows differ.
  std::map<std::string, torch::Tensor> without_owner = batch.tensors();
  without_owner.erase("force_owner");
  const TrainingBatch unfolded(without_owner);
  const torch::Tensor raw = train({{"main", model}}, unfolded).at("forces").detach().index({mask});
  EXPECT_FALSE(torch::allclose(raw, reference, 1e-6, 1e-6));
}

// A stand-in for the other ranks: all_reduce_sum adds what they would contribute.
class OtherRanks final : public Communicator {
 public:
  explicit OtherRanks(torch::Tensor others) : others_(std::move(others)) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void all_reduce_sum(const std::vector<torch::Tensor>& tensors) override { tensors[0].add_(others_); }
  void all_reduce_max(const std::vector<torch::Tensor>&) override {}
  void broadcast(const std::vector<torch::Tensor>&, int) override {}
  double all_reduce_sum(double value) override { return value; }
  // The other ranks have no rows for this one.
  std::vector<torch::Tensor> exchange_rows(const std::vector<torch::Tensor>& send) override {
    std::vector<torch::Tensor> received;
    for (std::size_t r = 0; r < send.size(); ++r)
      received.push_back(static_cast<int>(r) == rank() ? send[r] : send[r].narrow(0, 0, 0));
    return received;
  }

 private:
  torch::Tensor others_;
};

// Labelled frames as one process holding every atom stores them: its atoms owned, ghost centres
// near them (rank_part), so that predicted forces on owned atoms are exact without folding.
std::vector<TrainingBatch> morse_frames(int count, double cutoff, uint64_t seed) {
  std::vector<TrainingBatch> frames;
  for (int f = 0; f < count; ++f) {
    const PeriodicConfiguration config =
        random_configuration(12, 1, f % 2 == 1, seed + static_cast<uint64_t>(f), 0.05, 2.2);
    const PeriodicSystem cell(config, cutoff);
    const PeriodicSystem wide(config, 2.0 * cutoff + 0.1);
    std::set<int> everything;
    for (int i = 0; i < wide.num_local(); ++i) everything.insert(i);
    const NeighborGraph graph = rank_part(wide, everything, cutoff);
    FrameLabels labels;
    labels.energy = morse_labels(neighbor_graph_from_view(cell.view(), cutoff), cutoff).energy;
    labels.forces = morse_labels(graph, cutoff).forces;  // exact on the owned atoms
    labels.force_mask = torch::arange(wide.num_atoms()) < wide.num_local();
    labels.atoms_in_frame = wide.num_local();
    frames.push_back(labelled_frame(graph, labels));
  }
  return frames;
}

TEST(PotentialTraining, FrameEnergiesAreSummedOverRanksWithoutDoublingGradients) {
  const std::vector<TrainingBatch> frames = morse_frames(2, 4.5, 50);
  const TrainingBatch batch = concatenate_frames(frames);
  ModelSpec spec = small_spec({"Ar"}, "float64", 4.5);
  const std::shared_ptr<Potential> model = create_potential(spec);
  NamedModels models{{"main", model}};
  PotentialTrainingOptions alone;
  alone.train_members = false;
  PotentialTrainingOptions with_others = alone;
  const torch::Tensor others = torch::tensor({10.0, -3.0}, torch::kFloat64);
  with_others.communicator = std::make_shared<OtherRanks>(others);
  const Predictions mine = potential_training_function(alone)(models, batch);
  const Predictions summed = potential_training_function(with_others)(models, batch);
  EXPECT_TRUE(torch::allclose(summed.at("energy"), mine.at("energy") + others));
  const auto parameter = model->parameters()[0];
  const torch::Tensor g_mine = torch::autograd::grad({mine.at("energy").sum()}, {parameter})[0];
  const torch::Tensor g_summed = torch::autograd::grad({summed.at("energy").sum()}, {parameter})[0];
  EXPECT_TRUE(torch::equal(g_mine, g_summed));
}

double force_rmse(Potential& model, const std::vector<TrainingBatch>& frames) {
  double sum = 0.0;
  int64_t count = 0;
  for (const TrainingBatch& frame : frames) {
    const Prediction p = predict(model, neighbor_graph_from_batch(frame));
    const torch::Tensor mask = frame.at("force_mask");
    sum += (p.forces.to(torch::kFloat64) - frame.at("forces")).index({mask}).pow(2).sum().item<double>();
    count += 3 * mask.sum().item<int64_t>();
  }
  return std::sqrt(sum / static_cast<double>(count));
}

class TrainsInEveryPrecision : public ::testing::TestWithParam<Precision> {};

TEST_P(TrainsInEveryPrecision, ForceErrorFallsFivefold) {
  const Precision precision = GetParam();
  const double cutoff = 4.5;
  const std::vector<TrainingBatch> frames = morse_frames(4, cutoff, 70);
  ModelSpec spec = small_spec({"Ar"}, "float32", cutoff, 5);
  spec.committee_size = 2;
  const std::shared_ptr<Potential> model = create_potential(spec);
  for (const TrainingBatch& frame : frames) {
    model->accumulate_descriptor_statistics(model->descriptor_moments(
        local_environments(neighbor_graph_from_batch(frame), 1, cutoff, model->dtype())));
  }
  const TrainingBatch batch = concatenate_frames(frames);
  model->fit_energy_shifts(batch.at("atoms_per_frame").reshape({-1, 1}), batch.at("energy"));
  const double before = force_rmse(*model, frames);

  ComposedLossSettings loss;
  loss.energy = WeightedLoss<EnergyLossOptions>{0.1, {}};
  loss.energy->options.per_atom = true;
  loss.forces = WeightedLoss<ForceLossOptions>{1.0, {}};
  TrainingStrategyOptions options;
  options.models["main"] = model;
  options.training_fn = potential_training_function({});
  options.loss_fn = potential_loss_function(std::make_shared<ComposedLoss>(loss), spec.committee_size, true);
  OptimizerConfig adam;
  adam.make_optimizer = [](std::vector<torch::Tensor> parameters) {
    return std::make_unique<torch::optim::Adam>(std::move(parameters), torch::optim::AdamOptions(1e-2));
  };
  options.optimizer_configs = {adam};
  options.hooks = {std::make_shared<MixedPrecisionHook>(precision)};
  TrainingStrategy strategy(std::move(options));
  TrainingStrategy::Scope scope(strategy);
  int skipped = 0;
  for (int step = 0; step < 80; ++step) skipped += strategy.train_batch(batch) ? 0 : 1;
  scope.close();
  const double after = force_rmse(*model, frames);
  std::printf("%s: force RMSE %.4f -> %.4f eV/A over 80 batches (%d skipped)\n",
              to_string(precision).c_str(), before, after, skipped);
  EXPECT_LT(after, before / 5.0);
  for (const auto& p : model->parameters()) EXPECT_TRUE(torch::isfinite(p).all().item<bool>());
}

INSTANTIATE_TEST_SUITE_P(Precisions, TrainsInEveryPrecision,
                         ::testing::Values(Precision::Float32, Precision::BFloat16, Precision::Float16),
                         [](const auto& info) { return to_string(info.param); });

}  // namespace
}  // namespace otf::testing
