#include "statistics_phase.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "frame_intake.h"
#include "state_archive.h"

namespace otf {

double StatisticsPhase::representative_limit(double atoms) {
  // The mean square over n atoms scatters by about sqrt(2 / n) of itself; two of that on top.
  const double noise = 2.0 * std::sqrt(2.0 / std::max(atoms, 1.0));
  return std::sqrt(kRepresentativeSpread * kRepresentativeSpread + noise);
}

int64_t StatisticsPhase::default_max_frames(int64_t frames_needed) {
  return std::max(kMaxFramesFactor * frames_needed, kMinFrameLimit);
}

StatisticsPhase::StatisticsPhase(int64_t frames_needed, bool already_frozen, int64_t max_frames,
                                 bool keeps_gathering) :
    frames_needed_(keeps_gathering ? 1 : frames_needed),
    max_frames_(std::max(max_frames > 0 ? max_frames : default_max_frames(frames_needed_),
                         frames_needed_)),
    ready_(!keeps_gathering && (frames_needed == 0 || already_frozen)),
    keeps_gathering_(keeps_gathering && !already_frozen) {}

void StatisticsPhase::add_frame(Potential& potential, const NeighborGraph& graph,
                                double frame_energy, Communicator& communicator) {
  if (ready_ && !keeps_gathering_) return;
  const LocalEnvironments env =
      local_environments(owned_centres(graph).to(potential.device()), potential.num_species(),
                         potential.cutoff(), potential.dtype());
  DescriptorMoments moments = potential.descriptor_moments(env);
  // Reduced over ranks on the host; the normaliser takes them back to the model's device.
  moments.count = moments.count.to(torch::kFloat64).cpu().contiguous();
  moments.sum = moments.sum.to(torch::kFloat64).cpu().contiguous();
  moments.sum_sq = moments.sum_sq.to(torch::kFloat64).cpu().contiguous();
  communicator.all_reduce_sum({moments.count, moments.sum, moments.sum_sq});
  last_spread_ratio_ = energies_.empty() ? 0.0 : potential.descriptor_spread_ratio(moments);
  last_limit_ = representative_limit(moments.count.sum().item<double>());
  potential.accumulate_descriptor_statistics(moments);
  if (ready_) return;  // keeps gathering: the shifts were fitted on the first frame
  counts_.push_back(moments.count.clone());
  energies_.push_back(frame_energy);
  const int64_t seen = frames();
  if (seen < frames_needed_) return;
  const bool representative = seen > 1 && last_spread_ratio_ <= last_limit_;
  if (!representative && seen < max_frames_ && !keeps_gathering_) return;
  torch::NoGradGuard no_grad;
  if (!potential.energy_shifts_fitted())
    potential.fit_energy_shifts(torch::stack(counts_), torch::tensor(energies_, torch::kFloat64));
  if (!keeps_gathering_) potential.freeze_descriptor_statistics();
  ready_ = true;
}

void StatisticsPhase::save(torch::serialize::OutputArchive& archive) const {
  state_archive::write_int(archive, "statistics/ready", ready_ ? 1 : 0);
  state_archive::write_int(archive, "statistics/frames", frames());
  if (energies_.empty()) return;
  archive.write("statistics/counts", torch::stack(counts_));
  archive.write("statistics/energies", torch::tensor(energies_, torch::kFloat64));
}

void StatisticsPhase::load(torch::serialize::InputArchive& archive, const std::string& what) {
  const bool ready = state_archive::read_int(archive, "statistics/ready", what) != 0;
  const int64_t frames = state_archive::read_int(archive, "statistics/frames", what);
  std::vector<torch::Tensor> counts;
  std::vector<double> energies;
  if (frames > 0) {
    const torch::Tensor stacked = state_archive::read_tensor(archive, "statistics/counts", what);
    const torch::Tensor values =
        state_archive::read_tensor(archive, "statistics/energies", what).contiguous();
    if (stacked.size(0) != frames || values.numel() != frames)
      throw std::runtime_error(what + ": the statistics phase's frames do not match their count");
    for (int64_t f = 0; f < frames; ++f) counts.push_back(stacked[f].clone());
    energies.assign(values.data_ptr<double>(), values.data_ptr<double>() + frames);
  }
  ready_ = ready;
  counts_ = std::move(counts);
  energies_ = std::move(energies);
}

}  // namespace otf
