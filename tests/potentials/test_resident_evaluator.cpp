// The resident (tensor) evaluator against the host evaluator on the same systems: same energies,
// forces, per-atom energies, virials and uncertainties, in every precision, whatever the strides
// of the arrays (LAMMPS' Kokkos views: positions and forces row-major, the neighbour matrix
// column-major on GPUs), with ignored types, special-bond bits and a list with a skin. On this
// machine the tensors are on the CPU; on a GPU the same code runs on cuda tensors.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <vector>

#include "potential_test_support.h"
#include "resident_evaluator.h"

namespace otf::testing {
namespace {

constexpr int kSpecialBit = 1 << 30;  // a LAMMPS special-bond flag above NEIGHMASK
constexpr int kNeighborMask = (1 << 29) - 1;

// One system in both forms: the host view (with its own arrays) and the resident tensors.
struct TwoForms {
  PeriodicSystem periodic;
  std::vector<int> species;                 // host species per atom (-1: ignored)
  std::vector<std::vector<int>> lists;      // per centre, with special bits
  std::vector<const int*> list_pointers;
  std::vector<int> counts;
  std::vector<int> centers;
  ResidentSystem resident;
};

// Atom types: type 1 -> species 0, type 2 -> species 1, type 3 -> ignored (every fifth atom).
TwoForms two_forms(const PeriodicConfiguration& config, double list_cutoff, bool column_major) {
  TwoForms forms{PeriodicSystem(config, list_cutoff), {}, {}, {}, {}, {}, {}};
  const AtomicSystemView view = forms.periodic.view();
  const int atoms = view.num_atoms;
  std::vector<int> types(static_cast<std::size_t>(atoms));
  for (int i = 0; i < atoms; ++i) {
    const int owner = forms.periodic.owner()[static_cast<std::size_t>(i)];
    types[static_cast<std::size_t>(i)] = owner % 5 == 3 ? 3 : 1 + view.species[i];
  }
  const std::vector<int64_t> species_of_type = {-1, 0, 1, -1};
  for (int i = 0; i < atoms; ++i) {
    forms.species.push_back(static_cast<int>(species_of_type[static_cast<std::size_t>(types[static_cast<std::size_t>(i)])]));
  }
  int widest = 0;
  for (int n = 0; n < view.num_centers; ++n) {
    std::vector<int> list(view.neighbors[n], view.neighbors[n] + view.neighbor_counts[n]);
    for (std::size_t k = 0; k < list.size(); k += 3) list[k] |= kSpecialBit;
    forms.lists.push_back(list);
    forms.centers.push_back(view.centers[n]);
    forms.counts.push_back(view.neighbor_counts[n]);
    widest = std::max(widest, view.neighbor_counts[n]);
  }
  for (const auto& list : forms.lists) forms.list_pointers.push_back(list.data());

  // Rows by atom index with headroom rows and columns (as Kokkos allocates), garbage beyond counts.
  const int64_t rows = atoms + 7, columns = widest + 4;
  torch::Tensor neighbors = column_major ? torch::full({columns, rows}, 123456, torch::kInt32).t()
                                         : torch::full({rows, columns}, 123456, torch::kInt32);
  torch::Tensor counts = torch::full({rows}, 0, torch::kInt32);
  for (std::size_t n = 0; n < forms.lists.size(); ++n) {
    const int i = forms.centers[n];
    counts[i] = forms.counts[n];
    for (std::size_t k = 0; k < forms.lists[n].size(); ++k) neighbors[i][static_cast<int64_t>(k)] = forms.lists[n][k];
  }
  // Positions inside a wider array ([rows][4], as a padded layout would be): strided rows.
  torch::Tensor padded = torch::full({rows, 4}, 99.0, torch::kFloat64);
  padded.narrow(0, 0, atoms).narrow(1, 0, 3).copy_(
      torch::from_blob(const_cast<double*>(view.positions), {atoms, 3}, torch::kFloat64));
  forms.resident.num_atoms = atoms;
  forms.resident.positions = padded.narrow(1, 0, 3);
  forms.resident.types = torch::tensor(types, torch::kInt32);
  forms.resident.species_of_type = torch::tensor(species_of_type, torch::kInt64);
  forms.resident.centers = torch::tensor(forms.centers, torch::kInt32);
  forms.resident.neighbor_counts = counts;
  forms.resident.neighbors = neighbors;
  forms.resident.neighbor_index_mask = kNeighborMask;
  return forms;
}

AtomicSystemView host_view(const TwoForms& forms) {
  AtomicSystemView view = forms.periodic.view();
  view.species = forms.species.data();
  view.num_centers = static_cast<int>(forms.centers.size());
  view.centers = forms.centers.data();
  view.neighbor_counts = forms.counts.data();
  view.neighbors = forms.list_pointers.data();
  view.neighbor_index_mask = kNeighborMask;
  return view;
}

double largest_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

struct Case {
  std::string dtype;
  Precision precision;
  int64_t chunk;
  bool column_major;
};

class ResidentEvaluatorMatchesHost : public ::testing::TestWithParam<Case> {};

TEST_P(ResidentEvaluatorMatchesHost, SameResultsFromTensorsInPlace) {
  const Case c = GetParam();
  torch::manual_seed(3);
  const auto model = create_potential(small_spec({"Si", "C"}, c.dtype, 4.0, 11));
  const PeriodicConfiguration config = random_configuration(40, 2, true, 5, 0.06, 1.6);
  TwoForms forms = two_forms(config, model->cutoff() + 0.7, c.column_major);
  const AtomicSystemView view = host_view(forms);
  const int64_t atoms = view.num_atoms;

  PotentialEvaluator host(model, {c.precision, c.chunk});
  std::vector<double> forces(static_cast<std::size_t>(3 * atoms), 0.0), energy(static_cast<std::size_t>(atoms), 0.0),
      virial(static_cast<std::size_t>(6 * atoms), 0.0), spread(static_cast<std::size_t>(atoms), 0.0);
  EvaluationOutputs host_out;
  host_out.forces = forces.data();
  host_out.atom_energy = energy.data();
  host_out.atom_virial = virial.data();
  host_out.atom_energy_uncertainty = spread.data();
  const EvaluationTotals expected = host.evaluate(view, host_out);

  // Outputs start non-zero (results are added) and with headroom rows, as Kokkos views have.
  ResidentEvaluator resident(model, {c.precision, c.chunk});
  ResidentOutputs out;
  out.forces = torch::full({atoms + 7, 3}, 0.25, torch::kFloat64);
  out.atom_energy = torch::full({atoms + 7}, 0.25, torch::kFloat64);
  out.atom_virial = torch::full({atoms + 7, 6}, 0.25, torch::kFloat64);
  out.atom_energy_uncertainty = torch::full({atoms + 7}, 0.25, torch::kFloat64);
  const EvaluationTotals totals = resident.evaluate(forms.resident, out);

  const double scale = torch::from_blob(forces.data(), {atoms * 3}, torch::kFloat64).abs().max().item<double>();
  ASSERT_GT(scale, 1e-3);
  const double tolerance = 1e-12 * std::max(1.0, scale);
  auto host_tensor = [&](std::vector<double>& data, int64_t columns) {
    return torch::from_blob(data.data(), {atoms, columns}, torch::kFloat64) + 0.25;
  };
  EXPECT_LT(largest_difference(out.forces.narrow(0, 0, atoms), host_tensor(forces, 3)), tolerance);
  EXPECT_LT(largest_difference(out.atom_energy.narrow(0, 0, atoms), host_tensor(energy, 1).squeeze(1)), 1e-12);
  EXPECT_LT(largest_difference(out.atom_virial.narrow(0, 0, atoms), host_tensor(virial, 6)), tolerance * 10);
  EXPECT_LT(largest_difference(out.atom_energy_uncertainty.narrow(0, 0, atoms), host_tensor(spread, 1).squeeze(1)),
            1e-12);
  // Headroom rows are untouched.
  EXPECT_EQ(out.forces.narrow(0, atoms, 7).sub(0.25).abs().max().item<double>(), 0.0);

  EXPECT_NEAR(totals.energy, expected.energy, 1e-10 * std::abs(expected.energy));
  for (std::size_t v = 0; v < 6; ++v) EXPECT_NEAR(totals.virial[v], expected.virial[v], 1e-10 * (1.0 + std::abs(expected.virial[v])));
  EXPECT_NEAR(totals.max_energy_uncertainty, expected.max_energy_uncertainty, 1e-14);
  EXPECT_EQ(totals.pairs_within_cutoff, expected.pairs_within_cutoff);
  EXPECT_GT(totals.pairs_within_cutoff, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Precisions, ResidentEvaluatorMatchesHost,
    ::testing::Values(Case{"float64", Precision::Float32, 2048, false}, Case{"float64", Precision::Float32, 7, true},
                      Case{"float32", Precision::Float32, 2048, true}, Case{"float32", Precision::BFloat16, 16, true},
                      Case{"float32", Precision::Float16, 2048, false}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return info.param.dtype + "_" + to_string(info.param.precision) + "_chunk" + std::to_string(info.param.chunk) +
             (info.param.column_major ? "_column_major" : "_row_major");
    });

TEST(ResidentEvaluator, ForcesAreMinusTheEnergyGradient) {
  torch::manual_seed(4);
  const auto model = create_potential(small_spec({"Si", "C"}, "float64", 4.0, 12));
  const PeriodicConfiguration config = random_configuration(20, 2, false, 9, 0.06, 1.6);
  TwoForms forms = two_forms(config, model->cutoff() + 0.5, true);
  ResidentEvaluator resident(model, {});
  const int64_t atoms = forms.resident.num_atoms;
  ResidentOutputs out;
  out.forces = torch::zeros({atoms, 3}, torch::kFloat64);
  resident.evaluate(forms.resident, out);
  // Moving one owned atom (and only it: its images are separate atoms here) by +-h.
  const int64_t atom = 2;
  const double h = 1e-5;
  auto energy_at = [&](double shift) {
    torch::Tensor positions = forms.resident.positions.clone();
    positions[atom][1] += shift;
    ResidentSystem moved = forms.resident;
    moved.positions = positions;
    return resident.evaluate(moved, ResidentOutputs{}).energy;
  };
  const double numeric = -(energy_at(h) - energy_at(-h)) / (2 * h);
  EXPECT_NEAR(out.forces[atom][1].item<double>(), numeric, 1e-7 * std::max(1.0, std::abs(numeric)));
}

TEST(ResidentEvaluator, RejectsBadInputsWithMessages) {
  const auto model = create_potential(small_spec({"Si", "C"}, "float64"));
  const PeriodicConfiguration config = random_configuration(12, 2, false, 2);
  TwoForms forms = two_forms(config, model->cutoff() + 0.5, false);
  ResidentEvaluator resident(model, {});
  auto message_of = [&](const ResidentSystem& system, const ResidentOutputs& outputs) {
    try {
      resident.evaluate(system, outputs);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  ResidentSystem bad = forms.resident;
  bad.positions = forms.resident.positions.to(torch::kFloat32);
  EXPECT_NE(message_of(bad, {}).find("positions must be float64"), std::string::npos);

  bad = forms.resident;
  bad.types = forms.resident.types.clone();
  bad.types[0] = 9;
  EXPECT_NE(message_of(bad, {}).find("atom types"), std::string::npos);

  bad = forms.resident;
  bad.neighbors = forms.resident.neighbors.clone();
  const int center = forms.centers[0];
  bad.neighbors[center][0] = forms.resident.num_atoms + 3;
  EXPECT_NE(message_of(bad, {}).find("neighbour index outside"), std::string::npos);

  ResidentOutputs short_forces;
  short_forces.forces = torch::zeros({2, 3}, torch::kFloat64);
  EXPECT_NE(message_of(forms.resident, short_forces).find("forces has 2 rows"), std::string::npos);

  EXPECT_THROW(ResidentEvaluator(model, {Precision::BFloat16, 16}), std::invalid_argument);
}

}  // namespace
}  // namespace otf::testing
