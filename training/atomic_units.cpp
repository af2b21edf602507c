#include "atomic_units.h"

#include <stdexcept>

namespace otf {
namespace {

// CODATA 2018 (exact SI definitions for eV and the Avogadro constant).
constexpr double kBohrMetre = 0.529177210903e-10;
constexpr double kHartreeJoule = 4.3597447222071e-18;
constexpr double kElectronvoltJoule = 1.602176634e-19;
constexpr double kKcalPerMolJoule = 4184.0 / 6.02214076e23;

AtomicUnitConversion conversion(const std::string& style, double length_metre,
                                double energy_joule) {
  return {style, length_metre / kBohrMetre, energy_joule / kHartreeJoule};
}

}  // namespace

AtomicUnitConversion atomic_unit_conversion(const std::string& unit_style) {
  if (unit_style == "metal") return conversion(unit_style, 1e-10, kElectronvoltJoule);
  if (unit_style == "real") return conversion(unit_style, 1e-10, kKcalPerMolJoule);
  if (unit_style == "electron") return {unit_style, 1.0, 1.0};
  if (unit_style == "si") return conversion(unit_style, 1.0, 1.0);
  if (unit_style == "cgs") return conversion(unit_style, 1e-2, 1e-7);
  // micro: picogram micrometre^2 / microsecond^2; nano: attogram nanometre^2 / nanosecond^2.
  if (unit_style == "micro") return conversion(unit_style, 1e-6, 1e-15);
  if (unit_style == "nano") return conversion(unit_style, 1e-9, 1e-21);
  throw std::invalid_argument("units " + unit_style +
                              " cannot be converted to the atomic units of the i-PI protocol "
                              "(accepted: metal, real, electron, si, cgs, micro, nano)");
}

}  // namespace otf
