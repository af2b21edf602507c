/* -*- c++ -*- ----------------------------------------------------------
   OTF-Torch: a reference outside LAMMPS (an ab initio code over the i-PI
   socket, training/ipi_reference.h) as fix otf/train's reference. The
   training layer's reference labels the configuration; this shell puts the
   forces of a driving label into LAMMPS' force array, as a pair-style
   reference does itself.
------------------------------------------------------------------------- */

#ifndef LMP_OTF_EXTERNAL_CODE_REFERENCE_H
#define LMP_OTF_EXTERNAL_CODE_REFERENCE_H

#include "pointers.h"
#include "reference.h"

#include <memory>
#include <string>

namespace LAMMPS_NS {

class ExternalCodeReference : public otf::Reference, protected Pointers {
 public:
  ExternalCodeReference(class LAMMPS *lmp, std::unique_ptr<otf::Reference> code);
  // noexcept as otf::Reference's; LAMMPS' Pointers declares noexcept(false) (4 Feb 2025 does).
  ~ExternalCodeReference() noexcept override;

  std::string description() const override;
  // With `use` Drive, the owned atoms' forces become the label's (LAMMPS' f after the reverse
  // communication of the step, so ghosts need nothing).
  otf::ReferenceLabel label(const otf::ReferenceConfiguration &configuration,
                            otf::ReferenceUse use) override;
  // A label that only trains (label_wait no): the code computes it while the MD goes on.
  std::unique_ptr<otf::PendingLabel> start_label(
      const otf::ReferenceConfiguration &configuration) override;
  int64_t failed_attempts() const override;

 private:
  std::unique_ptr<otf::Reference> code_;
};

}    // namespace LAMMPS_NS

#endif
