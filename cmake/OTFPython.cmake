# What the Python module (python/, issue 36) needs: a Python 3 with its development headers
# (Debian's python3-dev; the module is for /usr/bin/python3, where python3-ase lives) and
# Debian's pybind11-dev. Sets OTF_PYTHON_AVAILABLE, the default of the OTF_BUILD_PYTHON option,
# and the interpreter's include folder and extension suffix for python/CMakeLists.txt.
if(EXISTS "/usr/bin/python3")
  set(OTF_PYTHON_EXECUTABLE_DEFAULT "/usr/bin/python3")
else()
  find_program(OTF_PYTHON_EXECUTABLE_DEFAULT NAMES python3)
endif()
set(OTF_PYTHON_EXECUTABLE "${OTF_PYTHON_EXECUTABLE_DEFAULT}" CACHE FILEPATH
    "The Python 3 the otf_torch module is built for (needs its development headers)")

set(OTF_PYTHON_AVAILABLE OFF)
set(OTF_PYTHON_MISSING "")
if(OTF_PYTHON_EXECUTABLE)
  execute_process(
    COMMAND "${OTF_PYTHON_EXECUTABLE}" -c
      "import sysconfig; print(sysconfig.get_paths()['include']); print(sysconfig.get_config_var('EXT_SUFFIX'))"
    OUTPUT_VARIABLE _otf_python_info RESULT_VARIABLE _otf_python_status OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_otf_python_status EQUAL 0)
    string(REPLACE "\n" ";" _otf_python_info "${_otf_python_info}")
    list(GET _otf_python_info 0 OTF_PYTHON_INCLUDE_DIR)
    list(GET _otf_python_info 1 OTF_PYTHON_EXTENSION_SUFFIX)
  endif()
endif()
# The interpreter is found here, not by pybind11's own FindPython (which would take the first
# python3 on PATH, e.g. a pyenv one without ASE).
set(PYBIND11_NOPYTHON ON)
find_package(pybind11 CONFIG QUIET)
if(NOT OTF_PYTHON_EXECUTABLE)
  set(OTF_PYTHON_MISSING "Python 3 (apt-get install python3)")
elseif(NOT OTF_PYTHON_INCLUDE_DIR OR NOT EXISTS "${OTF_PYTHON_INCLUDE_DIR}/Python.h")
  set(OTF_PYTHON_MISSING "the development headers of ${OTF_PYTHON_EXECUTABLE} (apt-get install python3-dev)")
elseif(NOT pybind11_FOUND)
  set(OTF_PYTHON_MISSING "pybind11 (apt-get install pybind11-dev, or -Dpybind11_DIR=...)")
else()
  set(OTF_PYTHON_AVAILABLE ON)
endif()
