# Sourced by the examples' run.sh: unless LAMMPS_POTENTIALS is set, point it at the potentials
# folder of the lmp that runs them (LMP, default lmp on PATH), <prefix>/share/lammps/potentials,
# where scripts/build-lammps.sh installs LAMMPS' potential files (Si.sw, SiC.tersoff, Cu_u3.eam,
# ...); Debian's /usr/bin/lmp finds /usr/share/lammps/potentials this way too.
if [[ -z ${LAMMPS_POTENTIALS:-} ]]; then
  otf_lmp_path=$(command -v "${LMP:-lmp}" || true)
  if [[ -n $otf_lmp_path ]]; then
    otf_potentials="$(dirname "$(readlink -f "$otf_lmp_path")")/../share/lammps/potentials"
    if [[ -d $otf_potentials ]]; then
      LAMMPS_POTENTIALS=$(cd "$otf_potentials" && pwd)
      export LAMMPS_POTENTIALS
    fi
  fi
fi
