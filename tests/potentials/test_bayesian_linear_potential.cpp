// The "bayesian-linear" architecture (potentials/bayesian_linear_potential.h) and its closed-form
// fit (potentials/bayesian_linear_training.h): the fit's rows are the model's own energy and
// forces (a teacher of the model's class is recovered exactly from a few frames, two elements,
// images folded), the committee is antithetic posterior draws whose mean is the posterior mean,
// the shared member gradients equal the generic ones, a model file keeps it, and bad
// hyperparameters are refused by name.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "bayesian_linear_potential.h"
#include "bayesian_linear_training.h"
#include "model_file.h"
#include "neighbor_graph.h"
#include "periodic_system.h"
#include "potential_registry.h"
#include "potential_test_support.h"
#include "potential_training.h"

namespace otf {
namespace {

ModelSpec bayesian_spec(int64_t degree, int64_t members = 4) {
  ModelSpec spec;
  spec.architecture = BayesianLinearPotential::kArchitecture;
  spec.elements = {"Si", "C"};
  spec.cutoff = 4.0;
  spec.dtype = "float64";
  spec.seed = 11;
  spec.committee_size = members;
  spec.hyperparameters = {{"radial_functions", 4},
                          {"angular_radial_functions", 2},
                          {"max_angular_order", 1},
                          {"degree", degree}};
  return spec;
}

std::shared_ptr<BayesianLinearPotential> make_model(const ModelSpec& spec) {
  auto model = std::dynamic_pointer_cast<BayesianLinearPotential>(create_potential(spec));
  EXPECT_TRUE(model != nullptr);
  return model;
}

std::vector<PeriodicConfiguration> configurations(std::initializer_list<uint64_t> seeds) {
  std::vector<PeriodicConfiguration> out;
  for (const uint64_t seed : seeds)
    out.push_back(testing::random_configuration(16, 2, seed % 2 == 0, seed, 0.06, 1.7));
  return out;
}

struct OwnedPrediction {
  double energy;
  torch::Tensor forces;  // [owned atoms, 3]
};

OwnedPrediction predict_owned(Potential& model, const PeriodicConfiguration& configuration) {
  const PeriodicSystem system(configuration, model.cutoff());
  const NeighborGraph graph = neighbor_graph_from_view(system.view(), model.cutoff());
  const Prediction whole = predict(model, graph);
  const torch::Tensor owner =
      torch::tensor(std::vector<int64_t>(system.owner().begin(), system.owner().end()));
  return {whole.energy.item<double>(),
          torch::zeros({system.num_local(), 3}, torch::kFloat64)
              .index_add(0, owner, whole.forces.detach().to(torch::kFloat64))};
}

// The teacher's energy and forces as a stored training frame (images folded by force_owner).
TrainingBatch labelled_by(Potential& teacher, const PeriodicConfiguration& configuration) {
  const PeriodicSystem system(configuration, teacher.cutoff());
  const NeighborGraph graph = neighbor_graph_from_view(system.view(), teacher.cutoff());
  const OwnedPrediction answer = predict_owned(teacher, configuration);
  FrameLabels labels;
  labels.energy = answer.energy;
  labels.forces = torch::zeros({system.num_atoms(), 3}, torch::kFloat64);
  labels.forces.narrow(0, 0, system.num_local()).copy_(answer.forces);
  labels.force_mask = torch::arange(system.num_atoms()) < system.num_local();
  labels.atoms_in_frame = system.num_local();
  labels.force_owner =
      torch::tensor(std::vector<int64_t>(system.owner().begin(), system.owner().end()));
  return labelled_frame(graph, labels);
}

// A teacher of the model's own class: random weights (a tiny posterior around them).
std::shared_ptr<BayesianLinearPotential> teacher_model(const ModelSpec& spec,
                                                       const std::vector<PeriodicConfiguration>& statistics) {
  auto teacher = make_model(spec);
  testing::fit_statistics(*teacher, statistics);
  teacher->freeze_descriptor_statistics();
  torch::manual_seed(5);
  BayesianPosterior posterior;
  posterior.mean = 0.05 * torch::randn({teacher->num_weights()}, torch::kFloat64);
  posterior.covariance = 1e-24 * torch::eye(teacher->num_weights(), torch::kFloat64);
  teacher->set_posterior(posterior);
  return teacher;
}

std::shared_ptr<BayesianLinearPotential> student_of(const ModelSpec& spec,
                                                    const std::vector<PeriodicConfiguration>& statistics) {
  auto student = make_model(spec);
  testing::fit_statistics(*student, statistics);
  student->freeze_descriptor_statistics();
  return student;
}

TEST(BayesianLinearPotential, RecoversATeacherOfItsClassFromAFewFrames) {
  const ModelSpec spec = bayesian_spec(1);
  const std::vector<PeriodicConfiguration> training = configurations({3, 4, 5});
  auto teacher = teacher_model(spec, training);
  auto student = student_of(spec, training);
  EXPECT_FALSE(student->fitted());
  std::vector<TrainingBatch> frames;
  for (const PeriodicConfiguration& c : training) frames.push_back(labelled_by(*teacher, c));
  const BayesianPosterior posterior = fit_bayesian_linear(*student, frames, nullptr);
  EXPECT_TRUE(student->fitted());
  EXPECT_EQ(student->fits(), 1);
  EXPECT_LT(student->force_noise(), 1e-3);

  // A configuration the fit never saw, and its periodic images folded.
  const PeriodicConfiguration unseen = configurations({8}).front();
  const OwnedPrediction expected = predict_owned(*teacher, unseen);
  const OwnedPrediction actual = predict_owned(*student, unseen);
  const double scale = expected.forces.abs().max().item<double>();
  EXPECT_GT(scale, 1e-3);
  EXPECT_LT((actual.forces - expected.forces).abs().max().item<double>(), 1e-4 * scale);
  EXPECT_NEAR(actual.energy, expected.energy, 1e-4 * std::abs(expected.energy) + 1e-6);
}

// Rows kept between fits (FrameRowsCache): each refit after a new frame, or after a frame left the
// buffer, or after the basis changed, gives the bits a fit from scratch gives.
TEST(BayesianLinearPotential, KeptFrameRowsRefitToTheSameBits) {
  const ModelSpec spec = bayesian_spec(1);
  const std::vector<PeriodicConfiguration> training = configurations({3, 4, 5, 6});
  auto teacher = teacher_model(spec, training);
  auto kept_student = student_of(spec, training);
  auto fresh_student = student_of(spec, training);
  std::vector<TrainingBatch> all;
  for (const PeriodicConfiguration& c : training) all.push_back(labelled_by(*teacher, c));
  FrameRowsCache cache;
  const auto expect_same = [&](const std::vector<TrainingBatch>& frames, std::size_t kept_after) {
    const NormalEquations with = bayesian_normal_equations(*kept_student, frames, nullptr, &cache);
    const NormalEquations without = bayesian_normal_equations(*fresh_student, frames, nullptr);
    EXPECT_TRUE(torch::equal(with.gram_force, without.gram_force));
    EXPECT_TRUE(torch::equal(with.moment_force, without.moment_force));
    EXPECT_TRUE(torch::equal(with.gram_energy, without.gram_energy));
    EXPECT_TRUE(torch::equal(with.moment_energy, without.moment_energy));
    EXPECT_EQ(with.squares_force, without.squares_force);
    EXPECT_EQ(with.count_force, without.count_force);
    EXPECT_EQ(with.squares_energy, without.squares_energy);
    EXPECT_EQ(cache.frames(), kept_after);
  };
  std::vector<TrainingBatch> frames;
  for (std::size_t k = 0; k < all.size(); ++k) {
    frames.push_back(all[k]);  // a new label: its rows are computed, the others' kept
    expect_same(frames, k + 1);
  }
  frames.erase(frames.begin());  // the oldest frame left the buffer: its rows are dropped
  expect_same(frames, all.size() - 1);
  // Copies of a frame share its tensors, and so its kept rows.
  std::vector<TrainingBatch> copies(frames.begin(), frames.end());
  expect_same(copies, frames.size());
  // Another basis (the energy shifts moved): nothing kept is used.
  kept_student->energy_shifts().add_(0.5);  // the buffer itself
  fresh_student->energy_shifts().add_(0.5);
  expect_same(frames, frames.size());
  const BayesianPosterior a = fit_bayesian_linear(*kept_student, frames, nullptr, {}, &cache);
  const BayesianPosterior b = fit_bayesian_linear(*fresh_student, frames, nullptr);
  EXPECT_TRUE(torch::equal(a.mean, b.mean));
}

TEST(BayesianLinearPotential, QuadraticBasisFitsItsTrainingFrames) {
  const ModelSpec spec = bayesian_spec(2);
  const std::vector<PeriodicConfiguration> training = configurations({3, 4, 5});
  auto teacher = teacher_model(spec, training);
  auto student = student_of(spec, training);
  std::vector<TrainingBatch> frames;
  for (const PeriodicConfiguration& c : training) frames.push_back(labelled_by(*teacher, c));
  fit_bayesian_linear(*student, frames, nullptr);
  for (const PeriodicConfiguration& c : training) {
    const OwnedPrediction expected = predict_owned(*teacher, c);
    const OwnedPrediction actual = predict_owned(*student, c);
    const double scale = expected.forces.abs().max().item<double>();
    EXPECT_LT((actual.forces - expected.forces).abs().max().item<double>(), 1e-3 * scale);
  }
}

TEST(BayesianLinearPotential, CommitteeIsAntitheticDrawsAroundThePosteriorMean) {
  const ModelSpec spec = bayesian_spec(1, 5);
  const std::vector<PeriodicConfiguration> training = configurations({3});
  auto teacher = teacher_model(spec, configurations({3, 4}));
  std::vector<TrainingBatch> frames{labelled_by(*teacher, training[0])};
  auto first = student_of(spec, training);
  auto second = student_of(spec, training);
  const BayesianPosterior posterior = fit_bayesian_linear(*first, frames, nullptr);
  fit_bayesian_linear(*second, frames, nullptr);
  const torch::Tensor weights = first->named_parameters()["weights"].detach().reshape({5, -1}).clone();
  // The same fit draws the same members (every rank, and a restarted run, alike).
  EXPECT_TRUE(torch::equal(weights, second->named_parameters()["weights"].detach().reshape({5, -1})));
  EXPECT_LT((weights.mean(0) - posterior.mean).abs().max().item<double>(), 1e-12);
  EXPECT_LT((weights[4] - posterior.mean).abs().max().item<double>(), 1e-15);
  EXPECT_LT((weights[0] + weights[1] - 2 * posterior.mean).abs().max().item<double>(), 1e-12);
  EXPECT_GT((weights[0] - weights[2]).abs().max().item<double>(), 0.0);
  // One frame leaves most directions to the prior: the members disagree on an unseen one.
  const PeriodicConfiguration unseen = configurations({8}).front();
  const PeriodicSystem system(unseen, first->cutoff());
  const NeighborGraph graph = neighbor_graph_from_view(system.view(), first->cutoff());
  PredictionOptions options;
  options.member_forces = true;
  const Prediction members = predict(*first, graph, options);
  EXPECT_GT(members.member_forces.std(0).max().item<double>(), 1e-4);
  // A second fit draws anew.
  fit_bayesian_linear(*first, frames, nullptr);
  EXPECT_EQ(first->fits(), 2);
  EXPECT_FALSE(torch::equal(weights, first->named_parameters()["weights"].detach().reshape({5, -1})));
}

TEST(BayesianLinearPotential, SharedMemberGradientsEqualTheGenericOnes) {
  const ModelSpec spec = bayesian_spec(2, 4);
  const std::vector<PeriodicConfiguration> training = configurations({3, 4});
  auto model = teacher_model(spec, training);
  BayesianPosterior posterior;
  posterior.mean = 0.05 * torch::randn({model->num_weights()}, torch::kFloat64);
  posterior.covariance = 1e-4 * torch::eye(model->num_weights(), torch::kFloat64);
  model->set_posterior(posterior);
  const PeriodicSystem system(configurations({6}).front(), model->cutoff());
  const NeighborGraph graph = neighbor_graph_from_view(system.view(), model->cutoff());
  PredictionOptions shared, generic;
  shared.member_forces = generic.member_forces = true;
  generic.shared_member_work = false;
  const Prediction a = predict(*model, graph, shared);
  const Prediction b = predict(*model, graph, generic);
  EXPECT_TRUE(torch::allclose(a.member_atomic_energies, b.member_atomic_energies, 1e-12, 1e-12));
  EXPECT_TRUE(torch::allclose(a.member_forces, b.member_forces, 1e-10, 1e-12));
  EXPECT_TRUE(torch::allclose(a.member_virial, b.member_virial, 1e-10, 1e-12));
  // And the committee mean's forces are those of predict() without members.
  const Prediction mean = predict(*model, graph);
  EXPECT_TRUE(torch::allclose(a.forces, mean.forces, 1e-10, 1e-12));
}

TEST(BayesianLinearPotential, AModelFileKeepsTheFittedCommittee) {
  const ModelSpec spec = bayesian_spec(1);
  const std::vector<PeriodicConfiguration> training = configurations({3, 4});
  auto teacher = teacher_model(spec, training);
  const std::string path =
      (std::filesystem::temp_directory_path() / "otf_bayesian_linear_test.otf").string();
  save_model(*teacher, path);
  const std::shared_ptr<Potential> loaded = load_model(path);
  std::filesystem::remove(path);
  auto reloaded = std::dynamic_pointer_cast<BayesianLinearPotential>(loaded);
  ASSERT_TRUE(reloaded != nullptr);
  EXPECT_EQ(reloaded->fits(), 1);
  EXPECT_EQ(reloaded->spec().hyperparameters.at("degree"), 1);
  const PeriodicConfiguration probe = configurations({6}).front();
  EXPECT_TRUE(torch::equal(predict_owned(*teacher, probe).forces, predict_owned(*reloaded, probe).forces));
}

TEST(BayesianLinearPotential, RefusesBadHyperparametersByName) {
  ModelSpec spec = bayesian_spec(3);
  try {
    create_potential(spec);
    FAIL() << "degree 3 accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("'degree'"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("must be 1"), std::string::npos) << error.what();
  }
  spec = bayesian_spec(1);
  spec.hyperparameters["hidden"] = {16};
  try {
    create_potential(spec);
    FAIL() << "hidden accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("unknown hyperparameter 'hidden'"), std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("degree"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace otf
