/* ----------------------------------------------------------------------
   OTF-Torch: a reference outside LAMMPS as fix otf/train's reference.
------------------------------------------------------------------------- */

#include "external_code_reference.h"

#include "atom.h"

#include <algorithm>
#include <utility>

using namespace LAMMPS_NS;

ExternalCodeReference::ExternalCodeReference(LAMMPS *lmp, std::unique_ptr<otf::Reference> code) :
    Pointers(lmp), code_(std::move(code))
{
}

// Not "= default": C++17 refuses a defaulted destructor whose noexcept differs from the implicit one.
ExternalCodeReference::~ExternalCodeReference() noexcept {}

std::string ExternalCodeReference::description() const
{
  return code_->description();
}

otf::ReferenceLabel ExternalCodeReference::label(const otf::ReferenceConfiguration &configuration,
                                                 otf::ReferenceUse use)
{
  otf::ReferenceLabel label = code_->label(configuration, use);
  if (use == otf::ReferenceUse::Drive && label.owned_forces.size() == 3 * (size_t) atom->nlocal)
    std::copy(label.owned_forces.begin(), label.owned_forces.end(), atom->f[0]);
  return label;
}

std::unique_ptr<otf::PendingLabel> ExternalCodeReference::start_label(
    const otf::ReferenceConfiguration &configuration)
{
  return code_->start_label(configuration);
}

int64_t ExternalCodeReference::failed_attempts() const
{
  return code_->failed_attempts();
}
