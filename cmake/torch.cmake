# LibTorch for seqmix, as the interface target seqmix_torch. Included by the main build and by fuzz/.
# LibTorch comes from the project's Python environment (.venv/, made by scripts/setup.sh): PyPI's torch 2.x,
# the same torch the Python package and its tests run on, found through torch.utils.cmake_prefix_path.
# Under pip (scikit-build-core), the Python that runs pip: the package builds against the torch already there.
get_filename_component(SEQMIX_VENV_PYTHON ${CMAKE_CURRENT_LIST_DIR}/../.venv/bin/python ABSOLUTE)
if(SKBUILD AND Python_EXECUTABLE)
  set(SEQMIX_VENV_PYTHON ${Python_EXECUTABLE})
endif()
set(SEQMIX_PYTHON ${SEQMIX_VENV_PYTHON} CACHE FILEPATH
    "Python whose torch seqmix builds against and whose interpreter runs the Python tests")
if(NOT EXISTS ${SEQMIX_PYTHON})
  message(FATAL_ERROR "seqmix: ${SEQMIX_PYTHON} does not exist; run scripts/setup.sh (it makes .venv/ with "
                      "PyPI's torch) or pass -DSEQMIX_PYTHON=<a python with torch 2.7 or later>")
endif()
execute_process(COMMAND ${SEQMIX_PYTHON} -c
                "import torch; print(torch.utils.cmake_prefix_path, torch.__version__.split('+')[0], sep=';', end='')"
                OUTPUT_VARIABLE SEQMIX_TORCH_FACTS RESULT_VARIABLE SEQMIX_TORCH_FOUND_RESULT
                ERROR_VARIABLE SEQMIX_TORCH_ERROR)
if(NOT SEQMIX_TORCH_FOUND_RESULT EQUAL 0)
  message(FATAL_ERROR "seqmix: ${SEQMIX_PYTHON} cannot import torch (run scripts/setup.sh): ${SEQMIX_TORCH_ERROR}")
endif()
list(GET SEQMIX_TORCH_FACTS 0 SEQMIX_TORCH_CMAKE_PREFIX)
list(GET SEQMIX_TORCH_FACTS 1 SEQMIX_TORCH_VERSION)
if(SEQMIX_TORCH_VERSION VERSION_LESS 2.7)
  message(FATAL_ERROR "seqmix: needs torch 2.7 or later (C++11 ABI); ${SEQMIX_PYTHON} has ${SEQMIX_TORCH_VERSION}")
endif()
list(PREPEND CMAKE_PREFIX_PATH ${SEQMIX_TORCH_CMAKE_PREFIX})
find_package(Torch REQUIRED)
message(STATUS "seqmix: LibTorch ${SEQMIX_TORCH_VERSION} from ${TORCH_INSTALL_PREFIX}")
# The CPU half of LibTorch: ATen, autograd, the C++ frontend, c10d with Gloo. PyPI's torch is a CUDA build;
# linking `torch` would pull its CUDA libraries in as direct dependencies, which nothing here uses.
add_library(seqmix_torch INTERFACE)
target_include_directories(seqmix_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
target_link_libraries(seqmix_torch INTERFACE torch_cpu_library c10)
# at::parallel_for is an OpenMP pragma in ATen's headers: without -fopenmp in our code it runs serially. One
# OpenMP runtime per process: the libgomp that ships beside libtorch_cpu, not the compiler's.
find_package(OpenMP REQUIRED)
find_file(SEQMIX_TORCH_LIBGOMP libgomp.so.1 PATHS ${TORCH_INSTALL_PREFIX}/lib NO_DEFAULT_PATH)
if(SEQMIX_TORCH_LIBGOMP)
  target_compile_options(seqmix_torch INTERFACE ${OpenMP_CXX_FLAGS})
  target_link_libraries(seqmix_torch INTERFACE ${SEQMIX_TORCH_LIBGOMP})
else()
  target_link_libraries(seqmix_torch INTERFACE OpenMP::OpenMP_CXX)
endif()
