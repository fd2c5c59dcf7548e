# nlohmann_json (header-only JSON), as the target nlohmann_json::nlohmann_json: the system's (Debian's
# nlohmann-json3-dev), else the headers of PyPI's nlohmann_json package in SEQMIX_PYTHON (a build requirement in
# pyproject.toml, so that `pip install .` needs no Debian package). -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON
# takes PyPI's even where the system has one (tests/python/wheel_install.sh does).
find_package(nlohmann_json 3.10 QUIET)
if(NOT nlohmann_json_FOUND)
  execute_process(COMMAND ${SEQMIX_PYTHON} -c
                  "import importlib.util, os; s = importlib.util.find_spec('nlohmann_json'); print(os.path.join(os.path.dirname(s.origin), 'include'), end='')"
                  OUTPUT_VARIABLE SEQMIX_NLOHMANN_INCLUDE RESULT_VARIABLE SEQMIX_NLOHMANN_RESULT ERROR_QUIET)
  if(NOT SEQMIX_NLOHMANN_RESULT EQUAL 0 OR NOT EXISTS "${SEQMIX_NLOHMANN_INCLUDE}/nlohmann/json.hpp")
    message(FATAL_ERROR "seqmix: nlohmann_json's headers not found: install Debian's nlohmann-json3-dev, or "
                        "`pip install nlohmann_json==3.12.0` into ${SEQMIX_PYTHON}")
  endif()
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  target_include_directories(nlohmann_json::nlohmann_json SYSTEM INTERFACE ${SEQMIX_NLOHMANN_INCLUDE})
  message(STATUS "seqmix: nlohmann_json from PyPI's package (${SEQMIX_NLOHMANN_INCLUDE})")
endif()
