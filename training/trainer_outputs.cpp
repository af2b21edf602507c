#include "trainer_outputs.h"

#include <array>

#include "on_the_fly_trainer.h"

namespace otf {
namespace {

struct TrainerOutput {
  std::string_view name;
  double (*value)(const OnTheFlyTrainer& trainer);
};

double count(int64_t value) { return static_cast<double>(value); }

// In the order of doc/fix_otf_train.md's list (its numbers are these indices + 1).
constexpr std::array<TrainerOutput, 19> kOutputs{{
    {"loss", [](const OnTheFlyTrainer& t) { return t.session().report().last_loss; }},
    {"energy_rmse",
     [](const OnTheFlyTrainer& t) { return t.session().report().energy_rmse_per_atom; }},
    {"force_rmse", [](const OnTheFlyTrainer& t) { return t.session().report().force_rmse; }},
    {"stress_rmse", [](const OnTheFlyTrainer& t) { return t.session().report().stress_rmse; }},
    {"loss_scale", [](const OnTheFlyTrainer& t) { return t.session().report().loss_scale; }},
    {"skipped_steps",
     [](const OnTheFlyTrainer& t) { return count(t.session().report().skipped_steps); }},
    {"optimizer_steps",
     [](const OnTheFlyTrainer& t) { return count(t.session().report().optimizer_steps); }},
    {"buffer_frames",
     [](const OnTheFlyTrainer& t) { return count(t.session().report().buffer_frames); }},
    {"reference_calls",
     [](const OnTheFlyTrainer& t) { return count(t.counters().reference_calls); }},
    {"max_uncertainty", [](const OnTheFlyTrainer& t) { return t.counters().max_uncertainty; }},
    {"model_drives", [](const OnTheFlyTrainer& t) { return t.reference_drives() ? 0.0 : 1.0; }},
    {"replicas_differ",
     [](const OnTheFlyTrainer& t) { return t.counters().replicas_differ ? 1.0 : 0.0; }},
    {"model_driven_steps",
     [](const OnTheFlyTrainer& t) { return count(t.policy().state().model_driven_steps); }},
    {"model_phase_labels",
     [](const OnTheFlyTrainer& t) { return count(t.policy().state().model_phase_labels); }},
    {"learning_rate", [](const OnTheFlyTrainer& t) { return t.session().learning_rate(); }},
    {"skipped_labels", [](const OnTheFlyTrainer& t) { return count(t.counters().skipped_labels); }},
    {"failed_reference_attempts",
     [](const OnTheFlyTrainer& t) { return count(t.reference().failed_attempts()); }},
    {"predicted_force_error",
     [](const OnTheFlyTrainer& t) { return t.counters().predicted_force_error; }},
    {"label_force_error", [](const OnTheFlyTrainer& t) { return t.counters().label_force_error; }},
}};

}  // namespace

std::size_t trainer_output_count() { return kOutputs.size(); }

std::string_view trainer_output_name(std::size_t index) {
  return index < kOutputs.size() ? kOutputs[index].name : std::string_view();
}

std::optional<std::size_t> trainer_output_index(std::string_view name) {
  for (std::size_t i = 0; i < kOutputs.size(); ++i)
    if (kOutputs[i].name == name) return i;
  return std::nullopt;
}

double trainer_output(const OnTheFlyTrainer* trainer, const TrainerSettings& settings,
                      std::size_t index) {
  if (index >= kOutputs.size()) return 0.0;
  if (trainer) return kOutputs[index].value(*trainer);
  return kOutputs[index].name == "learning_rate" ? settings.session.learning_rate : 0.0;
}

}  // namespace otf
