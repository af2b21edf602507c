/* ----------------------------------------------------------------------
   OTF-Torch plugin registration: every style of the plugin is registered
   here, after checking that the LAMMPS loading us is the one we were built
   for. The check uses only LAMMPS' C library interface, whose layout does
   not change between versions, so a mismatch is reported instead of crashing.
------------------------------------------------------------------------- */

#include "lammpsplugin.h"

#include "build_info.h"
#include "compute_otf_atom.h"
#include "fix_otf_train.h"
#include "otf_info.h"
#include "otf_lammps_compat.h"
#include "pair_otf.h"
#ifdef OTF_WITH_KOKKOS
#include "pair_otf_kokkos_factory.h"
#endif

#include "comm.h"
#include "lammps.h"
#include "utils.h"
#include "version.h"

#include <dlfcn.h>

#include <cstdio>
#include <string>

using namespace LAMMPS_NS;

namespace {

// The C library functions we look up; present in every LAMMPS since 2020.
using VersionFunction = int (*)(void *);
using ExtractSettingFunction = int (*)(void *, const char *);
using HasExceptionsFunction = int (*)();

template <typename Function> Function lookup_c_api(const char *name)
{
  return reinterpret_cast<Function>(dlsym(RTLD_DEFAULT, name));
}

// Returns an empty string when the host LAMMPS matches the build, otherwise what is wrong.
std::string incompatibility_with_host(void *lmp_handle)
{
  const auto version = lookup_c_api<VersionFunction>("lammps_version");
  const auto extract_setting = lookup_c_api<ExtractSettingFunction>("lammps_extract_setting");
  if (!version || !extract_setting)
    return "the LAMMPS library interface (lammps_version) is not visible to plugins; "
           "link lmp with -rdynamic or build LAMMPS as a shared library";

  const int host_version = version(lmp_handle);
  if (host_version != OTF_LAMMPS_VERSION_ID)
    return "it was built for LAMMPS " OTF_LAMMPS_VERSION_STRING " (" +
        std::to_string(OTF_LAMMPS_VERSION_ID) + ") but is loaded into LAMMPS version " +
        std::to_string(host_version);

  struct IntegerSize {
    const char *name;
    int built;
  };
  const IntegerSize sizes[] = {{"bigint", static_cast<int>(sizeof(bigint))},
                               {"tagint", static_cast<int>(sizeof(tagint))},
                               {"imageint", static_cast<int>(sizeof(imageint))}};
  for (const auto &size : sizes) {
    const int host = extract_setting(lmp_handle, size.name);
    if (host != size.built)
      return std::string("it was built with ") + std::to_string(size.built) + "-byte " +
          size.name + " but this LAMMPS uses " + std::to_string(host) +
          " bytes (a different -DLAMMPS_SIZES)";
  }

  const auto has_exceptions = lookup_c_api<HasExceptionsFunction>("lammps_config_has_exceptions");
  constexpr bool built_with_exceptions = otf_compat::built_with_lammps_exceptions();
  if (has_exceptions && (has_exceptions() != 0) != built_with_exceptions)
    return std::string("it was built ") + (built_with_exceptions ? "with" : "without") +
        " LAMMPS_EXCEPTIONS but this LAMMPS was not";
  return {};
}

Command *otf_info_creator(LAMMPS *lmp)
{
  return new OTFInfo(lmp);
}

Pair *pair_otf_creator(LAMMPS *lmp)
{
  return new PairOTF(lmp);
}

#ifdef OTF_WITH_KOKKOS
Pair *pair_otf_kokkos_device_creator(LAMMPS *lmp)
{
  return create_pair_otf_kokkos(lmp, false);
}

Pair *pair_otf_kokkos_host_creator(LAMMPS *lmp)
{
  return create_pair_otf_kokkos(lmp, true);
}
#endif

Compute *compute_otf_atom_creator(LAMMPS *lmp, int argc, char **argv)
{
  return new ComputeOTFAtom(lmp, argc, argv);
}

Fix *fix_otf_train_creator(LAMMPS *lmp, int argc, char **argv)
{
  return new FixOTFTrain(lmp, argc, argv);
}

}    // namespace

extern "C" void lammpsplugin_init(void *lmp_handle, void *dso_handle, void *regfunc)
{
  const std::string problem = incompatibility_with_host(lmp_handle);
  if (!problem.empty()) {
    // LAMMPS' own classes may have another layout here, so only C stdio is safe to use.
    std::fprintf(stderr,
                 "ERROR: OTF-Torch plugin not loaded: %s.\n"
                 "       Rebuild it against this LAMMPS: cmake -DLAMMPS_ROOT=<its install prefix>"
                 " (see the OTF-Torch README).\n",
                 problem.c_str());
    return;
  }

  auto *lmp = static_cast<LAMMPS *>(lmp_handle);
  const auto register_plugin = reinterpret_cast<lammpsplugin_regfunc>(regfunc);
  const otf::BuildInfo info = otf::build_info();
  if (lmp->comm->me == 0)
    utils::logmesg(lmp, "OTF-Torch {} plugin (built for LAMMPS {}, LibTorch {})\n",
                   info.otf_version, OTF_LAMMPS_VERSION_STRING, info.torch_version);

  lammpsplugin_t plugin;
  plugin.version = LAMMPS_VERSION;
  plugin.style = "command";
  plugin.name = "otf/info";
  plugin.info = "OTF-Torch build and runtime information";
  plugin.author = "OTF-Torch developers";
  plugin.creator.v1 = reinterpret_cast<lammpsplugin_factory1 *>(&otf_info_creator);
  plugin.handle = dso_handle;
  register_plugin(&plugin, lmp);

  plugin.style = "pair";
  plugin.name = "otf";
  plugin.info = "OTF-Torch ML potential";
  plugin.creator.v1 = reinterpret_cast<lammpsplugin_factory1 *>(&pair_otf_creator);
  register_plugin(&plugin, lmp);
#ifdef OTF_WITH_KOKKOS
  // The KOKKOS package's naming: otf/kk runs on Kokkos' device space, otf/kk/host on its host
  // space (the same class in a host-only Kokkos build).
  const struct {
    const char *name;
    Pair *(*creator)(LAMMPS *);
  } kokkos_variants[] = {{"otf/kk", &pair_otf_kokkos_device_creator},
                         {"otf/kk/device", &pair_otf_kokkos_device_creator},
                         {"otf/kk/host", &pair_otf_kokkos_host_creator}};
  for (const auto &variant : kokkos_variants) {
    plugin.name = variant.name;
    plugin.info = "OTF-Torch ML potential, KOKKOS package variant";
    plugin.creator.v1 = reinterpret_cast<lammpsplugin_factory1 *>(variant.creator);
    register_plugin(&plugin, lmp);
  }
#endif

  plugin.style = "compute";
  plugin.name = "otf/atom";
  plugin.info = "OTF-Torch committee uncertainty per atom";
  plugin.creator.v2 = reinterpret_cast<lammpsplugin_factory2 *>(&compute_otf_atom_creator);
  register_plugin(&plugin, lmp);

  plugin.style = "fix";
  plugin.name = "otf/train";
  plugin.info = "OTF-Torch on-the-fly training of pair_style otf's model";
  plugin.creator.v2 = reinterpret_cast<lammpsplugin_factory2 *>(&fix_otf_train_creator);
  register_plugin(&plugin, lmp);
}
