// The committee's disagreement is an uncertainty: members trained on configurations agree on them
// much more than before, and disagree more on configurations unlike the training data. Labels come
// from a smooth Morse pair potential, the members are fitted with Adam on their own energies and
// forces (member-resolved prediction), in float32.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "committee_deviation.h"
#include "potential_test_support.h"

namespace otf::testing {
namespace {

struct Frame {
  NeighborGraph graph;
  torch::Tensor owner;          // [atoms] int64: owned atom of every atom (ghosts folded)
  int64_t num_local = 0;
  torch::Tensor energy;         // [1] float64
  torch::Tensor forces;         // [num_local, 3] float64
};

torch::Tensor fold(const torch::Tensor& forces, const Frame& frame) {
  return torch::zeros({frame.num_local, 3}, forces.options()).index_add(0, frame.owner, forces);
}

Frame labelled_frame(const PeriodicConfiguration& config, double cutoff) {
  const PeriodicSystem system(config, cutoff);
  Frame frame;
  frame.graph = neighbor_graph_from_view(system.view(), cutoff);
  frame.owner = torch::tensor(std::vector<int64_t>(system.owner().begin(), system.owner().end()));
  frame.num_local = system.num_local();
  const MorseLabels labels = morse_labels(frame.graph, cutoff);
  frame.energy = torch::tensor({labels.energy}, torch::kFloat64);
  frame.forces = fold(labels.forces, frame);
  return frame;
}

// Mean over atoms of the members' force standard deviation (|F_m - F_mean| RMS over members).
double force_spread(Potential& model, const std::vector<Frame>& frames) {
  double total = 0.0;
  int64_t atoms = 0;
  PredictionOptions options;
  options.member_forces = true;
  for (const Frame& frame : frames) {
    const Prediction p = predict(model, frame.graph, options);
    torch::Tensor members = torch::stack(
        [&] { std::vector<torch::Tensor> f; for (int64_t m = 0; m < p.member_forces.size(0); ++m) f.push_back(fold(p.member_forces[m], frame)); return f; }());
    const torch::Tensor deviation = committee_vector_deviation(members);
    total += deviation.sum().item<double>();
    atoms += frame.num_local;
  }
  return total / static_cast<double>(atoms);
}

TEST(CommitteeUncertainty, MembersAgreeMoreOnFittedConfigurationsThanOnUnseenOnes) {
  torch::manual_seed(0);
  ModelSpec spec = small_spec({"Ar"}, "float32", 4.5, 3);
  spec.committee_size = 4;
  const std::shared_ptr<Potential> model = create_potential(spec);

  std::vector<PeriodicConfiguration> train_configs, unseen_configs;
  for (uint64_t s = 0; s < 6; ++s) train_configs.push_back(random_configuration(16, 1, s % 2 == 1, 100 + s, 0.05, 2.2));
  // Unseen: much denser packing, a region of descriptor space the training data never reached.
  for (uint64_t s = 0; s < 3; ++s) unseen_configs.push_back(random_configuration(16, 1, false, 200 + s, 0.09, 1.9));
  std::vector<Frame> train, unseen;
  for (const auto& c : train_configs) train.push_back(labelled_frame(c, spec.cutoff));
  for (const auto& c : unseen_configs) unseen.push_back(labelled_frame(c, spec.cutoff));

  fit_statistics(*model, train_configs);
  std::vector<torch::Tensor> counts, energies;
  for (const Frame& f : train) {
    counts.push_back(torch::full({1, 1}, static_cast<double>(f.num_local), torch::kFloat64));
    energies.push_back(f.energy);
  }
  model->fit_energy_shifts(torch::cat(counts), torch::cat(energies));

  const double train_before = force_spread(*model, train);
  const double unseen_before = force_spread(*model, unseen);

  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(5e-3));
  PredictionOptions options;
  options.member_forces = true;
  options.create_graph = true;
  double first_loss = 0.0, last_loss = 0.0;
  for (int step = 0; step < 250; ++step) {
    optimizer.zero_grad();
    torch::Tensor loss = torch::zeros({}, torch::kFloat64);
    for (const Frame& frame : train) {
      const Prediction p = predict(*model, frame.graph, options);
      for (int64_t m = 0; m < p.member_forces.size(0); ++m) {
        const torch::Tensor forces = fold(p.member_forces[m], frame).to(torch::kFloat64);
        loss = loss + (forces - frame.forces).pow(2).mean() +
               ((p.member_energy[m] - frame.energy) / frame.num_local).pow(2).sum();
      }
    }
    loss.backward();
    optimizer.step();
    if (step == 0) first_loss = loss.item<double>();
    last_loss = loss.item<double>();
  }
  const double train_after = force_spread(*model, train);
  const double unseen_after = force_spread(*model, unseen);
  std::printf("loss %.4g -> %.4g; force spread on training frames %.4g -> %.4g, unseen %.4g -> %.4g eV/A\n",
              first_loss, last_loss, train_before, train_after, unseen_before, unseen_after);
  EXPECT_LT(last_loss, 0.1 * first_loss);
  EXPECT_GT(train_before, 0.0);
  EXPECT_GT(unseen_before, 0.0);  // untrained members disagree everywhere
  EXPECT_LT(train_after, 0.3 * train_before);
  EXPECT_GT(unseen_after, 2.0 * train_after);
}

}  // namespace
}  // namespace otf::testing
