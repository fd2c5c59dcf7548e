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
# The GPUs seqmix's CUDA code is compiled for: Ampere (sm_80) and Hopper (sm_90), the ones it is tested on. Torch's
# CUDA config reads this list (it ignores CMAKE_CUDA_ARCHITECTURES); TORCH_CUDA_ARCH_LIST in the environment wins.
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
endif()
find_package(Torch REQUIRED)
message(STATUS "seqmix: LibTorch ${SEQMIX_TORCH_VERSION} from ${TORCH_INSTALL_PREFIX}")
# LibTorch's CPU half (ATen, autograd, the C++ frontend, c10d with Gloo), and with SEQMIX_CUDA its CUDA half:
# libtorch_cuda registers ATen's CUDA kernels when it loads, so tensors can live on a GPU. It is linked though no
# symbol of it is referenced (as torch's own target does), and as a library only: seqmix's C++ sources compile
# with the same flags either way; the few that use CUDA's runtime API say so (seqmix_cuda_source).
# CUDA support: on when this torch is a CUDA build and CUDA's compiler is found (both hold for PyPI's Linux torch on
# a machine with the CUDA toolkit, GPU or not); off, seqmix is CPU-only and says so (`seqmix info`, --device cuda).
if(TARGET torch_cuda_library AND CMAKE_CUDA_COMPILER)
  set(SEQMIX_CUDA_DEFAULT ON)
else()
  set(SEQMIX_CUDA_DEFAULT OFF)
endif()
option(SEQMIX_CUDA "Build seqmix's CUDA support (needs a CUDA build of torch and nvcc)" ${SEQMIX_CUDA_DEFAULT})
if(SEQMIX_CUDA AND NOT TARGET torch_cuda_library)
  message(FATAL_ERROR "seqmix: SEQMIX_CUDA=ON needs a CUDA build of torch; ${SEQMIX_PYTHON}'s torch is CPU-only")
endif()
add_library(seqmix_torch INTERFACE)
target_include_directories(seqmix_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
target_link_libraries(seqmix_torch INTERFACE torch_cpu_library c10)
if(SEQMIX_CUDA)
  target_link_libraries(seqmix_torch INTERFACE "-Wl,--no-as-needed,$<TARGET_FILE:torch_cuda>,$<TARGET_FILE:c10_cuda> -Wl,--as-needed")
  message(STATUS "seqmix: CUDA support on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${TORCH_CUDA_ARCH_LIST})")
else()
  message(STATUS "seqmix: CUDA support off (a CUDA build of torch: ${CAFFE2_USE_CUDA}; nvcc: ${CMAKE_CUDA_COMPILER})")
endif()
# One C++ runtime per process: the shared libstdc++ that LibTorch runs with, linked by full path ahead of the
# compiler's own -lstdc++ so that it provides every symbol. A toolchain whose g++ links libstdc++.a (a GPU machine's
# /opt/gcc/bin/g++ 13.3.0 did, docs/gpu.md) would put a second copy into seqmix's libraries, whose iostreams share no
# locale with the process's: formatting a number into an error message crashed there.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_SYSTEM_NAME STREQUAL "Linux")
  execute_process(COMMAND ${SEQMIX_PYTHON} -c
                  "import torch; print(next((l.split()[-1] for l in open('/proc/self/maps') if 'libstdc++.so' in l), ''), end='')"
                  OUTPUT_VARIABLE SEQMIX_LIBSTDCXX RESULT_VARIABLE libstdcxx_result)
  if(NOT libstdcxx_result EQUAL 0 OR NOT EXISTS "${SEQMIX_LIBSTDCXX}")
    message(FATAL_ERROR "seqmix: cannot find the shared libstdc++ that ${SEQMIX_PYTHON}'s torch loads (read from "
            "/proc/self/maps after import torch: '${SEQMIX_LIBSTDCXX}'); seqmix links that one, never a static copy")
  endif()
  target_link_libraries(seqmix_torch INTERFACE ${SEQMIX_LIBSTDCXX})
  message(STATUS "seqmix: C++ runtime ${SEQMIX_LIBSTDCXX} (the one LibTorch loads)")
endif()
# A C++ source that calls CUDA's runtime API under #if SEQMIX_CUDA (and compiles without it when CUDA is off). Its
# flags differ from its target's, so it parses its few headers itself rather than the precompiled LibTorch.
function(seqmix_cuda_source source)
  set_property(SOURCE ${source} PROPERTY SKIP_PRECOMPILE_HEADERS ON)
  if(SEQMIX_CUDA)
    set_property(SOURCE ${source} APPEND PROPERTY COMPILE_DEFINITIONS SEQMIX_CUDA=1)
    set_property(SOURCE ${source} APPEND PROPERTY INCLUDE_DIRECTORIES ${CUDAToolkit_INCLUDE_DIRS})
  else()
    set_property(SOURCE ${source} APPEND PROPERTY COMPILE_DEFINITIONS SEQMIX_CUDA=0)
  endif()
endfunction()
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
