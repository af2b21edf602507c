// The default potential's physics: forces and virials are exact derivatives of its energy, the
// energy has the symmetries of physics and is smooth at the cutoff, the evaluator's chunked fast
// path equals the differentiable training path, and the committee's disagreement is an
// uncertainty (large where the model has not been fitted, smaller where it has).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <utility>

#include "autocast_region.h"
#include "behler_parrinello_potential.h"
#include "pair_moments.h"
#include "potential_test_support.h"

namespace otf::testing {
namespace {

double relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

std::shared_ptr<Potential> fitted_model(const std::string& dtype,
                                        const std::vector<PeriodicConfiguration>& configs) {
  std::shared_ptr<Potential> potential = create_potential(small_spec({"Si", "C"}, dtype));
  fit_statistics(*potential, configs);
  return potential;
}

PeriodicConfiguration strained(const PeriodicConfiguration& config, int a, int b, double epsilon) {
  PeriodicConfiguration out = config;
  auto deform = [&](double* v) { v[a] += epsilon * v[b]; };
  for (auto& row : out.cell) deform(row.data());
  for (int i = 0; i < out.num_atoms(); ++i) deform(&out.positions[static_cast<std::size_t>(3 * i)]);
  return out;
}

struct DerivativeCase {
  std::string dtype;
  bool triclinic;
};

class EnergyDerivatives : public ::testing::TestWithParam<DerivativeCase> {};

// Forces equal -dE/dx by central differences and the virial equals -dE/d(strain). A float32
// model's own energy cannot resolve a finite difference to 1e-4 (its per-atom energies carry
// float32 rounding), so its forces are compared with the differences of the same weights
// evaluated in float64: what is tested is that the float32 forces are the derivative.
TEST_P(EnergyDerivatives, ForcesAndVirialAreDerivativesOfTheEnergy) {
  const DerivativeCase param = GetParam();
  const PeriodicConfiguration config = random_configuration(20, 2, param.triclinic, 11);
  const std::shared_ptr<Potential> model = fitted_model(param.dtype, {config});
  const std::shared_ptr<Potential> reference = with_dtype(*model, "float64");
  PotentialEvaluator evaluator(model, {});
  PotentialEvaluator reference_evaluator(reference, {});
  const double tolerance = param.dtype == "float64" ? 1e-7 : 1e-4;
  const double h = 1e-5;

  const EnergyForcesVirial result = evaluate_configuration(evaluator, config);
  std::vector<double> differences(result.forces.size());
  for (std::size_t k = 0; k < config.positions.size(); ++k) {
    PeriodicConfiguration plus = config, minus = config;
    plus.positions[k] += h;
    minus.positions[k] -= h;
    differences[k] = -(evaluate_configuration(reference_evaluator, plus).energy -
                       evaluate_configuration(reference_evaluator, minus).energy) / (2 * h);
  }
  const double force_error = relative_difference(result.forces, differences);
  EXPECT_LT(force_error, tolerance);

  // virial[b][a] = -dE/d(eps_ab) for x_a += eps_ab x_b; order xx yy zz xy xz yz.
  const int pairs[6][2] = {{0, 0}, {1, 1}, {2, 2}, {0, 1}, {0, 2}, {1, 2}};
  std::vector<double> virial(result.virial.begin(), result.virial.end()), strain_derivative(6);
  for (int v = 0; v < 6; ++v) {
    const int a = pairs[v][0], b = pairs[v][1];
    strain_derivative[static_cast<std::size_t>(v)] =
        -(evaluate_configuration(reference_evaluator, strained(config, b, a, h)).energy -
          evaluate_configuration(reference_evaluator, strained(config, b, a, -h)).energy) / (2 * h);
  }
  const double virial_error = relative_difference(virial, strain_derivative);
  EXPECT_LT(virial_error, tolerance);
  std::printf("%s %s: force error %.2e, virial error %.2e (relative)\n", param.dtype.c_str(),
              param.triclinic ? "triclinic" : "orthogonal", force_error, virial_error);
}

INSTANTIATE_TEST_SUITE_P(Models, EnergyDerivatives,
                         ::testing::Values(DerivativeCase{"float64", false}, DerivativeCase{"float64", true},
                                           DerivativeCase{"float32", false}, DerivativeCase{"float32", true}),
                         [](const auto& info) {
                           return info.param.dtype + (info.param.triclinic ? "_triclinic" : "_orthogonal");
                         });

TEST(BehlerParrinello, EnergyIsInvariantUnderRotationTranslationAndPermutation) {
  const PeriodicConfiguration config = random_configuration(24, 2, true, 5);
  const std::shared_ptr<Potential> model = fitted_model("float64", {config});
  PotentialEvaluator evaluator(model, {});
  const double energy = evaluate_configuration(evaluator, config).energy;

  // A rotation about a skew axis, applied to the cell and the atoms.
  const torch::Tensor axis = torch::tensor({0.3, -0.5, 0.8}, torch::kFloat64);
  const torch::Tensor k = axis / axis.norm();
  const double angle = 0.7;
  const torch::Tensor cross = torch::tensor({{0.0, -k[2].item<double>(), k[1].item<double>()},
                                             {k[2].item<double>(), 0.0, -k[0].item<double>()},
                                             {-k[1].item<double>(), k[0].item<double>(), 0.0}}, torch::kFloat64);
  const torch::Tensor rotation = torch::eye(3, torch::kFloat64) + std::sin(angle) * cross +
                                 (1 - std::cos(angle)) * cross.matmul(cross);
  auto rotate = [&](double* v) {
    const torch::Tensor r = rotation.matmul(torch::tensor({v[0], v[1], v[2]}, torch::kFloat64));
    for (int d = 0; d < 3; ++d) v[d] = r[d].item<double>();
  };
  PeriodicConfiguration rotated = config;
  for (auto& row : rotated.cell) rotate(row.data());
  for (int i = 0; i < rotated.num_atoms(); ++i) rotate(&rotated.positions[static_cast<std::size_t>(3 * i)]);
  EXPECT_NEAR(evaluate_configuration(evaluator, rotated).energy, energy, 1e-10 * std::abs(energy));

  PeriodicConfiguration translated = config;
  for (int i = 0; i < translated.num_atoms(); ++i) {
    translated.positions[static_cast<std::size_t>(3 * i)] += 3.7;
    translated.positions[static_cast<std::size_t>(3 * i + 1)] -= 1.3;
    translated.positions[static_cast<std::size_t>(3 * i + 2)] += 0.4;
  }
  EXPECT_NEAR(evaluate_configuration(evaluator, translated).energy, energy, 1e-10 * std::abs(energy));

  PeriodicConfiguration permuted;
  permuted.cell = config.cell;
  std::vector<int> order(static_cast<std::size_t>(config.num_atoms()));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(3));
  for (int i : order) {
    permuted.positions.insert(permuted.positions.end(), config.positions.begin() + 3 * i,
                              config.positions.begin() + 3 * i + 3);
    permuted.species.push_back(config.species[static_cast<std::size_t>(i)]);
  }
  EXPECT_NEAR(evaluate_configuration(evaluator, permuted).energy, energy, 1e-10 * std::abs(energy));

  // Swapping the elements of two atoms is not a symmetry: the energy must notice.
  PeriodicConfiguration swapped = config;
  std::swap(swapped.species[0], swapped.species[1]);
  EXPECT_GT(std::abs(evaluate_configuration(evaluator, swapped).energy - energy), 1e-6);
}

// A neighbour crossing the cutoff changes neither the energy nor the forces abruptly: the cutoff
// function and its first two derivatives vanish there.
TEST(BehlerParrinello, EnergyAndForcesAreSmoothAtTheCutoff) {
  const std::shared_ptr<Potential> model = create_potential(small_spec({"Si", "C"}, "float64"));
  PotentialEvaluator evaluator(model, {});
  const double cutoff = model->cutoff();
  // Two bonded atoms and a third whose distance to atom 0 crosses the cutoff, in a big cell.
  auto trimer = [&](double distance) {
    PeriodicConfiguration config;
    config.cell = {{{40.0, 0, 0}, {0, 40.0, 0}, {0, 0, 40.0}}};
    config.positions = {10.0, 10.0, 10.0, 12.2, 10.3, 10.0, 10.0 - distance * 0.6, 10.0 + distance * 0.8, 10.0};
    config.species = {0, 1, 0};
    return evaluate_configuration(evaluator, config);
  };
  const EnergyForcesVirial inside = trimer(cutoff - 1e-6), outside = trimer(cutoff + 1e-6);
  const EnergyForcesVirial far = trimer(cutoff + 0.5);
  EXPECT_NEAR(inside.energy, outside.energy, 1e-12);
  EXPECT_DOUBLE_EQ(outside.energy, far.energy);  // beyond the cutoff: exactly no interaction
  for (std::size_t k = 0; k < inside.forces.size(); ++k) {
    EXPECT_NEAR(inside.forces[k], outside.forces[k], 1e-9) << "component " << k;
  }
  // Approaching the cutoff the force on the third atom goes to 0 like (cutoff - r)^2.
  const double near = std::abs(trimer(cutoff - 1e-2).forces[7]);
  const double nearer = std::abs(trimer(cutoff - 1e-3).forces[7]);
  EXPECT_LT(nearer, 0.05 * near + 1e-12);
}

TEST(BehlerParrinello, PerAtomEnergiesAndVirialsSumToTheTotals) {
  const PeriodicConfiguration config = random_configuration(20, 2, true, 21);
  const std::shared_ptr<Potential> model = fitted_model("float64", {config});
  PotentialEvaluator evaluator(model, {});
  const EnergyForcesVirial result = evaluate_configuration(evaluator, config);
  EXPECT_NEAR(std::accumulate(result.atom_energy.begin(), result.atom_energy.end(), 0.0),
              result.energy, 1e-10 * std::abs(result.energy));
  for (std::size_t a = 0; a < 6; ++a) {
    double sum = 0.0;
    for (std::size_t i = 0; i < result.atom_energy.size(); ++i) sum += result.atom_virial[6 * i + a];
    EXPECT_NEAR(sum, result.virial[a], 1e-10 * (1.0 + std::abs(result.virial[a])));
  }
  double force_sum[3] = {0, 0, 0};  // Newton's third law: no net force in a periodic cell
  for (std::size_t k = 0; k < result.forces.size(); ++k) force_sum[k % 3] += result.forces[k];
  for (double f : force_sum) EXPECT_NEAR(f, 0.0, 1e-10);
}

TEST(BehlerParrinello, TrainingPathEqualsTheEvaluatorAndChunkSizeDoesNotMatter) {
  const PeriodicConfiguration config = random_configuration(30, 2, true, 8);
  const std::shared_ptr<Potential> model = fitted_model("float64", {config});
  PotentialEvaluator whole(model, {Precision::Float32, 4096});
  const EnergyForcesVirial reference = evaluate_configuration(whole, config);
  for (int64_t chunk : {1, 7, 29}) {
    PotentialEvaluator chunked(model, {Precision::Float32, chunk});
    const EnergyForcesVirial result = evaluate_configuration(chunked, config);
    EXPECT_NEAR(result.energy, reference.energy, 1e-12 * std::abs(reference.energy)) << chunk;
    EXPECT_LT(relative_difference(result.forces, reference.forces), 1e-12) << chunk;
  }

  const PeriodicSystem system(config, model->cutoff() + 0.5);
  const NeighborGraph graph = neighbor_graph_from_view(system.view(), model->cutoff());
  const Prediction prediction = predict(*model, graph);
  EXPECT_NEAR(prediction.energy.item<double>(), reference.energy, 1e-12 * std::abs(reference.energy));
  const torch::Tensor all = prediction.forces.contiguous();
  const std::vector<double> flat(all.data_ptr<double>(), all.data_ptr<double>() + all.numel());
  EXPECT_LT(relative_difference(system.fold_onto_owners(flat), reference.forces), 1e-12);
  const torch::Tensor w = prediction.virial[0];
  const std::vector<double> virial = {w[0][0].item<double>(), w[1][1].item<double>(), w[2][2].item<double>(),
                                      w[0][1].item<double>(), w[0][2].item<double>(), w[1][2].item<double>()};
  EXPECT_LT(relative_difference(virial, {reference.virial.begin(), reference.virial.end()}), 1e-12);

  // Member-resolved prediction: the members' forces average to the committee's.
  PredictionOptions options;
  options.member_forces = true;
  const Prediction members = predict(*model, graph, options);
  EXPECT_TRUE(torch::allclose(members.forces, prediction.forces, 1e-12, 1e-12));
  EXPECT_TRUE(torch::allclose(members.virial, prediction.virial, 1e-12, 1e-12));
  EXPECT_EQ(members.member_forces.size(0), model->committee_size());
  EXPECT_FALSE(torch::allclose(members.member_forces[0], members.member_forces[1]));

  // The evaluator's member forces equal the training path's.
  const AtomicSystemView view = system.view();
  std::vector<double> member_forces(static_cast<std::size_t>(model->committee_size() * view.num_atoms * 3), 0.0);
  EvaluationOutputs outputs;
  outputs.member_forces = member_forces.data();
  whole.evaluate(view, outputs);
  const torch::Tensor expected = members.member_forces.contiguous();
  EXPECT_TRUE(torch::allclose(torch::from_blob(member_forces.data(), expected.sizes(), torch::kFloat64),
                              expected, 1e-12, 1e-12));
}

TEST(BehlerParrinello, LowerPrecisionsStayCloseToFloat32) {
  const PeriodicConfiguration config = random_configuration(30, 2, false, 9);
  const std::shared_ptr<Potential> model = fitted_model("float32", {config});
  PotentialEvaluator fp32(model, {Precision::Float32});
  const EnergyForcesVirial reference = evaluate_configuration(fp32, config);
  for (Precision precision : {Precision::BFloat16, Precision::Float16}) {
    PotentialEvaluator lower(model, {precision});
    const EnergyForcesVirial result = evaluate_configuration(lower, config);
    EXPECT_TRUE(std::isfinite(result.energy));
    EXPECT_NE(result.energy, reference.energy) << "the precision had no effect";
    EXPECT_NEAR(result.energy / config.num_atoms(), reference.energy / config.num_atoms(), 0.05) << precision;
    EXPECT_LT(relative_difference(result.forces, reference.forces), 0.1) << precision;
  }
  EXPECT_THROW(PotentialEvaluator(with_dtype(*model, "float64"), {Precision::BFloat16}),
               std::invalid_argument);
}

// Two elements alternating on a simple cubic lattice whose six neighbours sit just inside the
// cutoff, displaced by `jitter`: the cutoff function makes every feature tiny (about 1e-6), so
// the standardisation divides by scales near its floor, as for the rare pairs of SiC at 3.08 A.
PeriodicConfiguration lattice_at_the_cutoff(double cutoff, double jitter, uint64_t seed) {
  const int side = 4;
  const double spacing = 0.97 * cutoff;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> displacement(0.0, jitter);
  PeriodicConfiguration config;
  for (int a = 0; a < 3; ++a) config.cell[static_cast<std::size_t>(a)][static_cast<std::size_t>(a)] = side * spacing;
  for (int i = 0; i < side; ++i)
    for (int j = 0; j < side; ++j)
      for (int k = 0; k < side; ++k) {
        for (int v : {i, j, k}) config.positions.push_back(v * spacing + displacement(rng));
        config.species.push_back((i + j + k) % 2);
      }
  return config;
}

// Training takes the forces inside the float16 region (create_graph, for the force loss). Their
// backward through the descriptor must stay in the input precision: there the standardisation's
// inverse scales (about 1e6 here) make gradients beyond float16's 65504, and a float16 backward
// turned them into inf and NaN forces, so that float16 training skipped every step (SiC example).
TEST(BehlerParrinello, Float16TrainingForcesSurviveLargeStandardisationScales) {
  const double cutoff = 4.0;
  std::vector<PeriodicConfiguration> statistics;
  for (uint64_t seed : {1, 2, 3}) statistics.push_back(lattice_at_the_cutoff(cutoff, 0.01, seed));
  const std::shared_ptr<Potential> model = create_potential(small_spec({"Si", "C"}, "float32", cutoff));
  fit_statistics(*model, statistics);
  const PeriodicConfiguration config = lattice_at_the_cutoff(cutoff, 0.02, 4);
  const PeriodicSystem system(config, cutoff);
  const NeighborGraph graph = neighbor_graph_from_view(system.view(), cutoff);
  for (bool member_forces : {false, true}) {
    PredictionOptions options;
    options.create_graph = true;
    options.member_forces = member_forces;
    const Prediction reference = predict(*model, graph, options);
    const double scale = reference.forces.abs().max().item<double>();
    ASSERT_GT(scale, 0.0);
    Prediction lower;
    {
      const AutocastRegion region(torch::kCPU, Precision::Float16);
      lower = predict(*model, graph, options);
    }
    const torch::Tensor forces = member_forces ? lower.member_forces : lower.forces;
    const torch::Tensor expected = member_forces ? reference.member_forces : reference.forces;
    EXPECT_TRUE(torch::isfinite(forces).all().item<bool>()) << "member_forces " << member_forces;
    EXPECT_LT((forces - expected).abs().max().item<double>(), 0.05 * scale) << "member_forces " << member_forces;
    // The parameter gradients of a force loss (the double backward, outside the region) are
    // finite at a loss scale that a GradScaler reaches by backing off (2^-8); unscaled, the
    // network's float16 double backward overflows here (docs/design.md §7.8, pitfall 6).
    const torch::Tensor scaled_loss = forces.square().sum() * std::ldexp(1.0, -8);
    const std::vector<torch::Tensor> gradients =
        torch::autograd::grad({scaled_loss}, model->parameters(), {}, /*retain_graph=*/false,
                              /*create_graph=*/false, /*allow_unused=*/true);
    for (const torch::Tensor& gradient : gradients) {
      if (gradient.defined()) {
        EXPECT_TRUE(torch::isfinite(gradient).all().item<bool>());
      }
    }
  }
}

TEST(BehlerParrinello, BuffersDoNotGrowFromCallToCall) {
  const PeriodicConfiguration config = random_configuration(40, 2, false, 4);
  const std::shared_ptr<Potential> model = fitted_model("float32", {config});
  PotentialEvaluator evaluator(model, {Precision::Float32, 16});
  evaluate_configuration(evaluator, config);
  const std::size_t bytes = evaluator.workspace_bytes();
  EXPECT_GT(bytes, 0U);
  for (int call = 0; call < 5; ++call) {
    evaluate_configuration(evaluator, config);
    EXPECT_EQ(evaluator.workspace_bytes(), bytes);
  }
}

TEST(BehlerParrinello, InconsistentInputsAreRejected) {
  const std::shared_ptr<Potential> model = create_potential(small_spec({"Si"}, "float32"));
  PotentialEvaluator evaluator(model, {});
  const double positions[6] = {0, 0, 0, 2, 0, 0};
  const int species[2] = {0, 1};  // species 1 does not exist in a one-element model
  const int centers[2] = {0, 1}, counts[2] = {1, 1};
  const int to_one[1] = {1}, to_zero[1] = {0}, to_nowhere[1] = {5};
  const int* lists[2] = {to_one, to_zero};
  AtomicSystemView view;
  view.num_atoms = view.num_local = 2;
  view.positions = positions;
  view.species = species;
  view.num_centers = 2;
  view.centers = centers;
  view.neighbor_counts = counts;
  view.neighbors = lists;
  EXPECT_THROW(evaluator.evaluate(view, {}), std::invalid_argument);
  const int good_species[2] = {0, 0};
  view.species = good_species;
  lists[0] = to_nowhere;
  EXPECT_THROW(evaluator.evaluate(view, {}), std::invalid_argument);
  lists[0] = to_one;
  EXPECT_NO_THROW(evaluator.evaluate(view, {}));
  // An ignored atom (negative species, a NULL type in LAMMPS) does not interact.
  const int one_ignored[2] = {0, -1};
  view.species = one_ignored;
  std::vector<double> forces(6, 0.0);
  EvaluationOutputs outputs;
  outputs.forces = forces.data();
  evaluator.evaluate(view, outputs);
  for (double f : forces) EXPECT_EQ(f, 0.0);
}

TEST(BehlerParrinello, EnergyShiftsAreFittedPerElement) {
  const std::shared_ptr<Potential> model = create_potential(small_spec({"Si", "C"}, "float32"));
  EXPECT_FALSE(model->energy_shifts_fitted());
  // Frames with 3 Si + 1 C, 1 Si + 2 C, 4 Si: shifts -4.5 (Si) and -7.25 (C).
  const torch::Tensor counts = torch::tensor({{3.0, 1.0}, {1.0, 2.0}, {4.0, 0.0}}, torch::kFloat64);
  const torch::Tensor energies = counts.matmul(torch::tensor({-4.5, -7.25}, torch::kFloat64));
  model->fit_energy_shifts(counts, energies);
  EXPECT_TRUE(model->energy_shifts_fitted());
  EXPECT_NEAR(model->energy_shifts()[0].item<double>(), -4.5, 1e-8);
  EXPECT_NEAR(model->energy_shifts()[1].item<double>(), -7.25, 1e-8);
  // One frame with only Si: the Si shift is its energy per atom, C stays 0 (minimum norm).
  model->fit_energy_shifts(torch::tensor({{8.0, 0.0}}, torch::kFloat64), torch::tensor({-40.0}, torch::kFloat64));
  EXPECT_NEAR(model->energy_shifts()[0].item<double>(), -5.0, 1e-8);
  EXPECT_NEAR(model->energy_shifts()[1].item<double>(), 0.0, 1e-8);
  EXPECT_THROW(model->fit_energy_shifts(torch::ones({2, 3}), torch::ones({2})), std::invalid_argument);
}

TEST(BehlerParrinello, FrozenDescriptorStatisticsStayFixed) {
  const PeriodicConfiguration first = random_configuration(20, 2, false, 1);
  const PeriodicConfiguration second = random_configuration(20, 2, false, 2, 0.08, 1.5);
  const std::shared_ptr<Potential> model = fitted_model("float32", {first});
  PotentialEvaluator evaluator(model, {});
  const double before = evaluate_configuration(evaluator, second).energy;
  model->freeze_descriptor_statistics();
  EXPECT_TRUE(model->descriptor_statistics_frozen());
  fit_statistics(*model, {second});
  EXPECT_EQ(evaluate_configuration(evaluator, second).energy, before);
}

}  // namespace
}  // namespace otf::testing

namespace otf::testing {
namespace {

// Random neighbourhoods: pair vectors [centres, width, 3] of about `spread` length and neighbour
// species, with slot (padding_center, padding_slot) a padding row (beyond the cutoff, species =
// num_species).
std::pair<torch::Tensor, torch::Tensor> random_pairs(const PairMomentsShape& shape, int64_t centers,
                                                     int64_t width, double spread, int64_t padding_center,
                                                     int64_t padding_slot, torch::ScalarType dtype) {
  torch::Tensor vectors = spread * torch::randn({centers, width, 3}, dtype);
  torch::Tensor species = torch::randint(0, shape.num_species, {centers, width}, torch::kInt64);
  vectors[padding_center][padding_slot] = torch::tensor({2.0 * shape.cutoff, 0.0, 0.0}, dtype);
  species[padding_center][padding_slot] = shape.num_species;
  return {vectors, species};
}

// `value` equals `reference` to `tolerance` relative to the largest entry of `reference`: a float32
// sum of products is rounded at the size of its largest terms, so an entry much smaller than those
// is off by that much whatever its own size, and how much depends on the BLAS kernels' order of
// summation (an AMD EPYC's gave 1.4e-5 against entries up to 6.5, failing an element-wise 1e-5
// that an Intel Xeon's passed).
::testing::AssertionResult close_at_scale(const torch::Tensor& value, const torch::Tensor& reference,
                                          double tolerance) {
  const double scale = std::max(1.0, reference.abs().max().item<double>());
  const double difference = (value - reference).abs().max().item<double>();
  if (torch::allclose(value, reference, tolerance, tolerance * scale)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "largest difference " << difference << " with entries up to " << scale
                                       << " (tolerance " << tolerance << ")";
}

// The fused first-order kernel of MD and the LibTorch composition of training compute the same
// moments and the same gradients, padding rows and several species included.
TEST(PairMoments, FusedKernelEqualsTheDifferentiableComposition) {
  torch::manual_seed(4);
  const PairMomentsShape shape{3, 4.0, 7, 3};
  for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
    const auto [vectors, species] = random_pairs(shape, 5, 9, 2.5, 1, 3, dtype);
    const torch::Tensor grad_out = torch::randn({5, 21, 20}, dtype);
    const torch::Tensor a = vectors.clone().requires_grad_(true), b = vectors.clone().requires_grad_(true);
    const torch::Tensor reference = pair_moments(a, species, shape);
    const torch::Tensor fused = pair_moments_first_order(b, species, shape);
    const double tolerance = dtype == torch::kFloat64 ? 1e-12 : 1e-5;
    EXPECT_TRUE(close_at_scale(fused, reference, tolerance)) << dtype;
    const torch::Tensor ga = torch::autograd::grad({(reference * grad_out).sum()}, {a})[0];
    const torch::Tensor gb = torch::autograd::grad({(fused * grad_out).sum()}, {b})[0];
    EXPECT_TRUE(close_at_scale(gb, ga, tolerance)) << dtype;
    EXPECT_EQ(gb[1][3].abs().sum().item<double>(), 0.0);
  }
}

// The plain-tensor pair basis gives the moments, and the pair gradients of many sets of moment
// gradients at once equal autograd's through the composition, set by set; they are themselves
// differentiable in those moment gradients (the parameter gradient of a force loss).
TEST(PairMoments, BasisGivesMomentsAndPairGradientsForManySetsAtOnce) {
  torch::manual_seed(5);
  const PairMomentsShape shape{2, 4.0, 6, 3};
  for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
    const auto [vectors, species] = random_pairs(shape, 4, 7, 2.0, 2, 5, dtype);
    const double tolerance = dtype == torch::kFloat64 ? 1e-12 : 1e-5;
    const PairBasis basis = pair_basis(vectors, species, shape);
    const torch::Tensor a = vectors.clone().requires_grad_(true);
    const torch::Tensor reference = pair_moments(a, species, shape);
    EXPECT_TRUE(close_at_scale(moments_from_basis(basis), reference, tolerance)) << dtype;

    const torch::Tensor sets = torch::randn({3, 4, 12, 20}, dtype).requires_grad_(true);
    const torch::Tensor gradients = pair_gradients_from_moment_gradients(basis, sets);
    ASSERT_EQ(gradients.sizes(), (std::vector<int64_t>{3, 4, 7, 3}));
    const torch::Tensor weights = torch::randn({3, 4, 7, 3}, dtype);
    for (int64_t h = 0; h < 3; ++h) {
      const torch::Tensor set = sets[h].detach().clone().requires_grad_(true);
      const torch::Tensor expected =
          torch::autograd::grad({(reference * set).sum()}, {a}, {}, true, true)[0];
      EXPECT_TRUE(close_at_scale(gradients[h], expected, tolerance)) << dtype << " set " << h;
      EXPECT_EQ(gradients[h][2][5].abs().sum().item<double>(), 0.0);
      // d/d(set) of sum(weights . pair gradients): through autograd's double backward.
      const torch::Tensor expected_second = torch::autograd::grad({(expected * weights[h]).sum()}, {set})[0];
      const torch::Tensor second =
          torch::autograd::grad({(gradients[h] * weights[h]).sum()}, {sets}, {}, true)[0][h];
      EXPECT_TRUE(close_at_scale(second, expected_second, tolerance)) << dtype << " set " << h;
    }
  }
}

// The default potential's shared member gradients (one pass over the pairs for the committee)
// equal the generic per-member evaluation: energies, every member's pair gradients, and the
// parameter gradients of a loss on both, in float64, with and without the float16 scale.
TEST(BehlerParrinello, SharedMemberGradientsEqualTheGenericPerMemberEvaluation) {
  const PeriodicConfiguration config = random_configuration(24, 2, true, 21);
  const std::shared_ptr<Potential> model = fitted_model("float64", {config});
  const PeriodicSystem system(config, model->cutoff());
  const NeighborGraph graph = neighbor_graph_from_view(system.view(), model->cutoff());
  const LocalEnvironments env = local_environments(graph, model->num_species(), model->cutoff(), model->dtype());
  torch::manual_seed(8);
  const int64_t members = model->committee_size();
  const torch::Tensor force_weights = torch::randn({members, env.num_centers(), env.max_neighbors(), 3}, torch::kFloat64);
  const torch::Tensor energy_weights = torch::randn({members, env.num_centers()}, torch::kFloat64);
  const std::vector<torch::Tensor> parameters = model->parameters();
  for (double scale : {1.0, 64.0}) {
    PairGradientOptions options;
    options.create_graph = true;
    options.gradient_scale = scale;
    const MemberPairGradients shared = model->member_energies_and_pair_gradients(env, options);
    const MemberPairGradients generic = model->Potential::member_energies_and_pair_gradients(env, options);
    EXPECT_TRUE(torch::allclose(shared.atomic_energies, generic.atomic_energies, 1e-12, 1e-12));
    const double norm = generic.pair_gradients.abs().max().item<double>();
    EXPECT_GT(norm, 1e-3);
    EXPECT_LT((shared.pair_gradients - generic.pair_gradients).abs().max().item<double>(), 1e-10 * norm);
    auto loss_gradients = [&](const MemberPairGradients& result) {
      const torch::Tensor loss = (result.pair_gradients * force_weights).sum() +
                                 (result.atomic_energies * energy_weights).sum();
      return torch::autograd::grad({loss}, parameters);
    };
    const std::vector<torch::Tensor> a = loss_gradients(shared), b = loss_gradients(generic);
    for (std::size_t p = 0; p < parameters.size(); ++p) {
      const double reference = b[p].abs().max().item<double>();
      EXPECT_LT((a[p] - b[p]).abs().max().item<double>(), 1e-10 * std::max(reference, 1.0)) << "parameter " << p;
    }
  }
}

}  // namespace
}  // namespace otf::testing

namespace otf::testing {
namespace {

// A stored frame keeps only the atoms its centres use; predictions on them do not change.
TEST(NeighborGraph, DroppingUnusedAtomsKeepsEveryPrediction) {
  const PeriodicConfiguration config = random_configuration(20, 2, true, 12);
  const std::shared_ptr<Potential> model = create_potential(small_spec({"Si", "C"}, "float64"));
  const PeriodicSystem wide(config, 3.0 * model->cutoff());  // many ghosts nobody uses
  const NeighborGraph graph = neighbor_graph_from_view(wide.view(), model->cutoff());
  torch::Tensor kept;
  const NeighborGraph compact = drop_unused_atoms(graph, &kept);
  EXPECT_LT(compact.positions.size(0), graph.positions.size(0) / 2);
  EXPECT_TRUE(torch::equal(kept.narrow(0, 0, wide.num_local()), torch::arange(wide.num_local())));
  const Prediction full = predict(*model, graph), small = predict(*model, compact);
  EXPECT_NEAR(small.energy.item<double>(), full.energy.item<double>(), 1e-12 * std::abs(full.energy.item<double>()));
  EXPECT_TRUE(torch::allclose(small.forces, full.forces.index_select(0, kept), 1e-12, 1e-12));
}

}  // namespace
}  // namespace otf::testing
