/* -*- c++ -*- ----------------------------------------------------------
   OTF-Torch: the otf/info command. Prints the plugin, LAMMPS and LibTorch
   versions and checks that LibTorch computes correctly on every MPI rank.
------------------------------------------------------------------------- */

#ifndef LMP_OTF_INFO_H
#define LMP_OTF_INFO_H

#include "command.h"

namespace LAMMPS_NS {

class OTFInfo : public Command {
 public:
  explicit OTFInfo(class LAMMPS *lmp) : Command(lmp) {}
  void command(int narg, char **arg) override;
};

}    // namespace LAMMPS_NS

#endif
