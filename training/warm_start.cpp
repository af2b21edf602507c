#include "warm_start.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstddef>
#include <memory>
#include <stdexcept>

#include "frame_intake.h"
#include "extxyz.h"
#include "model_spec.h"
#include "periodic_system.h"
#include "potential.h"
#include "rank_agreement.h"
#include "training_session.h"

namespace otf {

WholeFramePart::WholeFramePart(const TrainingSession& session, const LabelledFrame* whole,
                               MPI_Comm world) {
  if (whole != nullptr) {
    const LabelledFrame& frame = *whole;
    const ModelSpec& spec = session.potential()->spec();
    PeriodicConfiguration configuration;
    for (int a = 0; a < 3; ++a)
      for (int d = 0; d < 3; ++d)
        configuration.cell[static_cast<std::size_t>(a)][static_cast<std::size_t>(d)] =
            frame.cell[static_cast<std::size_t>(3 * a + d)];
    configuration.positions = frame.positions;
    for (const std::string& symbol : frame.symbols)
      configuration.species.push_back(static_cast<int>(spec.species_index(symbol)));
    system_ = std::make_unique<PeriodicSystem>(configuration, spec.cutoff);
    part_.system = system_->view();
    owners_ = owner_centres(part_.system, system_->owner());
    part_.owned_forces = frame.forces.data();
    part_.owner_centre = owners_.data();
    part_.energy = frame.energy;
    part_.virial = frame.virial;
    const auto& c = configuration.cell;
    part_.volume = std::abs(c[0][0] * (c[1][1] * c[2][2] - c[1][2] * c[2][1]) -
                            c[0][1] * (c[1][0] * c[2][2] - c[1][2] * c[2][0]) +
                            c[0][2] * (c[1][0] * c[2][1] - c[1][1] * c[2][0]));
    part_.atoms_in_frame = frame.num_atoms();
  }
  MPI_Bcast(&part_.energy, 1, MPI_DOUBLE, 0, world);
  MPI_Bcast(part_.virial.data(), 6, MPI_DOUBLE, 0, world);
  MPI_Bcast(&part_.volume, 1, MPI_DOUBLE, 0, world);
  long long atoms = part_.atoms_in_frame;
  MPI_Bcast(&atoms, 1, MPI_LONG_LONG, 0, world);
  part_.atoms_in_frame = atoms;
}

WholeFramePart::~WholeFramePart() = default;

void add_whole_frame(TrainingSession& session, const LabelledFrame* whole, MPI_Comm world) {
  const WholeFramePart frame(session, whole, world);
  session.add_frame(frame.part());
}

void learn_whole_frame(TrainingSession& session, const LabelledFrame* whole, MPI_Comm world) {
  add_whole_frame(session, whole, world);
  session.train();
}

WarmStartSummary warm_start(TrainingSession& session, const std::vector<std::string>& paths,
                            const std::string& unit_style, MPI_Comm world) {
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  std::vector<LabelledFrame> frames;
  std::string summary;
  long long labelled_span = 0;  // on rank 0, then everywhere
  agreed_or_throw(world, "cannot warm-start from the label journal", [&] {
    if (rank != 0) return;
    const ModelSpec& spec = session.potential()->spec();
    for (const std::string& path : paths) {
      ExtxyzContents contents = read_extxyz_file(path);
      int64_t first_step = -1, last_step = -1;
      for (const LabelledFrame& frame : contents.frames) {
        if (frame.step < 0) continue;  // a file from another tool: no MD step
        first_step = first_step < 0 ? frame.step : std::min(first_step, frame.step);
        last_step = std::max(last_step, frame.step);
      }
      labelled_span = std::max<long long>(labelled_span, last_step - first_step);
      for (std::size_t k = 0; k < contents.frames.size(); ++k) {
        const LabelledFrame& frame = contents.frames[k];
        // Files from other tools (ASE) carry no unit style: eV and Angstrom, LAMMPS' metal.
        const std::string units = frame.units.empty() ? std::string("metal") : frame.units;
        if (units != unit_style)
          throw std::runtime_error(
              path + " frame " + std::to_string(k + 1) + " is in units " + units +
              (frame.units.empty() ? " (no units key: eV and Angstrom assumed)" : "") +
              ", this run in units " + unit_style +
              "; warm-start from labels of the same unit system");
        for (const std::string& symbol : frame.symbols)
          if (spec.species_index(symbol) < 0)
            throw std::runtime_error(path + " frame " + std::to_string(k + 1) +
                                     " has element " + symbol +
                                     ", which the model does not know (its elements: " +
                                     [&] {
                                       std::string list;
                                       for (const auto& e : spec.elements)
                                         list += (list.empty() ? "" : " ") + e;
                                       return list;
                                     }() + ")");
        frames.push_back(frame);
      }
      summary += (summary.empty() ? "" : ", ") + std::to_string(contents.frames.size()) +
                 " from " + path;
      if (contents.truncated_frames > 0)
        summary += " (" + std::to_string(contents.truncated_frames) +
                   " truncated frame dropped at its end)";
    }
  });
  long long count = static_cast<long long>(frames.size());
  MPI_Bcast(&count, 1, MPI_LONG_LONG, 0, world);
  MPI_Bcast(&labelled_span, 1, MPI_LONG_LONG, 0, world);
  WarmStartSummary result;
  result.frames = count;
  result.labelled_span = labelled_span;
  // [largest force, lowest, highest energy per atom], on rank 0, then everywhere.
  double extremes[3] = {0.0, std::numeric_limits<double>::infinity(),
                        -std::numeric_limits<double>::infinity()};
  for (const LabelledFrame& frame : frames) {
    for (const double f : frame.forces) extremes[0] = std::max(extremes[0], std::abs(f));
    if (frame.num_atoms() == 0) continue;
    const double per_atom = frame.energy / static_cast<double>(frame.num_atoms());
    extremes[1] = std::min(extremes[1], per_atom);
    extremes[2] = std::max(extremes[2], per_atom);
  }
  MPI_Bcast(extremes, 3, MPI_DOUBLE, 0, world);
  result.largest_force = extremes[0];
  result.lowest_energy_per_atom = extremes[1];
  result.highest_energy_per_atom = extremes[2];
  for (long long k = 0; k < count; ++k) {
    agreed_or_throw(world, "warm start, frame " + std::to_string(k + 1), [&] {
      learn_whole_frame(session, rank == 0 ? &frames[static_cast<std::size_t>(k)] : nullptr, world);
    });
  }
  if (count > 0) agreed_or_throw(world, "warm start, validation", [&] { session.validate(); });
  result.log_line = "warm start: " + std::to_string(count) + " labelled frame(s) (" + summary +
                    ") in the replay buffer, " +
                    std::to_string(session.report().optimizer_steps) + " optimizer steps";
  return result;
}

}  // namespace otf
