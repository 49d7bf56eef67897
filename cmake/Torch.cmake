# Finds LibTorch. Without -DCMAKE_PREFIX_PATH / -DTorch_DIR, uses the torch wheel that `make deps`
# installs into the project's .venv (torch.utils.cmake_prefix_path).
if(NOT Torch_DIR AND EXISTS "${PROJECT_SOURCE_DIR}/.venv/bin/python")
  execute_process(
    COMMAND "${PROJECT_SOURCE_DIR}/.venv/bin/python" -c
            "import torch.utils; print(torch.utils.cmake_prefix_path, end='')"
    OUTPUT_VARIABLE SPHERET_VENV_TORCH_PREFIX
    ERROR_QUIET
    RESULT_VARIABLE SPHERET_VENV_TORCH_RESULT)
  if(SPHERET_VENV_TORCH_RESULT EQUAL 0)
    list(APPEND CMAKE_PREFIX_PATH "${SPHERET_VENV_TORCH_PREFIX}")
  endif()
endif()

# Architectures for torch's CUDA flags and our kernels: A100 (8.0) and H100/H200 (9.0) unless set.
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
endif()
find_package(Torch REQUIRED)
message(STATUS "LibTorch ${Torch_VERSION} at ${TORCH_INSTALL_PREFIX}")

# SPHERET_CUDA: the fused CUDA kernels need a CUDA LibTorch and nvcc.
set(SPHERET_CUDA_ENABLED OFF)
if(NOT SPHERET_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CAFFE2_USE_CUDA AND CMAKE_CUDA_COMPILER)
    set(SPHERET_CUDA_ENABLED ON)
  elseif(SPHERET_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SPHERET_CUDA=ON needs a LibTorch built with CUDA and nvcc on the PATH")
  endif()
endif()
if(SPHERET_CUDA_ENABLED)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  set(CMAKE_CUDA_STANDARD 17)
  enable_language(CUDA)
endif()
message(STATUS "spheret CUDA kernels: ${SPHERET_CUDA_ENABLED}")

# spheret::torch: LibTorch for our targets. The wheel's libtorch*.so export copies of libstdc++
# symbols (std::filesystem among them; pytorch/pytorch#133437) that crash when our code binds to
# them, so every binary lists libstdc++ before LibTorch and the dynamic linker binds to the system's.
add_library(spheret_torch INTERFACE)
add_library(spheret::torch ALIAS spheret_torch)
target_link_options(spheret_torch INTERFACE "LINKER:--push-state,--no-as-needed" "-lstdc++"
                    "LINKER:--pop-state")
target_link_libraries(spheret_torch INTERFACE ${TORCH_LIBRARIES})
