#include "learning_log.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

namespace otf {
namespace {

std::runtime_error failure(const std::string& path, const std::string& what) {
  return std::runtime_error("learning log " + path + ": " + what + " (" + std::strerror(errno) +
                            ")");
}

}  // namespace

const char* learning_log_header() {
  return "step,event,drive,reference_calls,loss,energy_rmse_per_atom,force_rmse,stress_rmse,"
         "max_force_uncertainty,loss_scale,skipped_steps,optimizer_steps,buffer_frames,"
         "skipped_labels,learning_rate,reference_seconds,training_seconds,predicted_force_error,"
         "predicted_energy_error,label_force_error,label_energy_error,calibration_scale,"
         "atoms_above_bound";
}

LearningLog::LearningLog(std::string path, int64_t continue_after_step) : path_(std::move(path)) {
  std::vector<std::string> kept;
  if (continue_after_step >= 0) {
    // Rows the interrupted run wrote after its restart step are written again by this run.
    std::ifstream old(path_);
    std::string line;
    while (std::getline(old, line)) {
      if (line.empty() || line.rfind("step,", 0) == 0) continue;
      std::istringstream fields(line);
      long long step = 0;
      if (fields >> step && step <= continue_after_step) kept.push_back(line);
    }
  }
  const std::string temporary = path_ + ".tmp";
  file_ = std::fopen(temporary.c_str(), "w");
  if (file_ == nullptr) throw failure(temporary, "cannot be created");
  std::fprintf(file_, "%s\n", learning_log_header());
  for (const std::string& line : kept) std::fprintf(file_, "%s\n", line.c_str());
  if (std::fflush(file_) != 0 || std::rename(temporary.c_str(), path_.c_str()) != 0) {
    std::fclose(file_);
    file_ = nullptr;
    throw failure(path_, "cannot be written");
  }
}

LearningLog::~LearningLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void LearningLog::append(const LearningLogRow& r) {
  const int written = std::fprintf(
      file_,
      "%lld,%s,%s,%lld,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%lld,%lld,%lld,%lld,%.10g,%.6f,%.6f,%.10g,%.10g,%.10g,%.10g,%.10g,%.6g\n",
      static_cast<long long>(r.step), r.event.c_str(), r.reference_drives ? "reference" : "model",
      static_cast<long long>(r.reference_calls), r.loss, r.energy_rmse_per_atom, r.force_rmse,
      r.stress_rmse, r.max_force_uncertainty, r.loss_scale, static_cast<long long>(r.skipped_steps),
      static_cast<long long>(r.optimizer_steps), static_cast<long long>(r.buffer_frames),
      static_cast<long long>(r.skipped_labels), r.learning_rate, r.reference_seconds,
      r.training_seconds, r.predicted_force_error, r.predicted_energy_error, r.label_force_error,
      r.label_energy_error, r.calibration_scale, r.atoms_above_bound);
  if (written < 0 || std::fflush(file_) != 0) throw failure(path_, "cannot be written");
}

}  // namespace otf
