/* ----------------------------------------------------------------------
   OTF-Torch: the training state of fix otf/train. The only file of the fix
   that includes LibTorch, the engine (src/) and the potentials layer.
------------------------------------------------------------------------- */

#include "otf_training_session.h"

#include "communicator.h"
#include "ema_hook.h"
#include "gradient_accumulation_hook.h"
#include "gradient_clip_hook.h"
#include "kokkos_device.h"
#include "losses.h"
#include "lr_schedules.h"
#include "mixed_precision_hook.h"
#include "model_file.h"
#include "mpi_communicator.h"
#include "neighbor_graph.h"
#include "optimizer_factory.h"
#include "potential.h"
#include "potential_training.h"
#include "precision.h"
#include "replay_buffer.h"
#include "training_checkpoint.h"
#include "training_strategy.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace otf {

struct TrainingSession::Impl {
  std::shared_ptr<Potential> potential;
  TrainingSessionSettings settings;
  std::shared_ptr<MpiCommunicator> communicator;
  std::unique_ptr<ReplayBuffer> buffer;
  std::unique_ptr<TrainingStrategy> strategy;
  // Hooks stay entered across train_batch calls (the strategy's Scope).
  std::unique_ptr<TrainingStrategy::Scope> scope;
  Precision precision = Precision::Float32;
  // Statistics phase: one row per frame ([species] atom counts) and the frame energies.
  std::vector<torch::Tensor> stats_counts;
  std::vector<double> stats_energies;
  bool statistics_ready = false;
  // The force component of the last loss (this rank's share), captured by the loss function.
  double last_force_component = 0.0;
  double last_other_components = 0.0;
  // Weights before the last labelled frame changed them (restart of the step's forces).
  std::vector<torch::Tensor> snapshot;
  std::shared_ptr<EmaHook> ema;                             // null without `ema`
  std::shared_ptr<GradientAccumulationHook> accumulation;   // null without `accumulate`
};

namespace {

// The rank's centres whose energy counts (its owned atoms) as a graph of their own: descriptor
// moments must count every atom of the frame once over all ranks.
NeighborGraph owned_centres(const NeighborGraph &graph)
{
  const torch::Tensor rows = graph.center_energy_mask.nonzero().squeeze(1);
  NeighborGraph owned = graph;
  owned.centers = graph.centers.index_select(0, rows);
  owned.neighbor_index = graph.neighbor_index.index_select(0, rows);
  owned.center_frame = graph.center_frame.index_select(0, rows);
  owned.center_energy_mask = graph.center_energy_mask.index_select(0, rows);
  return owned;
}

// The rank's part of a frame as a graph: centres in order (those of ignored species dropped),
// energies counted for owned centres only, and only the atoms the centres use (the ghost shell
// is twice the cutoff deep, most of it only there so that ghost centres have complete
// neighbourhoods). kept[a]: the frame atom that graph atom a is.
NeighborGraph frame_graph(const FramePart &frame, double cutoff, torch::Tensor *kept)
{
  const AtomicSystemView &view = frame.system;
  NeighborGraph graph = neighbor_graph_from_view(view, cutoff);
  std::vector<uint8_t> mask;
  for (int n = 0; n < view.num_centers; ++n)
    if (view.species[view.centers[n]] >= 0) mask.push_back(frame.center_energy_counts[n] ? 1 : 0);
  graph.center_energy_mask =
      torch::tensor(torch::ArrayRef<uint8_t>(mask), torch::kUInt8).to(torch::kBool);
  return drop_unused_atoms(graph, kept);
}

// The frame's force owners (FramePart::force_owner) as graph atom indices; undefined without.
torch::Tensor graph_force_owner(const FramePart &frame, const torch::Tensor &kept)
{
  if (!frame.force_owner) return {};
  const int64_t atoms = kept.size(0);
  std::vector<int64_t> graph_index(frame.system.num_atoms, -1);
  const torch::Tensor kept64 = kept.to(torch::kInt64).contiguous();
  const int64_t *original = kept64.data_ptr<int64_t>();
  for (int64_t a = 0; a < atoms; ++a) graph_index[original[a]] = a;
  std::vector<int64_t> owner(atoms);
  for (int64_t a = 0; a < atoms; ++a) {
    const int64_t target = graph_index[frame.force_owner[original[a]]];
    owner[a] = target >= 0 ? target : a;
  }
  return torch::tensor(owner, torch::kInt64);
}

// Little-endian-as-stored byte streams for the restart state (read back by the same build).
class ByteWriter {
 public:
  template <typename T> void put(const T &value)
  {
    bytes_.append(reinterpret_cast<const char *>(&value), sizeof(T));
  }
  void put_bytes(const std::string &value)
  {
    put<uint64_t>(value.size());
    bytes_.append(value);
  }
  void put_raw(const void *data, size_t size)
  {
    bytes_.append(static_cast<const char *>(data), size);
  }
  std::string take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

class ByteReader {
 public:
  explicit ByteReader(const std::string &bytes) : bytes_(bytes) {}
  template <typename T> T get()
  {
    T value;
    std::memcpy(&value, take(sizeof(T)), sizeof(T));
    return value;
  }
  std::string get_bytes()
  {
    const auto size = get<uint64_t>();
    return std::string(take(size), size);
  }
  const char *take(size_t size)
  {
    if (size > bytes_.size() - offset_)
      throw std::runtime_error("the saved training session state is truncated or damaged");
    const char *data = bytes_.data() + offset_;
    offset_ += size;
    return data;
  }
  bool done() const { return offset_ == bytes_.size(); }

 private:
  const std::string &bytes_;
  size_t offset_ = 0;
};

bool is_whole_number(double value, double least)
{
  return value >= least && value == std::floor(value) && value < 9.0e15;
}

// The fix's `lr_schedule <kind> <values...>` as the engine's schedule settings.
LRScheduleSettings lr_schedule_settings(LRScheduleKind kind, const std::vector<double> &values)
{
  auto expect = [&values](size_t least, size_t most, const std::string &usage) {
    if (values.size() < least || values.size() > most)
      throw std::invalid_argument("lr_schedule " + usage + " (got " +
                                  std::to_string(values.size()) + " value(s))");
  };
  auto whole = [](double value, const std::string &what) {
    if (!is_whole_number(value, 1.0))
      throw std::invalid_argument("lr_schedule: " + what + " must be a whole number >= 1");
    return static_cast<int64_t>(value);
  };
  LRScheduleSettings settings;
  switch (kind) {
    case LRScheduleKind::None: expect(0, 0, "none takes no values"); break;
    case LRScheduleKind::Step:
      expect(2, 2, "step needs <steps> <gamma>");
      settings.step_size = whole(values[0], "the step schedule's <steps>");
      settings.gamma = values[1];
      break;
    case LRScheduleKind::Exponential:
      expect(1, 1, "exponential needs <gamma>");
      settings.gamma = values[0];
      break;
    case LRScheduleKind::Cosine:
      expect(1, 2, "cosine needs <steps> [<lr_min>]");
      settings.t_max = whole(values[0], "the cosine schedule's <steps>");
      if (values.size() > 1) settings.eta_min = values[1];
      break;
    case LRScheduleKind::Plateau: {
      expect(2, 3, "plateau needs <factor> <patience> [<lr_min>]");
      PlateauOptions plateau;
      plateau.factor = values[0];
      if (!is_whole_number(values[1], 0.0))
        throw std::invalid_argument("lr_schedule: the plateau schedule's <patience> must be a "
                                    "whole number >= 0");
      plateau.patience = static_cast<int64_t>(values[1]);
      if (values.size() > 2) plateau.min_lr = values[2];
      settings.plateau = plateau;
      break;
    }
  }
  return settings;
}

constexpr uint64_t kSessionStateTag = 0x31534554534f544fULL;    // "OTOSTES1"

std::vector<torch::Tensor> model_state_tensors(Potential &potential)
{
  std::vector<torch::Tensor> tensors;
  for (const auto &p : potential.parameters()) tensors.push_back(p);
  for (const auto &b : potential.buffers()) tensors.push_back(b);
  return tensors;
}

}    // namespace

TrainingSession::TrainingSession(std::shared_ptr<Potential> potential,
                                 const TrainingSessionSettings &settings, MPI_Comm world) :
    impl_(std::make_unique<Impl>())
{
  Impl &s = *impl_;
  s.potential = std::move(potential);
  s.settings = settings;
  s.precision = parse_precision(settings.precision);
  s.communicator = std::make_shared<MpiCommunicator>(world);

  ReplayBufferOptions buffer_options;
  // Frames only, never bytes: every rank then evicts and samples the same frame indices.
  buffer_options.capacity_frames = settings.buffer_frames;
  buffer_options.validation_fraction = settings.validation_fraction;
  buffer_options.seed = settings.seed;
  s.buffer = std::make_unique<ReplayBuffer>(buffer_options);

  const bool stress = settings.stress_weight > 0.0;
  ComposedLossSettings loss_settings;
  EnergyLossOptions energy_options;
  energy_options.per_atom = true;
  loss_settings.energy = WeightedLoss<EnergyLossOptions>{settings.energy_weight, energy_options};
  loss_settings.forces = WeightedLoss<ForceLossOptions>{settings.force_weight, {}};
  if (stress) loss_settings.stress = WeightedLoss<StressLossOptions>{settings.stress_weight, {}};
  auto composed = std::make_shared<ComposedLoss>(loss_settings);

  PotentialTrainingOptions training_options;
  training_options.train_members = true;
  training_options.stress = stress;
  training_options.communicator = s.communicator;

  const LossFunction loss = potential_loss_function(composed, s.potential->committee_size(), true);
  Impl *state = impl_.get();
  TrainingStrategyOptions options;
  options.models = {{"main", s.potential}};
  options.training_fn = potential_training_function(training_options);
  // Keeps the parts of the loss for the report: the force term is this rank's share of a sum over
  // ranks, the energy and stress terms are whole-frame values, the same on every rank.
  options.loss_fn = [loss, state](const Predictions &predictions, const TrainingBatch &batch,
                                  int64_t step, int64_t epoch) {
    LossOutput out = loss(predictions, batch, step, epoch);
    double force = 0.0, other = 0.0;
    for (const auto &[name, value] : out.per_component_unweighted) {
      const double weighted = value.detach().item<double>() * out.per_component_weight.at(name);
      (name == "forces" ? force : other) += weighted;
    }
    state->last_force_component = force;
    state->last_other_components = other;
    return out;
  };
  OptimizerSettings optimizer_settings;
  optimizer_settings.learning_rate = settings.learning_rate;
  const OptimizerKind kind = parse_optimizer_kind(settings.optimizer);
  OptimizerConfig optimizer_config;
  optimizer_config.make_optimizer = [kind, optimizer_settings](std::vector<torch::Tensor> params) {
    return make_optimizer(kind, std::move(params), optimizer_settings);
  };
  const LRScheduleKind schedule = parse_lr_schedule_kind(settings.lr_schedule);
  const LRScheduleSettings schedule_settings =
      lr_schedule_settings(schedule, settings.lr_schedule_parameters);
  if (schedule != LRScheduleKind::None) {
    // Built now once on a throwaway optimizer, so that a bad value fails at the fix command.
    torch::Tensor probe = torch::zeros({1}, torch::requires_grad());
    torch::optim::SGD probe_optimizer({probe}, torch::optim::SGDOptions(1.0));
    make_lr_scheduler(schedule, probe_optimizer, schedule_settings);
    optimizer_config.make_scheduler = [schedule, schedule_settings](torch::optim::Optimizer &o) {
      return make_lr_scheduler(schedule, o, schedule_settings);
    };
  }
  options.optimizer_configs.push_back(optimizer_config);

  GradScalerOptions scaler;
  scaler.init_scale = settings.scale_init;
  scaler.growth_factor = settings.scale_growth;
  scaler.backoff_factor = settings.scale_backoff;
  scaler.growth_interval = settings.scale_interval;
  options.hooks.push_back(std::make_shared<MixedPrecisionHook>(s.precision, scaler));
  if (settings.clip_max_norm > 0.0)
    options.hooks.push_back(std::make_shared<GradientClipHook>(settings.clip_max_norm));
  if (settings.accumulate > 1) {
    s.accumulation = std::make_shared<GradientAccumulationHook>(settings.accumulate);
    options.hooks.push_back(s.accumulation);
  }
  if (settings.ema_decay > 0.0) {
    EmaOptions ema;
    ema.decay = settings.ema_decay;
    s.ema = std::make_shared<EmaHook>(ema);
    options.hooks.push_back(s.ema);
  }

  const c10::Device device =
      settings.kokkos_execution_space.empty()
          ? c10::Device(c10::kCPU)
          : torch_device_for_kokkos(settings.kokkos_execution_space, settings.kokkos_device_id);
  options.devices = training_devices(device);
  s.strategy = std::make_unique<TrainingStrategy>(std::move(options));
  s.strategy->set_communicator(s.communicator);

  // Every rank starts from rank 0's weights and statistics (they were loaded from the same bytes,
  // so this only guards the invariant).
  {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> state_tensors = model_state_tensors(*s.potential);
    broadcast_parameters(*s.communicator, state_tensors, 0);
  }
  s.statistics_ready = settings.stats_frames == 0 || s.potential->descriptor_statistics_frozen();
}

TrainingSession::~TrainingSession() = default;

bool TrainingSession::statistics_ready() const
{
  return impl_->statistics_ready;
}

void TrainingSession::add_frame(const FramePart &frame)
{
  Impl &s = *impl_;
  const AtomicSystemView &view = frame.system;
  torch::Tensor kept;
  const NeighborGraph graph = frame_graph(frame, s.potential->cutoff(), &kept);

  FrameLabels labels;
  labels.energy = frame.energy;
  labels.atoms_in_frame = frame.atoms_in_frame;
  torch::Tensor all_forces = torch::zeros({view.num_atoms, 3}, torch::kFloat64);
  if (view.num_local > 0)
    all_forces.narrow(0, 0, view.num_local)
        .copy_(torch::from_blob(const_cast<double *>(frame.owned_forces), {view.num_local, 3},
                                torch::kFloat64));
  labels.forces = all_forces.index_select(0, kept);
  labels.force_mask = kept < view.num_local;
  labels.force_owner = graph_force_owner(frame, kept);
  if (s.settings.stress_weight > 0.0) {
    const auto &w = frame.virial;
    labels.stress = -torch::tensor({w[0], w[3], w[4], w[3], w[1], w[5], w[4], w[5], w[2]},
                                   torch::kFloat64)
                         .reshape({3, 3}) /
        frame.volume;
    labels.volume = frame.volume;
  }

  if (!s.statistics_ready) {
    const LocalEnvironments env = local_environments(
        owned_centres(graph).to(s.potential->device()), s.potential->num_species(),
        s.potential->cutoff(), s.potential->dtype());
    DescriptorMoments moments = s.potential->descriptor_moments(env);
    // Reduced over ranks on the host; the normaliser takes them back to the model's device.
    moments.count = moments.count.to(torch::kFloat64).cpu().contiguous();
    moments.sum = moments.sum.to(torch::kFloat64).cpu().contiguous();
    moments.sum_sq = moments.sum_sq.to(torch::kFloat64).cpu().contiguous();
    s.communicator->all_reduce_sum({moments.count, moments.sum, moments.sum_sq});
    s.potential->accumulate_descriptor_statistics(moments);
    s.stats_counts.push_back(moments.count.clone());
    s.stats_energies.push_back(frame.energy);
    if (static_cast<int64_t>(s.stats_energies.size()) >= s.settings.stats_frames) {
      torch::NoGradGuard no_grad;
      if (!s.potential->energy_shifts_fitted())
        s.potential->fit_energy_shifts(torch::stack(s.stats_counts),
                                       torch::tensor(s.stats_energies, torch::kFloat64));
      s.potential->freeze_descriptor_statistics();
      s.statistics_ready = true;
    }
  }

  s.buffer->add(labelled_frame(graph, labels));
  s.potential->training_metadata().frames_seen += 1;
  report_.buffer_frames = s.buffer->training_size() + s.buffer->validation_size();
}

void TrainingSession::train()
{
  Impl &s = *impl_;
  if (!s.statistics_ready || s.buffer->training_size() == 0) return;
  if (!s.scope) s.scope = std::make_unique<TrainingStrategy::Scope>(*s.strategy);
  for (int64_t k = 0; k < s.settings.steps_per_frame; ++k) {
    TrainingBatch batch = concatenate_frames(s.buffer->sample(s.settings.batch_frames));
    // Data-parallel force normalizer: the force components of the batch over every rank.
    torch::Tensor components =
        (batch.at("force_mask").sum().to(torch::kFloat64) * 3.0).reshape({}).contiguous();
    s.communicator->all_reduce_sum({components});
    batch.set("forces_loss_normalizer", components);
    // Under accumulation only the last batch of a group may step; it is skipped when it does
    // not (float16 overflow).
    const bool may_step = !s.accumulation || s.accumulation->completes_group();
    const int64_t steps_before = s.strategy->counters().step_count;
    s.strategy->train_batch(batch);
    if (may_step && s.strategy->counters().step_count == steps_before) ++report_.skipped_steps;
    const double force_total = s.communicator->all_reduce_sum(s.last_force_component);
    report_.last_loss = force_total + s.last_other_components;
  }
  const TrainingCounters &counters = s.strategy->counters();
  report_.optimizer_steps = counters.step_count;
  GradScaler *scaler = s.strategy->grad_scaler();
  report_.loss_scale = scaler ? scaler->get_scale() : 1.0;
  s.potential->training_metadata().optimizer_steps = counters.step_count;
  s.potential->training_metadata().precision = to_string(s.precision);
}

void TrainingSession::validate()
{
  Impl &s = *impl_;
  const std::vector<TrainingBatch> frames = s.buffer->validation_frames();
  if (frames.empty()) return;
  const bool stress = s.settings.stress_weight > 0.0;
  // Per frame: energy (this rank's part), virial [9], squared force error, force components.
  double energy_sq = 0.0, stress_sq = 0.0, force_sq_local = 0.0, components_local = 0.0;
  for (const TrainingBatch &frame : frames) {
    // Frames are stored on the host; the model may be on a GPU (fix otf/train under Kokkos).
    const NeighborGraph graph = neighbor_graph_from_batch(frame).to(s.potential->device());
    PredictionOptions options;
    options.forces = true;
    options.virial = stress;
    const Prediction prediction = predict(*s.potential, graph, options);
    const torch::Tensor mask = frame.at("force_mask");
    torch::Tensor forces = prediction.forces.detach().to(torch::kFloat64).cpu();
    if (frame.contains("force_owner")) forces = fold_forces(forces, frame.at("force_owner"));
    const torch::Tensor difference = (forces - frame.at("forces")).index({mask});
    force_sq_local += difference.pow(2).sum().item<double>();
    components_local += 3.0 * static_cast<double>(difference.size(0));
    std::vector<torch::Tensor> totals{prediction.energy.detach().to(torch::kFloat64).cpu().contiguous()};
    if (stress) totals.push_back(prediction.virial.detach().to(torch::kFloat64).cpu().contiguous());
    s.communicator->all_reduce_sum(totals);
    const double atoms = frame.at("atoms_per_frame").item<double>();
    const double energy_error = (totals[0].item<double>() - frame.at("energy").item<double>()) / atoms;
    energy_sq += energy_error * energy_error;
    if (stress) {
      const torch::Tensor predicted = -totals[1].reshape({3, 3}) / frame.at("volume").item<double>();
      stress_sq += (predicted - frame.at("stress").reshape({3, 3})).pow(2).mean().item<double>();
    }
  }
  const double n = static_cast<double>(frames.size());
  const double force_sq = s.communicator->all_reduce_sum(force_sq_local);
  const double components = s.communicator->all_reduce_sum(components_local);
  report_.energy_rmse_per_atom = std::sqrt(energy_sq / n);
  report_.force_rmse = components > 0.0 ? std::sqrt(force_sq / components) : 0.0;
  report_.stress_rmse = stress ? std::sqrt(stress_sq / n) : 0.0;
  report_.validated = true;

  // Every rank holds the same reduced values, so every rank takes the same decision.
  const std::vector<LRScheduler *> schedules = s.strategy->lr_schedulers();
  if (report_.optimizer_steps > 0 && !schedules.empty() && schedules.front() &&
      schedules.front()->is_metric_driven()) {
    const double loss = s.settings.energy_weight * energy_sq / n +
        s.settings.force_weight * report_.force_rmse * report_.force_rmse +
        s.settings.stress_weight * stress_sq / n;
    schedules.front()->step_with_metric(loss);
  }
}

double TrainingSession::force_uncertainty(const FramePart &frame, double *per_owned_atom)
{
  Impl &s = *impl_;
  const AtomicSystemView &view = frame.system;
  std::fill(per_owned_atom, per_owned_atom + view.num_local, 0.0);
  double local_max = 0.0;
  if (view.num_centers > 0 && s.potential->committee_size() > 1) {
    torch::Tensor kept;
    const NeighborGraph graph = frame_graph(frame, s.potential->cutoff(), &kept);
    PredictionOptions options;
    options.forces = true;
    options.virial = false;
    options.member_forces = true;
    const Prediction prediction = predict(*s.potential, graph.to(s.potential->device()), options);
    torch::Tensor members = prediction.member_forces.detach().to(torch::kFloat64).cpu();
    const torch::Tensor owner = graph_force_owner(frame, kept);
    if (owner.defined()) members = fold_forces(members, owner);
    const torch::Tensor spread =
        (members - members.mean(0, true)).pow(2).sum(-1).mean(0).sqrt().contiguous();
    const torch::Tensor atoms = kept.to(torch::kInt64).contiguous();
    const double *values = spread.data_ptr<double>();
    const int64_t *atom = atoms.data_ptr<int64_t>();
    for (int64_t a = 0; a < atoms.numel(); ++a) {
      if (atom[a] >= view.num_local) continue;
      per_owned_atom[atom[a]] = values[a];
      local_max = std::max(local_max, values[a]);
    }
  }
  torch::Tensor largest = torch::full({1}, local_max, torch::kFloat64);
  s.communicator->all_reduce_max({largest});
  return largest.item<double>();
}

std::string TrainingSession::device_name() const
{
  return impl_->strategy->devices().front().str();
}

double TrainingSession::learning_rate() const
{
  const std::vector<torch::optim::Optimizer *> optimizers = impl_->strategy->optimizers();
  if (optimizers.empty() || optimizers.front()->param_groups().empty())
    return impl_->settings.learning_rate;
  return optimizers.front()->param_groups().front().options().get_lr();
}

uint64_t TrainingSession::weights_hash() const
{
  uint64_t hash = 1469598103934665603ULL;
  auto add = [&hash](const torch::Tensor &tensor) {
    const torch::Tensor bytes = tensor.detach().contiguous();
    const auto *data = static_cast<const unsigned char *>(bytes.data_ptr());
    const size_t size = bytes.numel() * bytes.element_size();
    for (size_t i = 0; i < size; ++i) {
      hash ^= data[i];
      hash *= 1099511628211ULL;
    }
  };
  for (const torch::Tensor &tensor : model_state_tensors(*impl_->potential)) add(tensor);
  return hash;
}

void TrainingSession::save(const std::string &path) const
{
  Impl &s = *impl_;
  if (!s.ema || !s.ema->initialized() || s.ema->num_updates() == 0) {
    save_model(*s.potential, path);
    return;
  }
  // The averages go into the model for the write and the live weights come back afterwards,
  // also when the write fails.
  std::vector<torch::Tensor> tensors = model_state_tensors(*s.potential);
  std::vector<torch::Tensor> live;
  for (const torch::Tensor &tensor : tensors) live.push_back(tensor.detach().clone());
  struct Restore {
    std::vector<torch::Tensor> &tensors;
    const std::vector<torch::Tensor> &live;
    ~Restore()
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < tensors.size(); ++i) tensors[i].copy_(live[i]);
    }
  } restore{tensors, live};
  {
    torch::NoGradGuard no_grad;
    s.ema->copy_averaged_to(*s.potential);
  }
  save_model(*s.potential, path);
}

std::string TrainingSession::save_state(bool with_snapshot) const
{
  Impl &s = *impl_;
  ByteWriter out;
  out.put(kSessionStateTag);
  const std::vector<torch::Tensor> tensors = model_state_tensors(*s.potential);
  out.put<uint64_t>(tensors.size());
  for (const torch::Tensor &tensor : tensors) {
    const torch::Tensor data = tensor.detach().cpu().contiguous();
    out.put<int32_t>(static_cast<int32_t>(data.scalar_type()));
    out.put<int64_t>(data.numel());
    out.put_raw(data.data_ptr(), data.numel() * data.element_size());
  }
  out.put_bytes(save_training_state(*s.strategy));
  out.put<uint8_t>(s.statistics_ready ? 1 : 0);
  out.put<uint64_t>(s.stats_counts.size());
  for (const torch::Tensor &row : s.stats_counts) {
    const torch::Tensor data = row.detach().to(torch::kFloat64).contiguous();
    out.put<int64_t>(data.numel());
    out.put_raw(data.data_ptr(), data.numel() * sizeof(double));
  }
  out.put<uint64_t>(s.stats_energies.size());
  for (double e : s.stats_energies) out.put(e);
  out.put(s.last_force_component);
  out.put(s.last_other_components);
  const TrainingReport &r = report_;
  for (double v : {r.last_loss, r.energy_rmse_per_atom, r.force_rmse, r.stress_rmse, r.loss_scale})
    out.put(v);
  for (int64_t v : {r.skipped_steps, r.optimizer_steps, r.buffer_frames}) out.put(v);
  out.put<uint8_t>(r.validated ? 1 : 0);
  const TrainingMetadata &metadata = s.potential->training_metadata();
  out.put(metadata.optimizer_steps);
  out.put(metadata.frames_seen);
  out.put_bytes(metadata.precision);
  const bool snapshot = with_snapshot && s.snapshot.size() == tensors.size();
  out.put<uint8_t>(snapshot ? 1 : 0);
  if (snapshot)
    for (const torch::Tensor &tensor : s.snapshot)
      out.put_raw(tensor.data_ptr(), tensor.numel() * tensor.element_size());
  return out.take();
}

void TrainingSession::load_state(const std::string &bytes)
{
  Impl &s = *impl_;
  ByteReader in(bytes);
  if (in.get<uint64_t>() != kSessionStateTag)
    throw std::runtime_error("not an OTF-Torch training session state");
  std::vector<torch::Tensor> tensors = model_state_tensors(*s.potential);
  const auto count = in.get<uint64_t>();
  if (count != tensors.size())
    throw std::runtime_error("the saved model has " + std::to_string(count) +
                             " parameters and buffers, this model has " +
                             std::to_string(tensors.size()) + " (a different model spec?)");
  std::vector<torch::Tensor> saved;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto type = static_cast<torch::ScalarType>(in.get<int32_t>());
    const auto numel = in.get<int64_t>();
    if (type != tensors[i].scalar_type() || numel != tensors[i].numel())
      throw std::runtime_error("saved model tensor " + std::to_string(i) +
                               " differs in type or size from this model's (a different model "
                               "spec?)");
    const size_t size = static_cast<size_t>(numel) * tensors[i].element_size();
    saved.push_back(torch::from_blob(const_cast<char *>(in.take(size)), tensors[i].sizes(),
                                     torch::TensorOptions().dtype(type))
                        .clone());
  }
  const std::string training_state = in.get_bytes();
  const bool statistics_ready = in.get<uint8_t>() != 0;
  std::vector<torch::Tensor> stats_counts;
  for (auto rows = in.get<uint64_t>(); rows > 0; --rows) {
    const auto numel = in.get<int64_t>();
    stats_counts.push_back(
        torch::from_blob(const_cast<char *>(in.take(numel * sizeof(double))), {numel},
                         torch::kFloat64)
            .clone());
  }
  std::vector<double> stats_energies(in.get<uint64_t>());
  for (double &e : stats_energies) e = in.get<double>();
  const double last_force = in.get<double>();
  const double last_other = in.get<double>();
  TrainingReport r;
  for (double *v : {&r.last_loss, &r.energy_rmse_per_atom, &r.force_rmse, &r.stress_rmse,
                    &r.loss_scale})
    *v = in.get<double>();
  for (int64_t *v : {&r.skipped_steps, &r.optimizer_steps, &r.buffer_frames})
    *v = in.get<int64_t>();
  r.validated = in.get<uint8_t>() != 0;
  TrainingMetadata metadata = s.potential->training_metadata();
  metadata.optimizer_steps = in.get<int64_t>();
  metadata.frames_seen = in.get<int64_t>();
  metadata.precision = in.get_bytes();
  std::vector<torch::Tensor> snapshot;
  if (in.get<uint8_t>() != 0)
    for (const torch::Tensor &tensor : tensors)
      snapshot.push_back(
          torch::from_blob(const_cast<char *>(in.take(tensor.numel() * tensor.element_size())),
                           tensor.sizes(), torch::TensorOptions().dtype(tensor.scalar_type()))
              .clone());
  if (!in.done()) throw std::runtime_error("the saved training session state has trailing bytes");

  // Everything parsed: now change the session. The strategy's loader builds its optimizers over
  // the model's parameters; the weights are then copied in place (the pair keeps its model).
  s.scope.reset();
  load_training_state(*s.strategy, training_state);
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < tensors.size(); ++i) tensors[i].copy_(saved[i]);
  }
  s.statistics_ready = statistics_ready;
  s.stats_counts = std::move(stats_counts);
  s.stats_energies = std::move(stats_energies);
  s.last_force_component = last_force;
  s.last_other_components = last_other;
  s.potential->training_metadata() = metadata;
  s.snapshot = std::move(snapshot);
  r.buffer_frames = s.buffer->training_size() + s.buffer->validation_size();
  report_ = r;
}

void TrainingSession::snapshot_weights()
{
  Impl &s = *impl_;
  const std::vector<torch::Tensor> tensors = model_state_tensors(*s.potential);
  torch::NoGradGuard no_grad;
  if (s.snapshot.size() != tensors.size()) {
    s.snapshot.clear();
    for (const torch::Tensor &tensor : tensors)
      s.snapshot.push_back(tensor.detach().cpu().contiguous().clone());
    return;
  }
  for (size_t i = 0; i < tensors.size(); ++i) s.snapshot[i].copy_(tensors[i]);
}

bool TrainingSession::swap_snapshot_weights()
{
  Impl &s = *impl_;
  std::vector<torch::Tensor> tensors = model_state_tensors(*s.potential);
  if (s.snapshot.size() != tensors.size()) return false;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const torch::Tensor current = tensors[i].detach().clone();
    tensors[i].copy_(s.snapshot[i]);
    s.snapshot[i].copy_(current);
  }
  return true;
}

void TrainingSession::clear_snapshot()
{
  impl_->snapshot.clear();
}

std::string TrainingSession::save_buffer_state() const
{
  return impl_->buffer->save_state();
}

void TrainingSession::load_buffer_state(const std::string &bytes)
{
  impl_->buffer->load_state(bytes);
  report_.buffer_frames = impl_->buffer->training_size() + impl_->buffer->validation_size();
}

}    // namespace otf
