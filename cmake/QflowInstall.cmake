# The installable qflow: one shared library, its headers, a CMake package and a pkg-config file.
#
# Note [Installed library]
# Ops, derivatives, layers and fx leaf types register themselves from static initialisers in
# their own files (Note [Op registration]). A program linking static archives in the ordinary
# way gets only the object files it references by name, and no program names a registration
# object, so ops would be missing at run time ("autograd is not available") with nothing to
# say why. Three ways out: whole-archive linking carried by the exported target, an explicit
# init call every program must remember, or a shared library. qflow installs a shared library,
# libqflow.so, holding every layer's objects: the dynamic loader runs all of its initialisers
# when it loads it, with no link flag and no call to forget, it works the same from CMake,
# pkg-config or a hand-written command line, and programs share one copy of the kernels. The
# in-tree executables keep linking the layers' objects directly (qflow_link_layers), so the
# build tree has no run-time path to set up.
#
# The build tree is a package too (CMake's export(EXPORT ...)): a project developed beside a
# qflow checkout configures with -Dqflow_DIR=<checkout>/build and links the build tree's
# libqflow.so and the sources' headers, rebuilt with every `cmake --build`, without installing.
# tests/consumer/run_consumer_test.cmake builds a README program both ways.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

add_library(qflow SHARED)
add_library(qflow::qflow ALIAS qflow)
foreach(layer IN LISTS QFLOW_LAYERS)
  target_sources(qflow PRIVATE $<TARGET_OBJECTS:qflow_${layer}_objects>)
  if(EXISTS ${PROJECT_SOURCE_DIR}/${layer}/include)  # cuda/ has no public headers: core's API covers devices
    target_include_directories(qflow PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/${layer}/include>)
  endif()
  # The static layer libraries bring their private dependencies (oneDNN, OpenBLAS, libpng, MPI,
  # protobuf, ...) to the link; their objects are already in, so nothing else is taken.
  target_link_libraries(qflow PRIVATE qflow_${layer})
endforeach()
target_include_directories(qflow PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                        $<BUILD_INTERFACE:${QFLOW_GENERATED_DIR}/include>
                                        $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
# What the public headers need: fmt (qflow/core/error.h), OpenMP (qflow/core/parallel.h), C++20.
target_link_libraries(qflow PUBLIC fmt::fmt OpenMP::OpenMP_CXX)
target_compile_features(qflow PUBLIC cxx_std_20)
set_target_properties(qflow PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
if(QFLOW_HAVE_CUDA)
  # cuBLAS and cuDNN are shared libraries outside the loader's default path (/usr/local/cuda):
  # the installed library finds them where it was built against them.
  get_filename_component(_qflow_cudnn_dir ${QFLOW_CUDNN_LIBRARY} DIRECTORY)
  set_target_properties(qflow PROPERTIES INSTALL_RPATH "${CUDAToolkit_LIBRARY_DIR};${_qflow_cudnn_dir}")
endif()

install(TARGETS qflow EXPORT qflowTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(dir IN LISTS QFLOW_LAYERS)
  if(EXISTS ${PROJECT_SOURCE_DIR}/${dir}/include)
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  endif()
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The typed functions tools/gen-ops writes (Note [One declaration per op]).
install(DIRECTORY ${QFLOW_GENERATED_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} OPTIONAL)

set(_qflow_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/qflow)
install(EXPORT qflowTargets NAMESPACE qflow:: DESTINATION ${_qflow_cmake_dir})
export(EXPORT qflowTargets NAMESPACE qflow:: FILE ${PROJECT_BINARY_DIR}/qflowTargets.cmake)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/qflowConfig.cmake.in ${PROJECT_BINARY_DIR}/qflowConfig.cmake
                              INSTALL_DESTINATION ${_qflow_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/qflowConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/qflowConfig.cmake ${PROJECT_BINARY_DIR}/qflowConfigVersion.cmake
        DESTINATION ${_qflow_cmake_dir})
file(RELATIVE_PATH QFLOW_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
configure_file(${PROJECT_SOURCE_DIR}/cmake/qflow.pc.in ${PROJECT_BINARY_DIR}/qflow.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/qflow.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
