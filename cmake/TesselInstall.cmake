# `cmake --install`: headers under include/tessel/..., libtessel.a and
# libtessel_cli.a, the `tessel` executable, and the CMake package
# (TesselConfig.cmake, its version file, TesselTargets.cmake with
# Tessel::tessel and Tessel::cli) so find_package(Tessel) works from another
# project (examples/cpp-custom-model, docs/library.md).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TESSEL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Tessel)
# (The targets' INSTALL_INTERFACE already names include/.)
install(TARGETS tessel tessel_app EXPORT TesselTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS tessel_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/src/tessel ${CMAKE_SOURCE_DIR}/apps/tessel/include/tessel
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(EXPORT TesselTargets NAMESPACE Tessel:: DESTINATION ${TESSEL_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/TesselConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/TesselConfig.cmake
                              INSTALL_DESTINATION ${TESSEL_CMAKE_DIR})
# 0.x: minor versions may break the API (docs/library.md says what is stable).
write_basic_package_version_file(${CMAKE_BINARY_DIR}/TesselConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/TesselConfig.cmake ${CMAKE_BINARY_DIR}/TesselConfigVersion.cmake
        DESTINATION ${TESSEL_CMAKE_DIR})
