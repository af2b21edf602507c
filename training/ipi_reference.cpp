#include "ipi_reference.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <future>
#include <thread>
#include <utility>
#include <vector>

#include "client_process.h"
#include "frame_gather.h"
#include "keywords.h"
#include "rank_agreement.h"

namespace otf {
namespace {

// A broadcast from rank 0 that the other ranks wait for asleep: while rank 0 waits minutes for
// an ab initio code, busy-polling ranks would take the cores the code runs on.
void patient_broadcast(void* buffer, int count, MPI_Datatype type, MPI_Comm world) {
  MPI_Request request;
  MPI_Ibcast(buffer, count, type, 0, world, &request);
  int done = 0;
  MPI_Test(&request, &done, MPI_STATUS_IGNORE);
  while (!done) {
    const timespec pause{0, 1000000};  // 1 ms
    nanosleep(&pause, nullptr);
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
  }
}

}  // namespace

void check_ipi_reference_settings(const IpiReferenceSettings& settings) {
  require_real_in("connect_timeout", settings.connect_timeout, 0.0, 1e7, true);
  require_real_in("timeout", settings.call_timeout, 0.0, 1e7, true);
  require_integer_in("retries", settings.retries, 0, 1000);
  if (!settings.not_converged_text.empty() && settings.client_log.empty())
    throw std::invalid_argument(
        "not_converged needs client_log <file>: the text is looked for in "
        "what the client writes there");
}

IpiReference::IpiReference(IpiReferenceSettings settings, MPI_Comm world)
    : settings_(std::move(settings)),
      world_(world),
      address_(settings_.address),
      log_convergence_(settings_.client_log, settings_.not_converged_text) {
  check_ipi_reference_settings(settings_);
  MPI_Comm_rank(world_, &rank_);
  const std::string failure = first_failure_on_any_rank(world_, [&] {
    if (rank_ != 0) return;
    server_ = std::make_unique<IpiServer>(settings_.address);
    server_->set_warn([this](const std::string& text) { route_warning(text); });
    address_ = server_->address();
    if (server_->beyond_loopback() && settings_.warn)
      settings_.warn("the i-PI server listens at " + address_.describe() +
                     ", beyond the loopback address: a process on another host that reaches "
                     "this port can connect and its forces would be learned as labels (its user "
                     "cannot be checked); use a UNIX socket or inet <port> (127.0.0.1) unless "
                     "the client runs on another node");
    if (!settings_.client_command.empty()) start_client();
  });
  if (!failure.empty()) throw std::runtime_error(failure);
  // Every rank reports the same address (the real port).
  std::string described = address_.describe();
  broadcast_bytes(described, 0, world_);
  int port = address_.port;
  MPI_Bcast(&port, 1, MPI_INT, 0, world_);
  address_.port = port;
}

IpiReference::~IpiReference() {
  if (rank_ != 0) return;
  try {
    if (server_) server_->send_exit_and_close();
    if (client_) {
      // A client that heard EXIT ends by itself; one that does not is stopped.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (client_->running() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      client_->stop();
    }
  } catch (...) {
    // Destructors do not throw; the client's process group is killed by ClientProcess anyway.
  }
}

std::string IpiReference::description() const {
  std::string text = "i-PI client at " + address_.describe();
  if (!settings_.client_command.empty()) text += " (started as: " + settings_.client_command + ")";
  return text;
}

void IpiReference::start_client() {
  client_ = std::make_unique<ClientProcess>(substitute_address(settings_.client_command, address_),
                                            settings_.client_log, address_);
  ++client_starts_;
}

bool IpiReference::client_alive() { return !client_ || client_->running(); }

IpiResult IpiReference::attempt(const IpiRequest& request) {
  if (!server_->connected()) {
    if (client_ && !client_->running()) start_client();
    server_->accept_client(
        settings_.connect_timeout, [this] { return client_alive(); },
        client_ ? client_->pid() : -1);
  }
  log_convergence_.begin_call();
  IpiResult result =
      server_->compute(request, settings_.call_timeout, [this] { return client_alive(); });
  if (log_convergence_.gained_marker())
    throw IpiFailure(IpiFailureKind::NotConverged,
                     "the client wrote '" + settings_.not_converged_text + "' to " +
                         settings_.client_log + " during this call (its SCF did not converge)");
  return result;
}

void IpiReference::route_warning(const std::string& text) {
  if (in_background_) {
    const std::lock_guard<std::mutex> lock(deferred_mutex_);
    deferred_warnings_.push_back(text);
  } else if (settings_.warn) {
    settings_.warn(text);
  }
}

void IpiReference::give_deferred_warnings() {
  std::vector<std::string> warnings;
  {
    const std::lock_guard<std::mutex> lock(deferred_mutex_);
    warnings.swap(deferred_warnings_);
  }
  if (settings_.warn)
    for (const std::string& text : warnings) settings_.warn(text);
}

IpiRequest IpiReference::request_for(const ReferenceConfiguration& configuration,
                                     const std::vector<double>& positions) const {
  const AtomicUnitConversion& units = settings_.units;
  IpiRequest request;
  for (int k = 0; k < 9; ++k)
    request.cell[static_cast<std::size_t>(k)] =
        configuration.cell[static_cast<std::size_t>(k)] * units.bohr_per_length;
  request.positions = positions;
  for (double& x : request.positions) x *= units.bohr_per_length;
  return request;
}

IpiReference::CallOutcome IpiReference::call(const IpiRequest& request, int64_t step) {
  const AtomicUnitConversion& units = settings_.units;
  CallOutcome outcome;
  // The first failure of a call is its cause; later attempts may fail only because of it (a
  // client started by hand that was dropped after a garbage reply never connects again).
  std::string first_failure, last_failure, log_tail;
  int attempts_failed = 0;
  for (int attempt_index = 0; attempt_index <= settings_.retries && !outcome.ok; ++attempt_index) {
    try {
      const IpiResult result = attempt(request);
      outcome.totals[0] = result.energy / units.hartree_per_energy;
      for (int k = 0; k < 9; ++k)
        outcome.totals[static_cast<std::size_t>(1 + k)] =
            result.virial[static_cast<std::size_t>(k)] / units.hartree_per_energy;
      outcome.whole_forces = result.forces;
      for (double& f : outcome.whole_forces) f /= units.hartree_per_bohr_per_force();
      outcome.ok = true;
    } catch (std::exception& error) {
      ++failed_attempts_;
      ++attempts_failed;
      last_failure = error.what();
      log_tail.clear();
      if (client_) {
        if (!client_->running()) last_failure += " (client " + client_->exit_description() + ")";
        const std::string tail = client_->log_tail(600);
        if (!tail.empty() && !settings_.client_log.empty())
          log_tail = "; the end of " + settings_.client_log + ":\n" + tail;
      }
      if (first_failure.empty()) first_failure = last_failure;
      const bool again = attempt_index < settings_.retries;
      route_warning("step " + std::to_string(step) + ": the i-PI reference (" +
                    address_.describe() + ") failed: " + last_failure + log_tail +
                    (again ? (client_ ? "; restarting the client and trying again"
                                      : "; waiting for the client to connect again")
                           : "; no retries left"));
      if (again && client_) {
        server_->drop_client();
        client_->stop();
        try {
          start_client();
        } catch (std::exception& start_error) {
          last_failure = start_error.what();
          break;
        }
      }
    }
  }
  if (!outcome.ok)
    outcome.failure = "the i-PI reference at " + address_.describe() + " failed " +
                      std::to_string(attempts_failed) + " time(s) on step " +
                      std::to_string(step) + "; cause: " + first_failure +
                      (last_failure != first_failure ? "; then, last: " + last_failure : "") +
                      log_tail;
  return outcome;
}

ReferenceLabel IpiReference::finish(const CallOutcome& outcome) {
  int ok = rank_ == 0 && outcome.ok ? 1 : 0;
  patient_broadcast(&ok, 1, MPI_INT, world_);
  if (!ok) {
    std::string failure = outcome.failure;
    broadcast_bytes(failure, 0, world_);
    throw ReferenceFailure(failure);
  }
  std::array<double, 10> totals = outcome.totals;
  MPI_Bcast(totals.data(), 10, MPI_DOUBLE, 0, world_);
  ReferenceLabel label;
  label.energy = totals[0];
  // i-PI's virial is a 3x3 matrix; LAMMPS keeps xx yy zz xy xz yz (off-diagonals averaged).
  const double* v = totals.data() + 1;
  label.virial = {v[0], v[4], v[8], 0.5 * (v[1] + v[3]), 0.5 * (v[2] + v[6]), 0.5 * (v[5] + v[7])};
  if (rank_ == 0) label.owned_forces = outcome.whole_forces;
  return label;
}

std::unique_ptr<FrameGather> IpiReference::gather_frame(
    const ReferenceConfiguration& configuration) const {
  std::unique_ptr<FrameGather> frame;
  const std::string failure = first_failure_on_any_rank(
      world_, [&] { frame = std::make_unique<FrameGather>(configuration, world_); });
  if (!failure.empty()) throw ReferenceFailure(failure);
  return frame;
}

ReferenceLabel IpiReference::label(const ReferenceConfiguration& configuration,
                                   ReferenceUse /*use*/) {
  const std::unique_ptr<FrameGather> frame = gather_frame(configuration);
  CallOutcome outcome;
  if (rank_ == 0) outcome = call(request_for(configuration, frame->positions()), configuration.step);
  ReferenceLabel label = finish(outcome);
  label.owned_forces = frame->scatter(label.owned_forces, 3);
  return label;
}

// A call running in a thread of rank 0; the other ranks hold nothing but wait with it when the
// answer is collected.
class IpiReference::Pending : public PendingLabel {
 public:
  Pending(IpiReference& owner, std::future<CallOutcome> outcome)
      : owner_(owner), outcome_(std::move(outcome)) {}
  ~Pending() override {
    // The thread uses the owner's socket: it must end before anything else talks to the client.
    if (outcome_.valid()) outcome_.wait();
    owner_.in_background_ = false;
  }
  Pending(const Pending&) = delete;
  Pending& operator=(const Pending&) = delete;

  bool ready() override {
    return outcome_.valid() &&
           outcome_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }
  ReferenceLabel wait() override {
    CallOutcome outcome;
    if (outcome_.valid()) {
      outcome = outcome_.get();
      owner_.in_background_ = false;
      owner_.give_deferred_warnings();
    }
    return owner_.finish(outcome);
  }

 private:
  IpiReference& owner_;
  std::future<CallOutcome> outcome_;  // rank 0
};

std::unique_ptr<PendingLabel> IpiReference::start_label(
    const ReferenceConfiguration& configuration) {
  const std::unique_ptr<FrameGather> frame = gather_frame(configuration);
  std::future<CallOutcome> outcome;
  if (rank_ == 0) {
    in_background_ = true;
    outcome = std::async(std::launch::async,
                         [this, request = request_for(configuration, frame->positions()),
                          step = configuration.step] { return call(request, step); });
  }
  return std::make_unique<Pending>(*this, std::move(outcome));
}

}  // namespace otf
