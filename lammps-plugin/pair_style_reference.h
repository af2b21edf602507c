/* -*- c++ -*- ----------------------------------------------------------
   OTF-Torch: a LAMMPS pair style (sw, eam/alloy, lj/cut, hybrid/overlay of
   those, ...) as the reference of fix otf/train (training/reference.h).
   It owns the pair style and its coefficients, requests its own neighbour
   list and labels the current configuration without changing the MD forces,
   unless it drives.
------------------------------------------------------------------------- */

#ifndef LMP_OTF_PAIR_STYLE_REFERENCE_H
#define LMP_OTF_PAIR_STYLE_REFERENCE_H

#include "pointers.h"
#include "reference.h"

#include <memory>
#include <string>
#include <vector>

namespace LAMMPS_NS {

class PairStyleReference : public otf::Reference, protected Pointers {
 public:
  // `style_words`: the pair style and its settings; `coeff_lines`: each pair_coeff line as
  // words. Creates the style (LAMMPS errors for unknown styles or bad coefficients).
  PairStyleReference(class LAMMPS *lmp, std::vector<std::string> style_words,
                     std::vector<std::vector<std::string>> coeff_lines);
  // noexcept as otf::Reference's; LAMMPS' Pointers declares noexcept(false) (4 Feb 2025 does).
  ~PairStyleReference() noexcept override;

  std::string description() const override;
  // On the host arrays: f is set aside, the style computes energy, forces and virial from zero
  // (ghost forces folded onto owners with newton on), the owned forces are read and f is put
  // back bit for bit, unless `use` is Drive.
  otf::ReferenceLabel label(const otf::ReferenceConfiguration &configuration,
                            otf::ReferenceUse use) override;

  // From the fix's init(): the style's init() and its own neighbour list at its own cutoff.
  // Returns that cutoff.
  double init();

 private:
  std::string style_;
  std::vector<std::string> settings_;
  std::vector<std::vector<std::string>> coeff_lines_;
  std::unique_ptr<class Pair> pair_;
  std::vector<double> saved_forces_;
};

}    // namespace LAMMPS_NS

#endif
