// The i-PI server and the client process against tests/ipi/ipi_test_client.py (Lennard-Jones as
// LAMMPS' lj/cut computes it, faults on request): results equal to a C++ Lennard-Jones over UNIX
// and TCP sockets, each failure reported as its kind within its timeout, a relaunched client
// answering after each failure, process groups stopped, socket files managed.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "atomic_units.h"
#include "client_process.h"
#include "ipi_reference.h"
#include "ipi_server.h"

namespace otf::testing {
namespace {

// CODATA 2018, as the test client converts.
constexpr double kBohrAngstrom = 0.529177210903;
constexpr double kHartreeEv = 27.211386245988;
constexpr const char* kPython = "/usr/bin/python3";

struct LennardJonesParameters {
  double epsilon = 0.0104;  // eV (argon)
  double sigma = 3.405;     // Angstrom
  // Beyond half the 8.6 A box: several images of a pair and an atom's own images count.
  double cutoff = 9.0;
};

struct LennardJonesResult {
  double energy = 0.0;             // eV
  std::vector<double> forces;      // eV/A
  std::array<double, 9> virial{};  // eV, sum r_ij (x) f_ij
};

// LAMMPS' lj/cut (no shift) over every pair i<j and every atom's own images (half weight) in a
// triclinic cell, in the test client's order of operations so that the results agree to rounding.
LennardJonesResult lennard_jones(const std::array<double, 9>& cell, const std::vector<double>& x,
                                 const LennardJonesParameters& lj) {
  const double* a = &cell[0];
  const double* b = &cell[3];
  const double* c = &cell[6];
  auto cross = [](const double* u, const double* v) {
    return std::array<double, 3>{u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2],
                                 u[0] * v[1] - u[1] * v[0]};
  };
  auto dot = [](const double* u, const double* v) {
    return u[0] * v[0] + u[1] * v[1] + u[2] * v[2];
  };
  const std::array<std::array<double, 3>, 3> normals = {cross(b, c), cross(c, a), cross(a, b)};
  const double volume = std::abs(dot(a, normals[0].data()));
  int reach[3];
  std::array<std::array<double, 3>, 3> reciprocal{};
  for (int k = 0; k < 3; ++k) {
    const double* p = normals[k].data();
    reach[k] = static_cast<int>(std::ceil(lj.cutoff / (volume / std::sqrt(dot(p, p))) + 0.5)) + 1;
    for (int m = 0; m < 3; ++m) reciprocal[k][m] = p[m] / volume;
  }
  const int natoms = static_cast<int>(x.size() / 3);
  LennardJonesResult result;
  result.forces.assign(x.size(), 0.0);
  const double cutoff_squared = lj.cutoff * lj.cutoff;
  for (int i = 0; i < natoms; ++i) {
    for (int j = i; j < natoms; ++j) {
      double d[3], shift[3];
      for (int k = 0; k < 3; ++k) d[k] = x[3 * i + k] - x[3 * j + k];
      // Python's round() rounds halves to even, as nearbyint does.
      for (int k = 0; k < 3; ++k) shift[k] = std::nearbyint(dot(d, reciprocal[k].data()));
      for (int k = 0; k < 3; ++k) d[k] = d[k] - shift[0] * a[k] - shift[1] * b[k] - shift[2] * c[k];
      for (int na = -reach[0]; na <= reach[0]; ++na)
        for (int nb = -reach[1]; nb <= reach[1]; ++nb)
          for (int nc = -reach[2]; nc <= reach[2]; ++nc) {
            if (i == j && na == 0 && nb == 0 && nc == 0) continue;
            double r[3];
            for (int k = 0; k < 3; ++k) r[k] = d[k] + na * a[k] + nb * b[k] + nc * c[k];
            const double r_squared = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
            if (r_squared >= cutoff_squared) continue;
            const double sr6 = std::pow(lj.sigma * lj.sigma / r_squared, 3.0);
            const double pair_energy = 4.0 * lj.epsilon * (sr6 * sr6 - sr6);
            const double fpair = 24.0 * lj.epsilon * (2.0 * sr6 * sr6 - sr6) / r_squared;
            const double weight = i == j ? 0.5 : 1.0;
            result.energy += weight * pair_energy;
            if (i != j)
              for (int k = 0; k < 3; ++k) {
                result.forces[3 * i + k] += r[k] * fpair;
                result.forces[3 * j + k] -= r[k] * fpair;
              }
            for (int k = 0; k < 3; ++k)
              for (int m = 0; m < 3; ++m) result.virial[3 * k + m] += weight * r[k] * r[m] * fpair;
          }
    }
  }
  return result;
}

struct Box {
  std::array<double, 9> cell{};   // Angstrom, rows a, b, c
  std::vector<double> positions;  // Angstrom
};

// 2x2x2 bcc cells of argon-like spacing (16 atoms), every atom displaced by up to 0.15 A.
Box argon_box(bool triclinic, unsigned seed) {
  Box box;
  box.cell = triclinic ? std::array<double, 9>{8.6, 0.0, 0.0, 1.5, 8.4, 0.0, -1.0, 0.8, 8.2}
                       : std::array<double, 9>{8.6, 0.0, 0.0, 0.0, 8.6, 0.0, 0.0, 0.0, 8.6};
  std::mt19937 generator(seed);
  std::uniform_real_distribution<double> jitter(-0.15, 0.15);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 2; ++k)
        for (double basis : {0.0, 0.5}) {
          const double s[3] = {(i + basis) / 2, (j + basis) / 2, (k + basis) / 2};
          for (int m = 0; m < 3; ++m)
            box.positions.push_back(s[0] * box.cell[m] + s[1] * box.cell[3 + m] +
                                    s[2] * box.cell[6 + m] + jitter(generator));
        }
  return box;
}

IpiRequest request_for(const Box& box) {
  IpiRequest request;
  for (int k = 0; k < 9; ++k) request.cell[k] = box.cell[k] / kBohrAngstrom;
  for (double x : box.positions) request.positions.push_back(x / kBohrAngstrom);
  return request;
}

// The reference from what the client sees (Bohr back to Angstrom), in atomic units.
IpiResult reference_for(const IpiRequest& request, const LennardJonesParameters& lj) {
  std::array<double, 9> cell{};
  std::vector<double> positions;
  for (int k = 0; k < 9; ++k) cell[k] = request.cell[k] * kBohrAngstrom;
  for (double x : request.positions) positions.push_back(x * kBohrAngstrom);
  const LennardJonesResult ev = lennard_jones(cell, positions, lj);
  IpiResult result;
  result.energy = ev.energy / kHartreeEv;
  const double to_force = kBohrAngstrom / kHartreeEv;
  for (double f : ev.forces) result.forces.push_back(f * to_force);
  for (int k = 0; k < 9; ++k) result.virial[k] = ev.virial[k] / kHartreeEv;
  return result;
}

void expect_same_result(const IpiResult& got, const IpiResult& expected) {
  auto close = [](double value, double reference) {
    return std::abs(value - reference) <= 1e-12 * std::abs(reference);
  };
  EXPECT_TRUE(close(got.energy, expected.energy)) << got.energy << " vs " << expected.energy;
  ASSERT_EQ(got.forces.size(), expected.forces.size());
  for (std::size_t i = 0; i < got.forces.size(); ++i)
    EXPECT_TRUE(close(got.forces[i], expected.forces[i]))
        << "force " << i << ": " << got.forces[i] << " vs " << expected.forces[i];
  for (int k = 0; k < 9; ++k)
    EXPECT_TRUE(close(got.virial[k], expected.virial[k]))
        << "virial " << k << ": " << got.virial[k] << " vs " << expected.virial[k];
}

std::string client_script() {
  return std::string(OTF_SOURCE_DIR) + "/tests/ipi/ipi_test_client.py";
}

std::string unique_name(const std::string& what) {
  return "otftest_" + std::to_string(::getpid()) + "_" + what;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A scratch directory for logs and --fault-once files, removed at the end of the test.
class ScratchDirectory {
 public:
  explicit ScratchDirectory(const std::string& name)
      : path_(std::filesystem::temp_directory_path() / unique_name(name)) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

class IpiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // scripts/setup.sh installs it: its absence is a broken set-up, not a reason to pass.
    ASSERT_EQ(::access(kPython, X_OK), 0) << kPython << " is needed for the i-PI client";
  }
};

// A client that reads its address from the environment (OTF_IPI_*), as ClientProcess sets it.
std::string client_command(const std::string& options) {
  return std::string(kPython) + " " + client_script() + " --lj 0.0104 3.405 9.0 " + options;
}

TEST_F(IpiServerTest, UnixCallsMatchReferenceLennardJones) {
  ScratchDirectory scratch("unix_calls");
  IpiServer server({IpiAddress::Kind::Unix, unique_name("unix_calls"), 0});
  ClientProcess client(client_command("--calls-log " + scratch.file("calls")),
                       scratch.file("client.log"), server.address());
  const auto alive = [&] { return client.running(); };
  server.accept_client(30.0, alive);
  ASSERT_TRUE(server.connected());
  const LennardJonesParameters lj;
  // Cubic then triclinic over one connection: the first call goes through NEEDINIT/INIT (the
  // client asks on its first STATUS), the second straight to POSDATA.
  for (bool triclinic : {false, true}) {
    const IpiRequest request = request_for(argon_box(triclinic, 7));
    const IpiResult result = server.compute(request, 30.0, alive);
    SCOPED_TRACE(triclinic ? "triclinic" : "cubic");
    expect_same_result(result, reference_for(request, lj));
    EXPECT_EQ(result.extra, "");  // the client's single zero byte, trimmed
  }
  server.send_exit_and_close();
  EXPECT_FALSE(server.connected());
  // The client exits 0 on EXIT.
  const auto start = std::chrono::steady_clock::now();
  while (client.running() && seconds_since(start) < 10.0)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(client.exit_description(), "exited with status 0") << client.log_tail();
  std::ifstream calls(scratch.file("calls"));
  int lines = 0;
  for (std::string line; std::getline(calls, line);) ++lines;
  EXPECT_EQ(lines, 2);
}

TEST_F(IpiServerTest, InetCallOnSystemPickedPortMatchesReference) {
  ScratchDirectory scratch("inet_call");
  IpiServer server({IpiAddress::Kind::Inet, "127.0.0.1", 0});
  ASSERT_GT(server.address().port, 0);
  EXPECT_EQ(server.address().describe(), "inet:127.0.0.1:" + std::to_string(server.address().port));
  ClientProcess client(substitute_address(client_command("--inet {host}:{port}"), server.address()),
                       scratch.file("client.log"), server.address());
  const auto alive = [&] { return client.running(); };
  server.accept_client(30.0, alive);
  const IpiRequest request = request_for(argon_box(true, 11));
  expect_same_result(server.compute(request, 30.0, alive), reference_for(request, {}));
  server.send_exit_and_close();
}

// IpiReference's label in the background (fix otf/train label_wait no): start_label returns at
// once, the call runs in a thread of rank 0, and its answer equals the one waited for.
TEST_F(IpiServerTest, ALabelStartedInTheBackgroundArrivesLaterAndEqualsTheOneWaitedFor) {
  ScratchDirectory scratch("background");
  constexpr double kCallSeconds = 0.5;
  IpiReferenceSettings settings;
  settings.address = {IpiAddress::Kind::Unix, unique_name("background"), 0};
  settings.client_command = client_command("--delay " + std::to_string(kCallSeconds));
  settings.client_log = scratch.file("client.log");
  settings.connect_timeout = 30.0;
  settings.call_timeout = 30.0;
  settings.units = atomic_unit_conversion("metal");
  IpiReference reference(settings, MPI_COMM_WORLD);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Rank 0 holds every atom, the others none.
  const Box box = argon_box(true, 5);
  const int atoms = static_cast<int>(box.positions.size() / 3);
  std::vector<int> types(static_cast<std::size_t>(atoms), 1);
  std::vector<int64_t> ids(static_cast<std::size_t>(atoms));
  for (int i = 0; i < atoms; ++i) ids[static_cast<std::size_t>(i)] = i + 1;
  ReferenceConfiguration configuration;
  configuration.step = 7;
  configuration.num_local = rank == 0 ? atoms : 0;
  configuration.positions = box.positions.data();
  configuration.types = types.data();
  configuration.ids = ids.data();
  configuration.atoms_in_frame = atoms;
  configuration.cell = box.cell;

  const ReferenceLabel waited = reference.label(configuration, ReferenceUse::Label);
  const auto started = std::chrono::steady_clock::now();
  const std::unique_ptr<PendingLabel> pending = reference.start_label(configuration);
  ASSERT_TRUE(pending);
  EXPECT_LT(seconds_since(started), 0.5 * kCallSeconds) << "start_label waited for the call";
  if (rank == 0) {
    EXPECT_FALSE(pending->ready());
  }
  const ReferenceLabel background = pending->wait();
  EXPECT_GE(seconds_since(started), kCallSeconds);
  EXPECT_EQ(background.energy, waited.energy);
  EXPECT_EQ(background.virial, waited.virial);
  // Rank 0 holds the whole frame's forces in id order, here its own atoms' order.
  EXPECT_EQ(background.owned_forces, rank == 0 ? waited.owned_forces : std::vector<double>{});
  EXPECT_EQ(reference.failed_attempts(), 0);
}

// The C++ reference itself: forces are minus the energy's gradient, the virial minus its
// derivative with respect to a homogeneous strain (W_ab = -dE/de_ba).
TEST(IpiReferenceLennardJones, ForcesAndVirialAreEnergyDerivatives) {
  const Box box = argon_box(true, 3);
  const LennardJonesParameters lj;
  const LennardJonesResult at = lennard_jones(box.cell, box.positions, lj);
  const double h = 1e-5;
  for (int i : {0, 7, 15})
    for (int k = 0; k < 3; ++k) {
      Box plus = box, minus = box;
      plus.positions[3 * i + k] += h;
      minus.positions[3 * i + k] -= h;
      const double derivative = (lennard_jones(plus.cell, plus.positions, lj).energy -
                                 lennard_jones(minus.cell, minus.positions, lj).energy) /
                                (2 * h);
      EXPECT_NEAR(at.forces[3 * i + k], -derivative, 1e-7) << "atom " << i << " axis " << k;
    }
  auto strained = [&](int a, int b, double e) {
    Box s = box;
    auto apply = [&](double* v) { v[a] += e * v[b]; };
    for (int row = 0; row < 3; ++row) apply(&s.cell[3 * row]);
    for (std::size_t atom = 0; atom < s.positions.size() / 3; ++atom) apply(&s.positions[3 * atom]);
    return lennard_jones(s.cell, s.positions, lj).energy;
  };
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b) {
      const double derivative = (strained(a, b, h) - strained(a, b, -h)) / (2 * h);
      EXPECT_NEAR(at.virial[3 * b + a], -derivative, 1e-6) << "virial " << b << a;
    }
}

TEST_F(IpiServerTest, ClientThatNeverConnectsTimesOut) {
  ScratchDirectory scratch("never_connects");
  IpiServer server({IpiAddress::Kind::Unix, unique_name("never"), 0});
  ClientProcess client(client_command("--fault never-connect"), scratch.file("client.log"),
                       server.address());
  const auto start = std::chrono::steady_clock::now();
  try {
    server.accept_client(1.0, [&] { return client.running(); });
    FAIL() << "a client connected";
  } catch (const IpiFailure& failure) {
    EXPECT_EQ(failure.kind(), IpiFailureKind::NeverConnected) << failure.what();
    EXPECT_NE(std::string(failure.what()).find(server.address().describe()), std::string::npos);
  }
  const double elapsed = seconds_since(start);
  EXPECT_GE(elapsed, 1.0);
  EXPECT_LT(elapsed, 1.5);
  EXPECT_TRUE(client.running());
}

TEST_F(IpiServerTest, ClientThatExitsAtStartIsNoticedQuickly) {
  ScratchDirectory scratch("exits_at_start");
  IpiServer server({IpiAddress::Kind::Unix, unique_name("exits"), 0});
  ClientProcess client(client_command("--fault exit-at-start"), scratch.file("client.log"),
                       server.address());
  const auto start = std::chrono::steady_clock::now();
  try {
    server.accept_client(30.0, [&] { return client.running(); });
    FAIL() << "a client connected";
  } catch (const IpiFailure& failure) {
    EXPECT_EQ(failure.kind(), IpiFailureKind::ClientExited) << failure.what();
  }
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_EQ(client.exit_description(), "exited with status 1");
}

struct FaultCase {
  const char* fault;
  IpiFailureKind expected;
  int fault_at;         // the client's call at which it faults
  const char* message;  // a part of the failure's message
};

class IpiFaultTest : public ::testing::TestWithParam<FaultCase> {
 protected:
  void SetUp() override {
    // scripts/setup.sh installs it: its absence is a broken set-up, not a reason to pass.
    ASSERT_EQ(::access(kPython, X_OK), 0) << kPython << " is needed for the i-PI client";
  }
};

// Each fault is reported as its kind, the connection is dropped, and a relaunched client (the
// fault-once file now exists) answers correctly on the same server.
TEST_P(IpiFaultTest, IsReportedThenARelaunchedClientAnswers) {
  const FaultCase& fault = GetParam();
  const std::string name = std::string("fault_") + fault.fault;
  ScratchDirectory scratch(name);
  IpiServer server({IpiAddress::Kind::Unix, unique_name(name), 0});
  const std::string command =
      client_command(std::string("--fault ") + fault.fault + " --fault-at " +
                     std::to_string(fault.fault_at) + " --fault-once " + scratch.file("faulted"));
  const IpiRequest request = request_for(argon_box(true, 5));
  const IpiResult expected = reference_for(request, {});
  const double timeout = 2.0;
  {
    ClientProcess client(command, scratch.file("client.log"), server.address());
    const auto alive = [&] { return client.running(); };
    server.accept_client(30.0, alive);
    for (int call = 1; call < fault.fault_at; ++call)
      expect_same_result(server.compute(request, 30.0, alive), expected);
    const auto start = std::chrono::steady_clock::now();
    try {
      server.compute(request, timeout, alive);
      FAIL() << "no failure";
    } catch (const IpiFailure& failure) {
      EXPECT_EQ(to_string(failure.kind()), to_string(fault.expected)) << failure.what();
      EXPECT_NE(std::string(failure.what()).find(fault.message), std::string::npos)
          << failure.what();
    }
    const double elapsed = seconds_since(start);
    if (fault.expected == IpiFailureKind::Timeout) {
      EXPECT_GE(elapsed, timeout);
      EXPECT_LT(elapsed, timeout + 0.5);
    } else {
      EXPECT_LT(elapsed, timeout);
    }
    EXPECT_FALSE(server.connected());
    client.stop(1.0);
  }
  ClientProcess relaunched(command, scratch.file("client.log"), server.address());
  const auto alive = [&] { return relaunched.running(); };
  server.accept_client(30.0, alive);
  expect_same_result(server.compute(request, 30.0, alive), expected);
  server.send_exit_and_close();
}

INSTANTIATE_TEST_SUITE_P(
    Faults, IpiFaultTest,
    ::testing::Values(
        FaultCase{"die", IpiFailureKind::Disconnected, 1, "the client disconnected"},
        FaultCase{"disconnect", IpiFailureKind::Disconnected, 1, "the client disconnected"},
        FaultCase{"hang", IpiFailureKind::Timeout, 1, "HAVEDATA"},
        FaultCase{"garbage", IpiFailureKind::ProtocolError, 2,
                  "expected HAVEDATA in reply to STATUS after POSDATA, got 'XXXXXXXXXXXX'"},
        FaultCase{"nan", IpiFailureKind::NonFinite, 1, "force on atom 0 (y"},
        FaultCase{"wrong-count", IpiFailureKind::WrongAtomCount, 1, "17 atoms, 16 were sent"},
        FaultCase{"not-converged", IpiFailureKind::NotConverged, 1, "did not converge"}),
    [](const ::testing::TestParamInfo<FaultCase>& info) {
      std::string name = info.param.fault;
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

TEST_F(IpiServerTest, UnsendableCallsAreLogicErrorsThatKeepTheConnection) {
  ScratchDirectory scratch("unsendable");
  IpiServer server({IpiAddress::Kind::Unix, unique_name("unsendable"), 0});
  const IpiRequest request = request_for(argon_box(false, 1));
  EXPECT_THROW(server.compute(request, 1.0), std::logic_error);  // no client yet
  ClientProcess client(client_command(""), scratch.file("client.log"), server.address());
  const auto alive = [&] { return client.running(); };
  server.accept_client(30.0, alive);
  IpiRequest singular = request;
  singular.cell = {};
  EXPECT_THROW(server.compute(singular, 1.0, alive), std::invalid_argument);
  IpiRequest ragged = request;
  ragged.positions.pop_back();
  EXPECT_THROW(server.compute(ragged, 1.0, alive), std::invalid_argument);
  ASSERT_TRUE(server.connected());
  expect_same_result(server.compute(request, 30.0, alive), reference_for(request, {}));
  server.send_exit_and_close();
}

TEST(IpiServerAddress, StaleSocketFileIsReplacedAndRemovedAtTheEnd) {
  const IpiAddress address{IpiAddress::Kind::Unix, unique_name("stale"), 0};
  const std::string path = address.unix_path();
  {
    // A socket file nobody listens on, as a killed run leaves it.
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un socket_address{};
    socket_address.sun_family = AF_UNIX;
    std::strcpy(socket_address.sun_path, path.c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&socket_address), sizeof socket_address), 0)
        << std::strerror(errno);
    ::close(fd);
  }
  ASSERT_EQ(::access(path.c_str(), F_OK), 0);
  {
    IpiServer server(address);
    EXPECT_EQ(server.address().describe(), "unix:" + path);
    struct stat status {};
    ASSERT_EQ(::lstat(path.c_str(), &status), 0);
    EXPECT_TRUE(S_ISSOCK(status.st_mode));
  }
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

TEST(IpiServerAddress, UnixSocketFileIsPrivateWhateverTheUmask) {
  const IpiAddress address{IpiAddress::Kind::Unix, unique_name("private"), 0};
  const mode_t previous = ::umask(0);  // the most permissive: the file would be 0777
  {
    IpiServer server(address);
    ::umask(previous);
    struct stat status {};
    ASSERT_EQ(::lstat(address.unix_path().c_str(), &status), 0);
    EXPECT_EQ(status.st_mode & 0777, 0600u);
    EXPECT_EQ(status.st_uid, ::geteuid());
  }
  ::umask(previous);
}

// Another user's process connects over loopback TCP (a forked child that drops to uid 65534):
// the server refuses it with a warning naming the peer, and says so when no client came.
TEST(IpiServerAddress, AnotherUsersTcpPeerIsRefusedWithAWarning) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  IpiServer server({IpiAddress::Kind::Inet, "127.0.0.1", 0});
  EXPECT_FALSE(server.beyond_loopback());
  std::vector<std::string> warnings;
  server.set_warn([&](const std::string& line) { warnings.push_back(line); });
  const int port = server.address().port;
  const pid_t child = ::fork();
  if (child == 0) {
    // _exit only: no handlers of the parent's libraries (MPI) run in the child.
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) ::_exit(2);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) ::_exit(3);
    char byte = 0;
    ::_exit(::recv(fd, &byte, 1, 0) == 0 ? 0 : 4);  // 0: the server hung up on us
  }
  ASSERT_GT(child, 0);
  try {
    server.accept_client(2.0);
    FAIL() << "another user's client was accepted";
  } catch (const IpiFailure& failure) {
    EXPECT_EQ(failure.kind(), IpiFailureKind::NeverConnected);
    EXPECT_NE(std::string(failure.what()).find("refused 1 connection(s), the last from 127.0.0.1:"),
              std::string::npos)
        << failure.what();
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("(pid unknown, uid 65534): it runs as uid 65534, not as this run's "
                             "uid 0; waiting for the right client"),
            std::string::npos)
      << warnings[0];
}

TEST(IpiServerAddress, AddressInUseNonSocketAndOverlongPathAreRefused) {
  const IpiAddress address{IpiAddress::Kind::Unix, unique_name("in_use"), 0};
  {
    IpiServer first(address);
    try {
      IpiServer second(address);
      FAIL() << "a second server bound " << address.describe();
    } catch (const std::runtime_error& error) {
      EXPECT_NE(std::string(error.what()).find("in use"), std::string::npos) << error.what();
      EXPECT_NE(std::string(error.what()).find(address.unix_path()), std::string::npos);
    }
    // The refused server left the first one's socket alone.
    EXPECT_EQ(::access(address.unix_path().c_str(), F_OK), 0);
  }
  const IpiAddress regular_file{IpiAddress::Kind::Unix, unique_name("regular_file"), 0};
  std::ofstream(regular_file.unix_path()) << "not a socket\n";
  EXPECT_THROW(IpiServer{regular_file}, std::runtime_error);
  ::unlink(regular_file.unix_path().c_str());
  try {
    IpiServer server({IpiAddress::Kind::Unix, std::string(200, 'x'), 0});
    FAIL() << "an overlong path was bound";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("limit"), std::string::npos) << error.what();
  }
  // A TCP port somebody listens on.
  IpiServer taken({IpiAddress::Kind::Inet, "127.0.0.1", 0});
  EXPECT_THROW(IpiServer({IpiAddress::Kind::Inet, "127.0.0.1", taken.address().port}),
               std::runtime_error);
}

TEST(IpiServerAddress, SubstituteAddress) {
  const IpiAddress unix_address{IpiAddress::Kind::Unix, "si", 0};
  EXPECT_EQ(unix_address.unix_path(), "/tmp/ipi_si");
  EXPECT_EQ(unix_address.describe(), "unix:/tmp/ipi_si");
  EXPECT_EQ(
      substitute_address("cp2k --host {host} -s {unix_path} ({address}) {other}", unix_address),
      "cp2k --host si -s /tmp/ipi_si (unix:/tmp/ipi_si) {other}");
  const IpiAddress inet_address{IpiAddress::Kind::Inet, "10.0.0.2", 31415};
  EXPECT_EQ(substitute_address("pw.x --ipi {host}:{port} {port}{host}", inet_address),
            "pw.x --ipi 10.0.0.2:31415 3141510.0.0.2");
  EXPECT_EQ(substitute_address("{address}", inet_address), "inet:10.0.0.2:31415");
}

TEST(ClientProcess, StopEndsTheWholeProcessGroup) {
  // The container's init reaps orphans only every second or so; as their subreaper this process
  // reaps them itself (ClientProcess reaps its group's children), so the group is gone at once.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  for (const char* command : {"sleep 1000 & wait", "trap '' TERM; sleep 1000 & wait"}) {
    SCOPED_TRACE(command);
    ClientProcess process(command, "");
    const long group = process.pid();
    // The background sleep exists once the shell has started it.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_TRUE(process.running());
    const auto start = std::chrono::steady_clock::now();
    process.stop(0.5);
    EXPECT_LT(seconds_since(start), 2.0);
    const int signalled = ::kill(-static_cast<pid_t>(group), 0);
    const int error = errno;
    EXPECT_EQ(signalled, -1);
    EXPECT_EQ(error, ESRCH) << std::strerror(error);
    EXPECT_FALSE(process.running());
    EXPECT_NE(process.exit_description().find("killed by signal"), std::string::npos)
        << process.exit_description();
    process.stop();  // idempotent
  }
}

TEST(ClientProcess, ReportsExitStatusLogAndEnvironment) {
  ScratchDirectory scratch("process");
  const std::string log = scratch.file("client.log");
  const IpiAddress address{IpiAddress::Kind::Inet, "127.0.0.1", 4242};
  {
    ClientProcess process(
        "echo \"$OTF_IPI_MODE $OTF_IPI_HOST $OTF_IPI_PORT [$OTF_IPI_UNIX_PATH]\"; "
        "read line && echo stdin-not-empty; echo to-stderr >&2; exit 3",
        log, address);
    const auto start = std::chrono::steady_clock::now();
    while (process.running() && seconds_since(start) < 10.0)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(process.exit_description(), "exited with status 3");
    EXPECT_EQ(process.log_tail(), "inet 127.0.0.1 4242 []\nto-stderr\n");
    // At most max_bytes, from the start of a line.
    EXPECT_EQ(process.log_tail(12), "to-stderr\n");
  }
  {
    // Appended, not truncated.
    ClientProcess process("echo second; kill -9 $$", log);
    const auto start = std::chrono::steady_clock::now();
    while (process.running() && seconds_since(start) < 10.0)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(process.exit_description(), "killed by signal 9");
    EXPECT_EQ(process.log_tail(), "inet 127.0.0.1 4242 []\nto-stderr\nsecond\n");
  }
  EXPECT_THROW(ClientProcess("true", scratch.file("missing/dir/client.log")), std::runtime_error);
}

}  // namespace
}  // namespace otf::testing
