// An ab initio code (CP2K, Quantum ESPRESSO, an ASE calculator, ...) as the reference of
// on-the-fly training, reached over the i-PI socket protocol: this side is the server, the code
// is the client (docs/design.md §12). Rank 0 talks to the client; the frame is gathered there in
// atom-id order and the forces are scattered back to their owners. A client that dies, hangs,
// disconnects or answers nonsense is relaunched (when this side started it) and asked again, up
// to `retries` times; after that every rank throws the same ReferenceFailure. No LibTorch or
// LAMMPS types.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "atomic_units.h"
#include "ipi_server.h"
#include "reference.h"
#include "scf_convergence.h"

namespace otf {

class ClientProcess;

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
  int64_t failed_attempts() const override { return failed_attempts_; }

  // The address clients connect to (with the real port when the settings asked for port 0).
  const IpiAddress& address() const { return address_; }

 private:
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
  int64_t failed_attempts_ = 0;
  int64_t client_starts_ = 0;
};

}  // namespace otf
