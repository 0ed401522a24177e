# FindNCCL: locates NCCL 2 headers and library (the CUDA toolkit's copy or NCCL_ROOT).
# Result: NCCL_FOUND, NCCL_VERSION, NCCL_INCLUDE_DIR, NCCL_LIBRARY, imported target NCCL::nccl.
set(_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_INCLUDE_DIRS}/..)
find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ${_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS}
  PATHS /usr/include /usr/include/x86_64-linux-gnu /usr/local/cuda/include
  PATH_SUFFIXES include)
find_library(NCCL_LIBRARY nccl
  HINTS ${_nccl_hints} ${CUDAToolkit_LIBRARY_DIR}
  PATHS /usr/lib/x86_64-linux-gnu /usr/local/cuda/lib64 /usr/local/cuda/lib
  PATH_SUFFIXES lib lib64 lib/x64)
if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(READ "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_header)
  string(REGEX MATCH "define NCCL_MAJOR ([0-9]+)" _ "${_nccl_header}")
  set(_major ${CMAKE_MATCH_1})
  string(REGEX MATCH "define NCCL_MINOR ([0-9]+)" _ "${_nccl_header}")
  set(_minor ${CMAKE_MATCH_1})
  string(REGEX MATCH "define NCCL_PATCH ([0-9]+)" _ "${_nccl_header}")
  set(NCCL_VERSION "${_major}.${_minor}.${CMAKE_MATCH_1}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR VERSION_VAR NCCL_VERSION)
if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES
    IMPORTED_LOCATION "${NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
