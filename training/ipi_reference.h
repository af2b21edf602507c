// An ab initio code (CP2K, Quantum ESPRESSO, an ASE calculator, ...) as the reference of
// on-the-fly training, reached over the i-PI socket protocol: this side is the server, the code
// is the client (docs/design.md §12). Rank 0 talks to the client; the frame is gathered there in
// atom-id order and the forces are scattered back to their owners. A client that dies, hangs,
// disconnects or answers nonsense is relaunched (when this side started it) and asked again, up
// to `retries` times; after that every rank throws the same ReferenceFailure. No LibTorch or
// LAMMPS types.
#pragma once

#include <mpi.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "atomic_units.h"
#include "ipi_server.h"
#include "reference.h"
#include "scf_convergence.h"

namespace otf {

class ClientProcess;
class FrameGather;

struct IpiReferenceSettings {
  IpiAddress address;
  // The client's command line (run by /bin/sh, {host} {port} {unix_path} {address} replaced);
  // empty: the user starts the client.
  std::string client_command;
  std::string client_log;          // where the client's output goes (empty: /dev/null)
  double connect_timeout = 300.0;  // seconds for a client to connect
  double call_timeout = 3600.0;    // seconds for one energy/forces/virial call
  int retries = 2;                 // further attempts after a failed call
  // A text the client writes to client_log when its SCF did not converge (e.g. CP2K's "SCF run
  // NOT converged"): found in what the log gained during a call, it fails that call. Empty: off.
  std::string not_converged_text;
  AtomicUnitConversion units;  // the MD code's units
  // Rank 0: where failures that are retried are reported (may be empty).
  std::function<void(const std::string&)> warn;
};

// The rules of the settings (timeouts, retries, not_converged needs client_log), named by the
// fix otf/train keywords; the constructor applies them. Throws std::invalid_argument.
void check_ipi_reference_settings(const IpiReferenceSettings& settings);

class IpiReference : public Reference {
 public:
  // Collective: rank 0 listens on the address and starts the client. Throws std::invalid_argument
  // for settings check_ipi_reference_settings rejects, std::runtime_error (the same on every
  // rank) when the address cannot be used or the client cannot start.
  IpiReference(IpiReferenceSettings settings, MPI_Comm world);
  // Sends EXIT to the client and stops a client this side started.
  ~IpiReference() override;
  IpiReference(const IpiReference&) = delete;
  IpiReference& operator=(const IpiReference&) = delete;

  std::string description() const override;
  // Collective. The label's owned forces are in the configuration's local order. Throws
  // ReferenceFailure on every rank once the retries are spent. `use` makes no difference here:
  // the MD code puts a driving label's forces into its own arrays.
  ReferenceLabel label(const ReferenceConfiguration& configuration, ReferenceUse use) override;
  // Collective: gathers the frame and sends it to the client from a thread of rank 0, which
  // waits for the answer (retries included) while the MD goes on; the warnings of that call are
  // given when the answer is collected. One call at a time: the caller collects a pending label
  // before it asks this reference for anything else.
  std::unique_ptr<PendingLabel> start_label(const ReferenceConfiguration& configuration) override;
  int64_t failed_attempts() const override { return failed_attempts_; }

  // The address clients connect to (with the real port when the settings asked for port 0).
  const IpiAddress& address() const { return address_; }

 private:
  class Pending;
  // Rank 0: what one call (its retries included) gave: the energy, the virial (9) and the whole
  // frame's forces in MD units, or why it failed.
  struct CallOutcome {
    bool ok = false;
    std::array<double, 10> totals{};
    std::vector<double> whole_forces;
    std::string failure;
  };
  // Collective: the frame whole on rank 0; ReferenceFailure on every rank if it cannot be.
  std::unique_ptr<FrameGather> gather_frame(const ReferenceConfiguration& configuration) const;
  // Rank 0: the request for the gathered frame, in atomic units.
  IpiRequest request_for(const ReferenceConfiguration& configuration,
                         const std::vector<double>& positions) const;
  // Rank 0: the call with its retries; its warnings go to route_warning.
  CallOutcome call(const IpiRequest& request, int64_t step);
  // Collective: rank 0's outcome made a label (forces still whole on rank 0), or ReferenceFailure
  // on every rank.
  ReferenceLabel finish(const CallOutcome& outcome);
  // Warnings of a call made from the background thread are kept until the answer is collected
  // (the MD code's output is not thread-safe); others are given at once.
  void route_warning(const std::string& text);
  void give_deferred_warnings();
  // Rank 0: one attempt; throws IpiFailure or std::runtime_error.
  IpiResult attempt(const IpiRequest& request);
  void start_client();
  bool client_alive();

  IpiReferenceSettings settings_;
  MPI_Comm world_;
  int rank_ = 0;
  IpiAddress address_;
  ClientLogConvergence log_convergence_;   // rank 0: settings_.not_converged_text in the log
  std::unique_ptr<IpiServer> server_;      // rank 0
  std::unique_ptr<ClientProcess> client_;  // rank 0, when this side starts the client
  std::atomic<int64_t> failed_attempts_{0};  // also counted by a call in the background
  int64_t client_starts_ = 0;
  std::atomic<bool> in_background_{false};   // rank 0: a call runs in the background thread
  std::mutex deferred_mutex_;
  std::vector<std::string> deferred_warnings_;
};

}  // namespace otf
