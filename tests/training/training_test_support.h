// Shared pieces of the training layer's tests: a small periodic Ar system as an MD code would
// hand it over (FramePart), labelled by a Morse pair potential, a Reference that answers from it
// and an MdFrameSource that serves it. Header-only.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "../potentials/potential_test_support.h"
#include "frame_intake.h"
#include "on_the_fly_trainer.h"
#include "potential_registry.h"

namespace otf::testing {

// One configuration as the MD code holds it (one rank, ghosts folded onto their atoms).
class MdConfiguration {
 public:
  MdConfiguration(const PeriodicConfiguration& config, double cutoff) :
      config_(config), system_(std::make_unique<PeriodicSystem>(config, cutoff)) {
    const AtomicSystemView view = system_->view();
    owner_ = owner_centres(view, std::vector<int>(system_->owner().begin(), system_->owner().end()));
    // Morse labels of the whole frame, folded onto the owned atoms.
    const NeighborGraph graph = neighbor_graph_from_view(view, cutoff);
    const MorseLabels labels = morse_labels(graph, cutoff);
    energy_ = labels.energy;
    const torch::Tensor forces = labels.forces.contiguous();
    const std::vector<double> all(forces.data_ptr<double>(),
                                  forces.data_ptr<double>() + forces.numel());
    owned_forces_ = system_->fold_onto_owners(all);
  }

  FramePart frame() const {
    FramePart frame;
    frame.system = system_->view();
    frame.owner_centre = owner_.data();
    frame.volume = 1000.0;
    frame.atoms_in_frame = system_->num_local();
    return frame;
  }
  FramePart labelled_frame() const {
    FramePart part = frame();
    part.owned_forces = owned_forces_.data();
    part.energy = energy_;
    return part;
  }
  double energy() const { return energy_; }
  const PeriodicConfiguration& configuration() const { return config_; }
  const std::vector<double>& owned_forces() const { return owned_forces_; }
  int num_local() const { return system_->num_local(); }

 private:
  PeriodicConfiguration config_;
  std::unique_ptr<PeriodicSystem> system_;
  std::vector<int> owner_;
  double energy_ = 0.0;
  std::vector<double> owned_forces_;
};

inline std::vector<std::unique_ptr<MdConfiguration>> argon_configurations(int count, double cutoff,
                                                                          int atoms = 12) {
  std::vector<std::unique_ptr<MdConfiguration>> configurations;
  for (int k = 0; k < count; ++k)
    configurations.push_back(std::make_unique<MdConfiguration>(
        random_configuration(atoms, 1, k % 2 == 1, 100 + static_cast<uint64_t>(k), 0.04, 2.3),
        cutoff));
  return configurations;
}

inline std::shared_ptr<Potential> argon_model(double cutoff) {
  ModelSpec spec = small_spec({"Ar"}, "float32", cutoff, 5);
  spec.units = "metal";
  return create_potential(spec);
}

// A reference that answers from the configuration the frame source shows, and records its uses.
class RecordingReference : public Reference {
 public:
  explicit RecordingReference(const MdConfiguration* const* current) : current_(current) {}
  std::string description() const override { return "Morse (test)"; }
  ReferenceLabel label(const ReferenceConfiguration& configuration, ReferenceUse use) override {
    uses.push_back(use);
    steps.push_back(configuration.step);
    ReferenceLabel label;
    label.energy = (*current_)->energy();
    label.owned_forces = (*current_)->owned_forces();
    return label;
  }
  std::vector<ReferenceUse> uses;
  std::vector<int64_t> steps;

 private:
  const MdConfiguration* const* current_;
};

class TestFrameSource : public MdFrameSource {
 public:
  const MdConfiguration* current = nullptr;
  int64_t step = 0;
  FramePart describe_frame() override { return current->frame(); }
  ReferenceConfiguration reference_configuration() override {
    ReferenceConfiguration configuration;
    configuration.step = step;
    configuration.num_local = current->num_local();
    // What a reference outside the MD code (and the label journal) reads: positions, types
    // (species + 1), ids 1..N and the cell.
    const PeriodicConfiguration& config = current->configuration();
    positions.assign(config.positions.begin(),
                     config.positions.begin() + 3 * static_cast<std::ptrdiff_t>(current->num_local()));
    types.clear();
    ids.clear();
    for (int i = 0; i < current->num_local(); ++i) {
      types.push_back(config.species[static_cast<std::size_t>(i)] + 1);
      ids.push_back(i + 1);
    }
    configuration.positions = positions.data();
    configuration.types = types.data();
    configuration.ids = ids.data();
    configuration.atoms_in_frame = current->num_local();
    for (int a = 0; a < 3; ++a)
      for (int d = 0; d < 3; ++d)
        configuration.cell[static_cast<std::size_t>(3 * a + d)] =
            config.cell[static_cast<std::size_t>(a)][static_cast<std::size_t>(d)];
    return configuration;
  }
  std::vector<double> positions;
  std::vector<int> types;
  std::vector<int64_t> ids;
  double* force_uncertainty_per_atom() override {
    uncertainty.assign(static_cast<std::size_t>(current->num_local()), -1.0);
    return uncertainty.data();
  }
  std::vector<double> uncertainty;
  // The forces a replayed journal label drove with (training/journal_replay.h).
  void drive_with(const std::vector<double>& owned_forces) override {
    driven_forces = owned_forces;
  }
  std::vector<double> driven_forces;
};

}  // namespace otf::testing
