#include "training_session.h"

#include "bayesian_linear_training.h"
#include "committee_deviation.h"
#include "communicator.h"
#include "ema_hook.h"
#include "fnv1a.h"
#include "frame_intake.h"
#include "gradient_accumulation_hook.h"
#include "gradient_clip_hook.h"
#include "keywords.h"
#include "kokkos_device.h"
#include "losses.h"
#include "lr_schedules.h"
#include "mixed_precision_hook.h"
#include "model_file.h"
#include "mpi_communicator.h"
#include "non_finite_step_hook.h"
#include "neighbor_graph.h"
#include "optimizer_factory.h"
#include "potential.h"
#include "potential_training.h"
#include "precision.h"
#include "replay_buffer.h"
#include "state_archive.h"
#include "statistics_phase.h"
#include "training_checkpoint.h"
#include "training_strategy.h"

#include <torch/torch.h>

#include <algorithm>
#include <climits>
#include <cmath>
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
  std::unique_ptr<StatisticsPhase> statistics;
  // The force component of the last loss (this rank's share), captured by the loss function.
  double last_force_component = 0.0;
  double last_other_components = 0.0;
  // Weights before the last labelled frame changed them (restart of the step's forces).
  std::vector<torch::Tensor> snapshot;
  std::shared_ptr<EmaHook> ema;                             // null without `ema`
  std::shared_ptr<GradientAccumulationHook> accumulation;   // null without `accumulate`
  // A model fitted in closed form: each buffered frame's rows, kept between fits.
  FrameRowsCache frame_rows;
};

namespace {


// Frames stacked into one batch with the data-parallel force normaliser: the force components of
// the batch over every rank.
TrainingBatch data_parallel_batch(const std::vector<TrainingBatch> &frames,
                                  Communicator &communicator)
{
  TrainingBatch batch = concatenate_frames(frames);
  torch::Tensor components =
      (batch.at("force_mask").sum().to(torch::kFloat64) * 3.0).reshape({}).contiguous();
  communicator.all_reduce_sum({components});
  batch.set("forces_loss_normalizer", components);
  return batch;
}


const state_archive::StateKind kStateKind{"otf-torch training session state", 1,
                                          "the training session state",
                                          "not an OTF-Torch training session state"};
const std::string &kStateWhat = kStateKind.noun;

std::vector<torch::Tensor> model_state_tensors(Potential &potential)
{
  std::vector<torch::Tensor> tensors;
  for (const auto &p : potential.parameters()) tensors.push_back(p);
  for (const auto &b : potential.buffers()) tensors.push_back(b);
  return tensors;
}

// [tensors, 2]: every parameter's and buffer's element count and scalar type, so that a state
// saved from another model spec is refused before anything is loaded.
torch::Tensor model_signature(Potential &potential)
{
  std::vector<int64_t> signature;
  for (const torch::Tensor &tensor : model_state_tensors(potential)) {
    signature.push_back(tensor.numel());
    signature.push_back(static_cast<int64_t>(tensor.scalar_type()));
  }
  return torch::tensor(signature, torch::kInt64).reshape({-1, 2});
}

void check_model_signature(const torch::Tensor &saved, Potential &potential)
{
  const torch::Tensor own = model_signature(potential);
  if (saved.dim() != 2 || saved.size(0) != own.size(0))
    throw std::runtime_error("the saved model has " + std::to_string(saved.size(0)) +
                             " parameters and buffers, this model has " +
                             std::to_string(own.size(0)) + " (a different model spec?)");
  for (int64_t i = 0; i < own.size(0); ++i)
    if (!saved[i].equal(own[i]))
      throw std::runtime_error("saved model tensor " + std::to_string(i) +
                               " differs in type or size from this model's (a different model "
                               "spec?)");
}

}    // namespace

void check_session_settings(const TrainingSessionSettings &settings)
{
  require_integer_in("steps_per_frame", settings.steps_per_frame, 0, 100000);
  require_integer_in("batch", settings.batch_frames, 1, 100000);
  require_real_in("lr", settings.learning_rate, 0.0, 1e30);
  require_real_in("weights E", settings.energy_weight, 0.0, 1e30);
  require_real_in("weights F", settings.force_weight, 0.0, 1e30);
  require_real_in("weights S", settings.stress_weight, 0.0, 1e30);
  if (settings.energy_weight + settings.force_weight + settings.stress_weight <= 0.0)
    throw std::invalid_argument("weights E F S must be >= 0 and not all 0");
  require_integer_in("seed", static_cast<int64_t>(settings.seed), 0, INT_MAX);
  require_real_in("clip", settings.clip_max_norm, 0.0, 1e30);
  require_integer_in("stats_frames", settings.stats_frames, 0, 100000);
  require_integer_in("accumulate", settings.accumulate, 1, 100000);
  // The engine's components state their own rules; the message says which keywords they came
  // from.
  const auto owned_by = [](const std::string &keywords, auto &&check) {
    try {
      check();
    } catch (const std::invalid_argument &e) {
      throw std::invalid_argument(keywords + ": " + e.what());
    }
  };
  owned_by("buffer " + std::to_string(settings.buffer_frames) + ", validation " +
               format_number(settings.validation_fraction),
           [&] {
             ReplayBufferOptions buffer;
             buffer.capacity_frames = settings.buffer_frames;
             buffer.validation_fraction = settings.validation_fraction;
             check_replay_buffer_options(buffer);
           });
  const GradScalerOptions &scaler = settings.grad_scaler;
  owned_by("scale_init " + format_number(scaler.init_scale) + ", scale_growth " +
               format_number(scaler.growth_factor) + ", scale_backoff " +
               format_number(scaler.backoff_factor) + ", scale_interval " +
               std::to_string(scaler.growth_interval),
           [&] { check_grad_scaler_options(scaler); });
  if (settings.ema_decay != 0.0)
    owned_by("ema " + format_number(settings.ema_decay), [&] {
      EmaOptions ema;
      ema.decay = settings.ema_decay;
      EmaHook::check_options(ema);
    });
  owned_by("lr_schedule " + to_string(settings.lr_schedule),
           [&] { check_lr_schedule(settings.lr_schedule, settings.lr_schedule_settings); });
}

TrainingSession::TrainingSession(std::shared_ptr<Potential> potential,
                                 const TrainingSessionSettings &settings, MPI_Comm world) :
    impl_(std::make_unique<Impl>())
{
  Impl &s = *impl_;
  s.potential = std::move(potential);
  s.settings = settings;
  check_session_settings(settings);
  s.precision = settings.precision;
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
  const OptimizerKind kind = settings.optimizer;
  OptimizerConfig optimizer_config;
  optimizer_config.make_optimizer = [kind, optimizer_settings](std::vector<torch::Tensor> params) {
    return make_optimizer(kind, std::move(params), optimizer_settings);
  };
  if (settings.lr_schedule != LRScheduleKind::None) {
    optimizer_config.make_scheduler = [schedule = settings.lr_schedule,
                                       schedule_settings = settings.lr_schedule_settings](
                                          torch::optim::Optimizer &o) {
      return make_lr_scheduler(schedule, o, schedule_settings);
    };
  }
  options.optimizer_configs.push_back(optimizer_config);

  options.hooks.push_back(std::make_shared<MixedPrecisionHook>(s.precision, settings.grad_scaler));
  // Under float16 the GradScaler skips inf/NaN steps itself (and must see them to back off).
  if (s.precision != Precision::Float16)
    options.hooks.push_back(std::make_shared<NonFiniteStepHook>());
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

  // Training runs where the model is: the host, or the GPU pair_style otf/kk placed it on
  // (docs/design.md §10); that device holds the autocast region and the GradScaler.
  options.devices = training_devices(s.potential->device());
  s.strategy = std::make_unique<TrainingStrategy>(std::move(options));
  s.strategy->set_communicator(s.communicator);

  // Every rank starts from rank 0's weights and statistics (they were loaded from the same bytes,
  // so this only guards the invariant).
  {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> state_tensors = model_state_tensors(*s.potential);
    broadcast_parameters(*s.communicator, state_tensors, 0);
  }
  s.statistics = std::make_unique<StatisticsPhase>(
      settings.stats_frames, s.potential->descriptor_statistics_frozen(), 0,
      s.potential->learns_in_closed_form());
}

TrainingSession::~TrainingSession() = default;

bool TrainingSession::statistics_ready() const
{
  return impl_->statistics->ready();
}

const std::shared_ptr<Potential> &TrainingSession::potential() const
{
  return impl_->potential;
}

StatisticsSummary TrainingSession::statistics_summary() const
{
  const StatisticsPhase &phase = *impl_->statistics;
  return {phase.frames(), phase.frames_needed(), phase.last_spread_ratio(), phase.last_limit()};
}

void TrainingSession::add_frame(const FramePart &frame)
{
  Impl &s = *impl_;
  const FrameGraph graph = frame_graph(frame, s.potential->cutoff(), s.communicator->rank());
  const FrameLabels labels = frame_labels(frame, graph, s.settings.stress_weight > 0.0);
  s.statistics->add_frame(*s.potential, graph.graph, frame.energy, *s.communicator);
  s.buffer->add(labelled_frame(graph.graph, labels));
  report_.frame_centres = graph.graph.centers.size(0);
  report_.frame_atoms = graph.kept_atoms.size(0);
  s.potential->training_metadata().frames_seen += 1;
  report_.buffer_frames = s.buffer->training_size() + s.buffer->validation_size();
}

bool TrainingSession::fits_in_closed_form() const
{
  return impl_->potential->learns_in_closed_form();
}

void TrainingSession::fit_in_closed_form()
{
  Impl &s = *impl_;
  auto &model = dynamic_cast<BayesianLinearPotential &>(*s.potential);
  if (model.device().type() != torch::kCPU)
    throw std::invalid_argument("architecture '" + std::string(BayesianLinearPotential::kArchitecture) +
                                "' is fitted on the host: train it without a GPU (no Kokkos device)");
  // Every label paid for is learned from: the validation frames too (the calibrated accuracy
  // criterion judges the model by its predictions before each label, not by held-back frames).
  std::vector<TrainingBatch> frames = s.buffer->training_frames();
  for (TrainingBatch &frame : s.buffer->validation_frames()) frames.push_back(std::move(frame));
  fit_bayesian_linear(model, frames, s.communicator, EvidenceOptions{}, &s.frame_rows);
  report_.optimizer_steps = model.fits();
  report_.consecutive_skipped_steps = 0;
  s.potential->training_metadata().optimizer_steps = model.fits();
  s.potential->training_metadata().precision = to_string(s.precision);
}

void TrainingSession::train()
{
  Impl &s = *impl_;
  if (fits_in_closed_form()) {
    // steps_per_frame 0 only collects frames (held-out labels), whatever the learner.
    if (s.settings.steps_per_frame > 0 && s.statistics->ready() &&
        s.buffer->training_size() + s.buffer->validation_size() > 0)
      fit_in_closed_form();
    return;
  }
  if (!s.statistics->ready() || s.buffer->training_size() == 0) return;
  if (!s.scope) s.scope = std::make_unique<TrainingStrategy::Scope>(*s.strategy);
  for (int64_t k = 0; k < s.settings.steps_per_frame; ++k) {
    const TrainingBatch batch =
        data_parallel_batch(s.buffer->sample(s.settings.batch_frames), *s.communicator);
    // Under accumulation only the last batch of a group may step; it is skipped when it does
    // not (float16 overflow).
    const bool may_step = !s.accumulation || s.accumulation->completes_group();
    const bool stepped = s.strategy->train_batch(batch);
    const double force_total = s.communicator->all_reduce_sum(s.last_force_component);
    report_.last_loss = force_total + s.last_other_components;
    if (may_step && !stepped) {
      ++report_.skipped_steps;
      // Under float16 the GradScaler skips while it lowers an initial scale that is too large:
      // that is calibration, not divergence, unless the loss itself is not finite or even a
      // scale below 1 overflows.
      const GradScaler *scaler = s.strategy->grad_scaler();
      const bool diverging = s.precision != Precision::Float16 ||
                             !std::isfinite(report_.last_loss) ||
                             (scaler != nullptr && scaler->get_scale() < 1.0);
      report_.consecutive_skipped_steps = diverging ? report_.consecutive_skipped_steps + 1 : 0;
    } else if (stepped) {
      report_.consecutive_skipped_steps = 0;
    }
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
    const torch::Tensor forces =
        owned_forces(prediction.forces.detach().to(torch::kFloat64).cpu(), force_routing(frame), s.communicator);
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

  // A plateau schedule steps on the engine's validation loss over the same frames (the training
  // loss, member-resolved, in the training precision); every rank reduces the same values, so
  // every rank takes the same decision.
  const std::vector<LRScheduler *> schedules = s.strategy->lr_schedulers();
  if (report_.optimizer_steps > 0 && !schedules.empty() && schedules.front() &&
      schedules.front()->is_metric_driven())
    s.strategy->validate({data_parallel_batch(frames, *s.communicator)});
}

TrainingSession::DescriptorSpread TrainingSession::descriptor_spread(const FramePart &frame)
{
  Impl &s = *impl_;
  const FrameGraph graph = frame_graph(frame, s.potential->cutoff(), s.communicator->rank());
  DescriptorMoments moments;
  {
    torch::NoGradGuard no_grad;
    const LocalEnvironments env =
        local_environments(owned_centres(graph.graph).to(s.potential->device()),
                           s.potential->num_species(), s.potential->cutoff(), s.potential->dtype());
    moments = s.potential->descriptor_moments(env);
  }
  moments.count = moments.count.to(torch::kFloat64).cpu().contiguous();
  moments.sum = moments.sum.to(torch::kFloat64).cpu().contiguous();
  moments.sum_sq = moments.sum_sq.to(torch::kFloat64).cpu().contiguous();
  s.communicator->all_reduce_sum({moments.count, moments.sum, moments.sum_sq});
  DescriptorSpread spread;
  spread.ratio = s.potential->descriptor_spread_ratio(moments);
  spread.limit = StatisticsPhase::representative_limit(moments.count.sum().item<double>());
  return spread;
}

double TrainingSession::force_uncertainty(const FramePart &frame, double *per_owned_atom)
{
  return committee_spread(frame, per_owned_atom, nullptr).max_force_spread;
}

CommitteeSpread TrainingSession::committee_spread(const FramePart &frame, double *per_owned_atom,
                                                  double *mean_forces)
{
  Impl &s = *impl_;
  const AtomicSystemView &view = frame.system;
  std::fill(per_owned_atom, per_owned_atom + view.num_local, 0.0);
  if (mean_forces != nullptr) std::fill(mean_forces, mean_forces + 3 * view.num_local, 0.0);
  const int64_t members_count = s.potential->committee_size();
  // A Bayesian model's members are posterior draws: its error on a new configuration is their
  // spread and the noise its fit left (bayesian_linear_potential.h), so that is its uncertainty.
  const struct {
    double force, energy;
  } noise{s.potential->force_noise(), s.potential->energy_noise()};
  const double atom_noise_sq = 3.0 * noise.force * noise.force;  // of a force vector
  double local_max = 0.0;
  torch::Tensor member_energy;
  // Collective (the halo exchange): every rank evaluates, also one without centres.
  if (members_count > 1) {
    const FrameGraph graph = frame_graph(frame, s.potential->cutoff(), s.communicator->rank());
    PredictionOptions options;
    options.forces = true;
    options.virial = false;
    options.member_forces = true;
    const Prediction prediction =
        predict(*s.potential, graph.graph.to(s.potential->device()), options);
    const torch::Tensor members =
        owned_forces(prediction.member_forces.detach().to(torch::kFloat64).cpu(), graph.routing, s.communicator);
    const torch::Tensor spread = committee_vector_deviation(members).contiguous();
    const torch::Tensor mean = members.mean(0).contiguous();
    const torch::Tensor atoms = graph.kept_atoms.to(torch::kInt64).contiguous();
    const double *values = spread.data_ptr<double>();
    const double *mean_values = mean.data_ptr<double>();
    const int64_t *atom = atoms.data_ptr<int64_t>();
    for (int64_t a = 0; a < atoms.numel(); ++a) {
      if (atom[a] >= view.num_local) continue;
      per_owned_atom[atom[a]] = std::sqrt(values[a] * values[a] + atom_noise_sq);
      local_max = std::max(local_max, per_owned_atom[atom[a]]);
      if (mean_forces != nullptr)
        for (int d = 0; d < 3; ++d) mean_forces[3 * atom[a] + d] = mean_values[3 * a + d];
    }
    member_energy = prediction.member_energy;
  }
  // Summed over ranks (potentials/committee_deviation.h).
  const std::vector<double> sums =
      committee_spread_sums(per_owned_atom, view.num_local, member_energy, members_count);
  torch::Tensor largest = torch::full({1}, local_max, torch::kFloat64);
  s.communicator->all_reduce_max({largest});
  torch::Tensor summed = torch::tensor(sums, torch::kFloat64);
  s.communicator->all_reduce_sum({summed});
  const CommitteeFrameSpread whole =
      committee_frame_spread(summed.data_ptr<double>(), members_count, frame.atoms_in_frame);
  CommitteeSpread result;
  result.max_force_spread = largest.item<double>();
  result.mean_square_force_spread = whole.mean_square_force_spread;
  result.mean_energy = whole.mean_energy;
  result.energy_spread_per_atom =
      std::sqrt(whole.energy_spread_per_atom * whole.energy_spread_per_atom +
                noise.energy * noise.energy);
  result.force_noise = noise.force;
  result.energy_noise = noise.energy;
  return result;
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
  uint64_t hash = kFnv1aOffset;
  auto add = [&hash](const torch::Tensor &tensor) {
    const torch::Tensor bytes = tensor.detach().contiguous();
    hash = fnv1a64(bytes.data_ptr(), bytes.numel() * bytes.element_size(), hash);
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
  namespace fields = state_archive;
  const Impl &s = *impl_;
  torch::serialize::OutputArchive archive;
  fields::write_header(archive, kStateKind);
  // The weights are stored once, inside the engine's training state.
  archive.write("model/signature", model_signature(*s.potential));
  fields::write_bytes(archive, "training_state", save_training_state(*s.strategy));
  s.statistics->save(archive);
  fields::write_double(archive, "loss/force_component", s.last_force_component);
  fields::write_double(archive, "loss/other_components", s.last_other_components);
  const TrainingReport &r = report_;
  archive.write("report/values", torch::tensor({r.last_loss, r.energy_rmse_per_atom, r.force_rmse,
                                                r.stress_rmse, r.loss_scale}, torch::kFloat64));
  archive.write("report/counts",
                torch::tensor({r.skipped_steps, r.optimizer_steps, r.buffer_frames,
                               int64_t{r.validated}, r.consecutive_skipped_steps},
                              torch::kInt64));
  const TrainingMetadata &metadata = s.potential->training_metadata();
  fields::write_int(archive, "metadata/optimizer_steps", metadata.optimizer_steps);
  fields::write_int(archive, "metadata/frames_seen", metadata.frames_seen);
  fields::write_string(archive, "metadata/precision", metadata.precision);
  // The weights this step's MD forces came from, when the step trained after computing them.
  const size_t model_tensors = model_state_tensors(*s.potential).size();
  const bool snapshot = with_snapshot && s.snapshot.size() == model_tensors;
  fields::write_int(archive, "snapshot/count", snapshot ? static_cast<int64_t>(model_tensors) : 0);
  if (snapshot)
    for (size_t i = 0; i < s.snapshot.size(); ++i)
      archive.write("snapshot/" + std::to_string(i), s.snapshot[i]);
  return fields::to_bytes(archive);
}

void TrainingSession::load_state(const std::string &bytes)
{
  namespace fields = state_archive;
  Impl &s = *impl_;
  torch::serialize::InputArchive archive;
  fields::load_checked(archive, bytes, kStateKind);
  check_model_signature(fields::read_tensor(archive, "model/signature", kStateWhat), *s.potential);
  const std::string training_state = fields::read_bytes(archive, "training_state", kStateWhat);
  // The same kind of phase as the session's (a closed-form model keeps gathering).
  StatisticsPhase statistics(s.settings.stats_frames, false, 0,
                             s.potential->learns_in_closed_form());
  statistics.load(archive, kStateWhat);
  const double last_force = fields::read_double(archive, "loss/force_component", kStateWhat);
  const double last_other = fields::read_double(archive, "loss/other_components", kStateWhat);
  const torch::Tensor values = fields::read_tensor(archive, "report/values", kStateWhat).contiguous();
  const torch::Tensor counts = fields::read_tensor(archive, "report/counts", kStateWhat).contiguous();
  if (values.numel() != 5 || values.scalar_type() != torch::kFloat64 || counts.numel() != 5 ||
      counts.scalar_type() != torch::kInt64)
    throw std::runtime_error(kStateWhat + ": the saved report has the wrong size");
  TrainingReport r;
  const double *value = values.data_ptr<double>();
  r.last_loss = value[0];
  r.energy_rmse_per_atom = value[1];
  r.force_rmse = value[2];
  r.stress_rmse = value[3];
  r.loss_scale = value[4];
  const int64_t *count = counts.data_ptr<int64_t>();
  r.skipped_steps = count[0];
  r.optimizer_steps = count[1];
  r.validated = count[3] != 0;
  r.consecutive_skipped_steps = count[4];
  TrainingMetadata metadata = s.potential->training_metadata();
  metadata.optimizer_steps = fields::read_int(archive, "metadata/optimizer_steps", kStateWhat);
  metadata.frames_seen = fields::read_int(archive, "metadata/frames_seen", kStateWhat);
  metadata.precision = fields::read_string(archive, "metadata/precision", kStateWhat);
  const std::vector<torch::Tensor> tensors = model_state_tensors(*s.potential);
  const int64_t snapshot_count = fields::read_int(archive, "snapshot/count", kStateWhat);
  if (snapshot_count != 0 && snapshot_count != static_cast<int64_t>(tensors.size()))
    throw std::runtime_error(kStateWhat + ": the weight snapshot has " +
                             std::to_string(snapshot_count) + " tensors, the model " +
                             std::to_string(tensors.size()));
  std::vector<torch::Tensor> snapshot;
  for (int64_t i = 0; i < snapshot_count; ++i) {
    torch::Tensor tensor = fields::read_tensor(archive, "snapshot/" + std::to_string(i), kStateWhat);
    const torch::Tensor &live = tensors[static_cast<size_t>(i)];
    if (tensor.scalar_type() != live.scalar_type() || !tensor.sizes().equals(live.sizes()))
      throw std::runtime_error("saved model tensor " + std::to_string(i) +
                               " differs in type or size from this model's (a different model "
                               "spec?)");
    snapshot.push_back(tensor.contiguous());
  }

  // Everything parsed: now change the session. The strategy's loader loads the weights into the
  // model the pair style evaluates and builds its optimizers over them.
  s.scope.reset();
  load_training_state(*s.strategy, training_state);
  *s.statistics = std::move(statistics);
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
