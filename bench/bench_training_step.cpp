// What one optimizer step of the default potential costs, in inference atom-steps: the training
// step of `fix otf/train` (every committee member trained on its own energies and forces, Adam)
// on a batch of Si frames, against the inference that `pair_style otf` runs on the same atoms, in
// float32, bfloat16 and float16, with the members' shared work computed once (the default) and
// per member (the generic evaluation, as before docs/bench-training-step.md). With --export DIR it
// also writes the model, the batch and float64 predictions for the matched Python peer
// (bench/bench_training_peer.py), which reads them, checks it computes the same model, and times
// its own step on the same frames.
//
// Usage: bench_training_step [--cells 4] [--frames 1] [--repeats 11] [--threads 1]
//                            [--precisions float32,bfloat16,float16] [--hidden 32,32] [--export DIR]
// Prints one line per measurement: "<what> <precision> <microseconds per atom>", then ratios.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "autocast_region.h"
#include "grad_scaler.h"
#include "losses.h"
#include "neighbor_graph.h"
#include "periodic_system.h"
#include "potential_evaluator.h"
#include "potential_registry.h"
#include "potential_training.h"
#include "precision.h"

#include "bench_timing.h"

namespace {

struct Options {
  int cells = 4;
  int frames = 1;
  int repeats = 11;
  int threads = 1;
  std::vector<std::string> precisions = {"float32", "bfloat16", "float16"};
  std::vector<int> hidden = {32, 32};  // the main example's widths
  std::string export_dir;
};

// A positive whole number for `key`, or a message naming the option and exit 2.
int positive_int(const std::string& key, const std::string& text) {
  std::size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value <= 0) {
    std::fprintf(stderr, "option %s needs positive whole numbers (got '%s')\n", key.c_str(), text.c_str());
    std::exit(2);
  }
  return value;
}

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; i += 2) {
    const std::string key = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "option %s needs a value\n", key.c_str());
      std::exit(2);
    }
    const std::string value = argv[i + 1];
    if (key == "--cells") {
      options.cells = positive_int(key, value);
    } else if (key == "--frames") {
      options.frames = positive_int(key, value);
    } else if (key == "--repeats") {
      options.repeats = positive_int(key, value);
    } else if (key == "--threads") {
      options.threads = positive_int(key, value);
    } else if (key == "--precisions") {
      options.precisions.clear();
      std::stringstream list(value);
      for (std::string item; std::getline(list, item, ',');) options.precisions.push_back(item);
    } else if (key == "--hidden") {
      options.hidden.clear();
      std::stringstream list(value);
      for (std::string item; std::getline(list, item, ',');) options.hidden.push_back(positive_int(key, item));
    } else if (key == "--export") {
      options.export_dir = value;
    } else {
      std::fprintf(stderr, "unknown option %s (expected --cells, --frames, --repeats, --threads, --precisions, --hidden, --export)\n",
                   key.c_str());
      std::exit(2);
    }
  }
  return options;
}

// The main example's model (examples/si-sw/si-spec.json), with other hidden widths if asked.
otf::ModelSpec example_spec(const std::string& dtype, const std::vector<int>& hidden) {
  otf::ModelSpec spec;
  spec.elements = {"Si"};
  spec.cutoff = 4.0;
  spec.committee_size = 4;
  spec.dtype = dtype;
  spec.seed = 1;
  spec.hyperparameters = {{"radial_functions", 8}, {"angular_radial_functions", 4}, {"max_angular_order", 3},
                          {"hidden", hidden}, {"activation", "silu"}};
  return spec;
}

struct Frame {
  otf::TrainingBatch batch;
  int owned = 0;
};

// Si diamond (lattice constant 5.431 A), positions jittered by up to 0.1 A per component.
otf::PeriodicConfiguration si_crystal(int cells, uint64_t seed) {
  return otf::diamond_crystal(cells, 5.431, 0.1, seed);
}

// A thermalised diamond crystal as a stored training frame (owned atoms, the periodic images
// within the cutoff, force_owner folding them), with labels drawn at random: the step's cost does
// not depend on the label values.
Frame make_frame(int cells, uint64_t seed, double cutoff) {
  const otf::PeriodicSystem system(si_crystal(cells, seed), cutoff);
  torch::Tensor kept;
  const otf::NeighborGraph graph =
      otf::drop_unused_atoms(otf::neighbor_graph_from_view(system.view(), cutoff), &kept);
  const int owned = system.num_local();
  const torch::Tensor owner = torch::tensor(system.owner(), torch::kInt64).index_select(0, kept);
  torch::manual_seed(static_cast<uint64_t>(seed));
  otf::FrameLabels labels;
  labels.atoms_in_frame = owned;
  labels.energy = -4.3 * owned + 0.01 * owned * torch::randn({1}, torch::kFloat64).item<double>();
  labels.forces = 0.5 * torch::randn({kept.size(0), 3}, torch::kFloat64);
  labels.force_mask = kept < owned;
  labels.force_owner = owner;
  return {otf::labelled_frame(graph, labels), owned};
}

double elapsed_us(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

// Writes tensors as one little-endian blob plus a JSON index (name, dtype, shape, offset), which
// the Python peer reads with plain file reads.
class TensorExport {
 public:
  void add(const std::string& name, const torch::Tensor& tensor) {
    torch::Tensor t = tensor.detach().cpu().contiguous();
    if (t.is_floating_point()) t = t.to(torch::kFloat64);
    else t = t.to(torch::kInt64);
    const std::size_t bytes = static_cast<std::size_t>(t.numel()) * 8;
    const auto* data = static_cast<const char*>(t.data_ptr());
    index_[name] = {{"dtype", t.is_floating_point() ? "float64" : "int64"},
                    {"shape", t.sizes().vec()},
                    {"offset", blob_.size()}};
    blob_.insert(blob_.end(), data, data + bytes);
  }
  void write(const std::filesystem::path& folder, const nlohmann::json& extra) const {
    std::filesystem::create_directories(folder);
    std::ofstream(folder / "tensors.bin", std::ios::binary).write(blob_.data(), static_cast<std::streamsize>(blob_.size()));
    nlohmann::json out = extra;
    out["tensors"] = index_;
    std::ofstream(folder / "index.json") << out.dump(1) << '\n';
  }

 private:
  std::vector<char> blob_;
  nlohmann::json index_ = nlohmann::json::object();
};

void copy_model(const otf::Potential& from, otf::Potential& to) {
  torch::NoGradGuard no_grad;
  const auto parameters = from.named_parameters(true);
  for (auto& item : to.named_parameters(true)) item.value().copy_(parameters[item.key()]);
  const auto buffers = from.named_buffers(true);
  for (auto& item : to.named_buffers(true)) item.value().copy_(buffers[item.key()]);
}

struct StepSetup {
  otf::TrainingFunction training;
  otf::LossFunction loss;
};

StepSetup step_setup(int64_t members, bool shared) {
  otf::ComposedLossSettings settings;
  otf::EnergyLossOptions energy;
  energy.per_atom = true;
  settings.energy = otf::WeightedLoss<otf::EnergyLossOptions>{1.0, energy};
  settings.forces = otf::WeightedLoss<otf::ForceLossOptions>{1.0, {}};
  otf::PotentialTrainingOptions training;
  training.train_members = true;
  training.shared_member_work = shared;
  return {otf::potential_training_function(training),
          otf::potential_loss_function(std::make_shared<otf::ComposedLoss>(settings), members, true)};
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  torch::set_num_threads(options.threads);
  const otf::ModelSpec spec = example_spec("float32", options.hidden);
  const auto model = otf::create_potential(spec);

  std::vector<Frame> frames;
  std::vector<otf::TrainingBatch> batches;
  int atoms = 0;
  for (int f = 0; f < options.frames; ++f) {
    frames.push_back(make_frame(options.cells, static_cast<uint64_t>(11 + f), spec.cutoff));
    batches.push_back(frames.back().batch);
    atoms += frames.back().owned;
  }
  const otf::TrainingBatch batch = otf::concatenate_frames(batches);
  {
    // Descriptor statistics and energy shifts from the frames, as after the first labels of a run.
    const otf::NeighborGraph graph = otf::neighbor_graph_from_batch(batch);
    model->accumulate_descriptor_statistics(model->descriptor_moments(
        otf::local_environments(graph, model->num_species(), spec.cutoff, model->dtype())));
    model->fit_energy_shifts(torch::full({options.frames, 1}, static_cast<double>(atoms / options.frames), torch::kFloat64),
                             batch.at("energy").to(torch::kFloat64));
  }
  const otf::NamedModels models = {{"main", model}};
  const torch::Device cpu(torch::kCPU);

  std::printf("# Si diamond, %d frame(s) of %d atoms, the main example's model %s, committee %lld, %d thread(s)\n",
              options.frames, atoms / options.frames, spec.hyperparameters.dump().c_str(),
              static_cast<long long>(spec.committee_size), options.threads);

  // The machines here change speed by tens of percent within a minute: every measurement is
  // taken once per round, inference and steps of every precision interleaved, and the medians
  // over the rounds are compared.
  const otf::PeriodicSystem system(si_crystal(options.cells, 11), spec.cutoff);
  const otf::AtomicSystemView view = system.view();
  std::vector<double> forces(3 * static_cast<std::size_t>(view.num_atoms));

  // A runner per (kind, precision): inference (the pair_style otf path on frame 0's atoms), or one
  // optimizer step (zero_grad, forward in the precision's autocast region, loss, backward outside
  // it, scaled for float16, Adam) with the members' shared work or the generic per-member one.
  struct Runner {
    std::string kind, precision;
    std::function<void(int)> run;
    double per_atom = 0.0;
    std::vector<double> times;
  };
  std::vector<Runner> runners;
  const StepSetup shared_setup = step_setup(spec.committee_size, true);
  const StepSetup generic_setup = step_setup(spec.committee_size, false);
  for (const std::string& name : options.precisions) {
    const otf::Precision precision = otf::parse_precision(name);
    auto evaluator = std::make_shared<otf::PotentialEvaluator>(model, otf::EvaluatorOptions{precision, 4096});
    runners.push_back({"inference", name, [evaluator, &forces, &view](int) {
                         std::fill(forces.begin(), forces.end(), 0.0);
                         otf::EvaluationOutputs outputs;
                         outputs.forces = forces.data();
                         evaluator->evaluate(view, outputs);
                       }, static_cast<double>(view.num_local), {}});
    for (const bool shared : {true, false}) {
      const auto trained = otf::create_potential(spec);
      copy_model(*model, *trained);
      auto optimizer = std::make_shared<torch::optim::Adam>(trained->parameters(), torch::optim::AdamOptions(1e-3));
      auto scaler = std::make_shared<otf::GradScaler>(otf::GradScalerOptions{});
      const StepSetup setup = shared ? shared_setup : generic_setup;
      const otf::NamedModels trained_models = {{"main", trained}};
      runners.push_back({shared ? "step" : "step_generic", name,
                         [=, &batch, &cpu](int round) {
                           optimizer->zero_grad();
                           torch::Tensor loss;
                           {
                             std::optional<otf::AutocastRegion> region;
                             if (precision != otf::Precision::Float32) region.emplace(cpu, precision);
                             const otf::Predictions predictions = setup.training(trained_models, batch);
                             loss = setup.loss(predictions, batch, round, 0).total_loss;
                           }
                           if (precision == otf::Precision::Float16) {
                             scaler->scale(loss).backward();
                             scaler->step(*optimizer);
                             scaler->update();
                           } else {
                             loss.backward();
                             optimizer->step();
                           }
                         }, static_cast<double>(atoms), {}});
    }
  }
  for (int round = 0; round <= options.repeats; ++round) {
    for (Runner& runner : runners) {
      const auto start = std::chrono::steady_clock::now();
      runner.run(round);
      if (round > 0) runner.times.push_back(elapsed_us(start) / runner.per_atom);  // round 0 warms up
    }
  }
  std::map<std::string, double> inference_us, step_us, generic_step_us;
  for (const Runner& runner : runners) {
    const double us = otf::bench::median(runner.times);
    (runner.kind == "inference" ? inference_us : runner.kind == "step" ? step_us : generic_step_us)[runner.precision] = us;
    std::printf("%s %s %.3f\n", runner.kind.c_str(), runner.precision.c_str(), us);
  }
  std::printf("# one optimizer step per atom of the batch, in inference atom-steps of the same precision "
              "(target <= 8), and the shared evaluation's speed-up over the per-member one\n");
  for (const std::string& name : options.precisions) {
    std::printf("ratio %s step/inference %.2f generic/inference %.2f shared_speedup %.2f\n", name.c_str(),
                step_us[name] / inference_us[name], generic_step_us[name] / inference_us[name],
                generic_step_us[name] / step_us[name]);
  }
  if (options.precisions.size() > 1 && options.precisions.front() == "float32") {
    for (std::size_t p = 1; p < options.precisions.size(); ++p) {
      const std::string& name = options.precisions[p];
      std::printf("lower %s inference_speedup %.2f step_speedup %.2f\n", name.c_str(),
                  inference_us["float32"] / inference_us[name], step_us["float32"] / step_us[name]);
    }
  }

  if (!options.export_dir.empty()) {
    // The float32 model's weights evaluated in float64: the peer must reproduce these to 1e-10.
    const auto wide = otf::create_potential(example_spec("float64", options.hidden));
    copy_model(*model, *wide);
    const otf::NeighborGraph graph = otf::neighbor_graph_from_batch(batch);
    otf::PredictionOptions prediction_options;
    prediction_options.member_forces = true;
    const otf::Prediction prediction = otf::predict(*wide, graph, prediction_options);
    const otf::ForceRouting routing = otf::force_routing(batch);
    TensorExport out;
    for (const auto& item : wide->named_parameters(true)) out.add("model." + item.key(), item.value());
    for (const auto& item : wide->named_buffers(true)) out.add("model." + item.key(), item.value());
    for (const auto& [name, tensor] : batch.tensors()) out.add("batch." + name, tensor);
    out.add("expected.member_energy", prediction.member_energy);
    out.add("expected.member_forces", otf::owned_forces(prediction.member_forces, routing, nullptr));
    out.add("expected.energy", prediction.energy);
    out.add("expected.forces", otf::owned_forces(prediction.forces, routing, nullptr));
    nlohmann::json extra;
    extra["spec"] = otf::to_json(wide->spec());
    extra["atoms"] = atoms;
    // Every frame is a diamond crystal of the same cell: a peer that builds its own neighbour
    // lists (MACE) needs it with the owned atoms (the rows of force_mask).
    extra["cell"] = si_crystal(options.cells, 11).cell;
    extra["threads"] = options.threads;
    nlohmann::json timings;
    for (const std::string& name : options.precisions) {
      timings[name] = {{"inference_us_per_atom", inference_us[name]}, {"step_us_per_atom", step_us[name]},
                       {"generic_step_us_per_atom", generic_step_us[name]}};
    }
    extra["ours"] = timings;
    out.write(options.export_dir, extra);
    std::printf("# exported the model, batch and float64 predictions to %s\n", options.export_dir.c_str());
  }
  return 0;
}
