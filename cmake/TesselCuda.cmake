# The CUDA backend's build switch (docs/gpu.md): -DTESSEL_CUDA=AUTO (default)
# | ON | OFF. AUTO enables CUDA when nvcc is found (on PATH or at
# /usr/local/cuda/bin/nvcc); ON requires it; OFF never looks. The sanitizer
# build forces it OFF (nvcc's objects are not instrumented, and the build
# stays quick). Sets TESSEL_HAS_CUDA (ON/OFF) for CMakeLists.txt, which adds
# src/tessel/backend/cuda/ to the library only then.
#
# Architectures are explicit (sm_90 code plus compute_90 PTX for later
# GPUs): `native` fails on a machine without a GPU, where this is built.
set(TESSEL_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO (when nvcc is found), ON, OFF")
set_property(CACHE TESSEL_CUDA PROPERTY STRINGS AUTO ON OFF)
set(TESSEL_HAS_CUDA OFF)
if(TESSEL_SANITIZE AND NOT TESSEL_CUDA STREQUAL "OFF")
  message(STATUS "Tessel: TESSEL_SANITIZE=ON builds without CUDA (TESSEL_CUDA forced OFF)")
  set(TESSEL_CUDA OFF CACHE STRING "" FORCE)
endif()
if(NOT TESSEL_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual")
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(TESSEL_HAS_CUDA ON)
    message(STATUS "Tessel: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
                   "architectures ${CMAKE_CUDA_ARCHITECTURES})")
  elseif(TESSEL_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TESSEL_CUDA=ON but no CUDA compiler (nvcc) was found")
  else()
    message(STATUS "Tessel: no nvcc found; building without the CUDA backend")
  endif()
endif()
