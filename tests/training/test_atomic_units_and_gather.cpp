// Unit conversions to the i-PI protocol's atomic units (CODATA 2018, as CP2K and ASE use them) and
// the whole-frame gather of the references outside the MD code: atoms in id order on rank 0,
// per-atom values scattered back in each rank's own order.
#include <gtest/gtest.h>
#include <mpi.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "atomic_units.h"
#include "frame_gather.h"

namespace otf {
namespace {

TEST(AtomicUnits, MetalRealElectronAndSiMatchCodata2018) {
  const AtomicUnitConversion metal = atomic_unit_conversion("metal");
  EXPECT_NEAR(metal.bohr_per_length, 1.0 / 0.529177210903, 1e-15);
  EXPECT_NEAR(1.0 / metal.hartree_per_energy, 27.211386245988, 1e-11);
  // 1 Hartree/Bohr = 51.42208619083232 eV/A.
  EXPECT_NEAR(1.0 / metal.hartree_per_bohr_per_force(), 27.211386245988 / 0.529177210903, 1e-10);
  const AtomicUnitConversion real = atomic_unit_conversion("real");
  EXPECT_NEAR(1.0 / real.hartree_per_energy, 627.5094740631, 1e-8);  // kcal/mol per Hartree
  const AtomicUnitConversion electron = atomic_unit_conversion("electron");
  EXPECT_EQ(electron.bohr_per_length, 1.0);
  EXPECT_EQ(electron.hartree_per_energy, 1.0);
  const AtomicUnitConversion si = atomic_unit_conversion("si");
  EXPECT_NEAR(si.bohr_per_length * 0.529177210903e-10, 1.0, 1e-15);
  for (const char* style : {"cgs", "micro", "nano"}) EXPECT_NO_THROW(atomic_unit_conversion(style));
}

TEST(AtomicUnits, LjAndUnknownStylesAreRefusedWithTheAcceptedList) {
  for (const char* style : {"lj", "furlong"}) {
    try {
      atomic_unit_conversion(style);
      FAIL() << style;
    } catch (const std::invalid_argument& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find(std::string("units ") + style), std::string::npos) << message;
      EXPECT_NE(message.find("metal, real, electron, si, cgs, micro, nano"), std::string::npos);
    }
  }
}

TEST(FrameGather, SortsByIdAndScattersBackInLocalOrder) {
  const std::vector<int64_t> ids = {7, 2, 5, 1};
  const std::vector<int> types = {1, 2, 1, 2};
  const std::vector<double> positions = {7, 7.1, 7.2, 2, 2.1, 2.2, 5, 5.1, 5.2, 1, 1.1, 1.2};
  ReferenceConfiguration configuration;
  configuration.num_local = 4;
  configuration.ids = ids.data();
  configuration.types = types.data();
  configuration.positions = positions.data();
  const FrameGather frame(configuration, MPI_COMM_WORLD);
  ASSERT_TRUE(frame.is_root());
  EXPECT_EQ(frame.ids(), (std::vector<int64_t>{1, 2, 5, 7}));
  EXPECT_EQ(frame.types(), (std::vector<int>{2, 2, 1, 1}));
  EXPECT_EQ(frame.positions(),
            (std::vector<double>{1, 1.1, 1.2, 2, 2.1, 2.2, 5, 5.1, 5.2, 7, 7.1, 7.2}));
  const std::vector<double> owned_values = {70, 20, 50, 10};
  EXPECT_EQ(frame.gather(owned_values.data(), 1), (std::vector<double>{10, 20, 50, 70}));
  // Values by id back to the owners' order.
  EXPECT_EQ(frame.scatter({-1, -2, -5, -7}, 1), (std::vector<double>{-7, -2, -5, -1}));
}

TEST(FrameGather, AnIdHeldTwiceIsAnError) {
  const std::vector<int64_t> ids = {1, 1};
  const std::vector<int> types = {1, 1};
  const std::vector<double> positions(6, 0.0);
  ReferenceConfiguration configuration;
  configuration.num_local = 2;
  configuration.ids = ids.data();
  configuration.types = types.data();
  configuration.positions = positions.data();
  EXPECT_THROW(FrameGather(configuration, MPI_COMM_WORLD), std::runtime_error);
}

}  // namespace
}  // namespace otf
