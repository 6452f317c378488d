# Finds what the NCCL backend links: CUDA's runtime (static, as the examples
# link it, so a process holds one copy) and NCCL. Sets CXXRUN_NCCL_FOUND and,
# when found, defines the imported target cxxrun::nccl. Shared by the build
# (worker_runtime/CMakeLists.txt) and the installed package config, so an
# installed cxxrun::worker resolves the same names in the consumer's project.
#
# NCCL is looked for beside the CUDA toolkit, then under NCCL_HOME (or the
# environment's), then /usr/local/cuda; set CXXRUN_NCCL_LIBRARY and
# CXXRUN_NCCL_INCLUDE_DIR to pick one explicitly.
# In the build the targets must be GLOBAL: tests/ and examples/ link
# cxxrun_worker, whose private link items they then have to resolve.
if(CXXRUN_NCCL_GLOBAL_TARGETS)
  set(_cxxrun_nccl_global GLOBAL)
else()
  set(_cxxrun_nccl_global)
endif()
set(CXXRUN_NCCL_FOUND FALSE)
find_package(CUDAToolkit QUIET ${_cxxrun_nccl_global})
find_path(CXXRUN_NCCL_INCLUDE_DIR nccl.h
          HINTS ${CUDAToolkit_INCLUDE_DIRS} ${NCCL_HOME}/include $ENV{NCCL_HOME}/include
          PATHS /usr/local/cuda/include)
find_library(CXXRUN_NCCL_LIBRARY nccl
             HINTS ${CUDAToolkit_LIBRARY_DIR} ${NCCL_HOME}/lib ${NCCL_HOME}/lib64 $ENV{NCCL_HOME}/lib
             PATHS /usr/local/cuda/lib64 /usr/local/cuda/lib)
if(CUDAToolkit_FOUND AND TARGET CUDA::cudart_static AND CXXRUN_NCCL_INCLUDE_DIR AND CXXRUN_NCCL_LIBRARY)
  set(CXXRUN_NCCL_FOUND TRUE)
  if(NOT TARGET cxxrun::nccl)
    add_library(cxxrun::nccl UNKNOWN IMPORTED ${_cxxrun_nccl_global})
    set_target_properties(cxxrun::nccl PROPERTIES
      IMPORTED_LOCATION "${CXXRUN_NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${CXXRUN_NCCL_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES CUDA::cudart_static)
  endif()
endif()
unset(_cxxrun_nccl_global)
