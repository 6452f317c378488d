# Installs the worker runtime as a CMake package (find_package(cxxrun)),
# with the launcher binaries beside it:
#   cmake --install build --prefix /opt/cxxrun
# Headers go under include/cxxrun/ so that the generic directory names
# (worker_runtime/, store/) keep the same #include paths as in-tree
# without crowding the prefix's include/.
# Included from worker_runtime/, which the top level adds after store/
# and launcher/: install(TARGETS) needs the targets to exist already.
if(NOT TARGET cxxrun_store OR NOT TARGET cxxrun_net OR NOT TARGET cxxrun)
  message(FATAL_ERROR "worker_runtime/cmake/package.cmake: add_subdirectory(worker_runtime) must come after store and launcher")
endif()
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(cxxrun_package_dir ${CMAKE_INSTALL_LIBDIR}/cmake/cxxrun)
set(cxxrun_include_dir ${CMAKE_INSTALL_INCLUDEDIR}/cxxrun)

# cxxrun_component() exports the component directories for the build tree
# only; installed, the headers are found under include/cxxrun/.
foreach(target cxxrun_worker cxxrun_store)
  target_include_directories(${target} INTERFACE "$<INSTALL_INTERFACE:${cxxrun_include_dir}>")
endforeach()
set_target_properties(cxxrun_worker PROPERTIES EXPORT_NAME worker)
# The worker's store client and server, and the sockets under them, for its
# final link.
set_target_properties(cxxrun_store PROPERTIES EXPORT_NAME store)
set_target_properties(cxxrun_net PROPERTIES EXPORT_NAME net)
set_target_properties(cxxrun PROPERTIES EXPORT_NAME cxxrun)

# Components (packaging/CMakeLists.txt makes a Debian package of each):
# launcher, the programs; dev, what a program linking cxxrun::worker needs.
install(TARGETS cxxrun_worker cxxrun_store cxxrun_net cxxrun
        EXPORT cxxrunTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT launcher)
# For ctypes and other languages: the C ABI in one shared object.
install(TARGETS cxxrun_worker_shared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(FILES
          ${PROJECT_SOURCE_DIR}/worker_runtime/collective_types.h
          ${PROJECT_SOURCE_DIR}/worker_runtime/communicator.h
          ${PROJECT_SOURCE_DIR}/worker_runtime/communicator_interface.h
          ${PROJECT_SOURCE_DIR}/worker_runtime/cxxrun_worker.h
          ${PROJECT_SOURCE_DIR}/worker_runtime/error_file.h
          ${PROJECT_SOURCE_DIR}/worker_runtime/heartbeat.h
          ${PROJECT_SOURCE_DIR}/worker_runtime/worker_env_reader.h
        DESTINATION ${cxxrun_include_dir}/worker_runtime COMPONENT dev)
# client.h and server.h, with what they include: the client's errors and
# protocols, the server's options, whose limits' defaults come from wire.h.
install(FILES ${PROJECT_SOURCE_DIR}/store/client.h ${PROJECT_SOURCE_DIR}/store/client_errors.h
              ${PROJECT_SOURCE_DIR}/store/client_protocol.h ${PROJECT_SOURCE_DIR}/store/server.h
              ${PROJECT_SOURCE_DIR}/store/server_options.h ${PROJECT_SOURCE_DIR}/store/wire.h
        DESTINATION ${cxxrun_include_dir}/store COMPONENT dev)
install(EXPORT cxxrunTargets NAMESPACE cxxrun:: DESTINATION ${cxxrun_package_dir} COMPONENT dev)

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/cxxrunConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/cxxrunConfig.cmake
                              INSTALL_DESTINATION ${cxxrun_package_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/cxxrunConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_LIST_DIR}/nccl.cmake DESTINATION ${cxxrun_package_dir} RENAME cxxrunNccl.cmake
        COMPONENT dev)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/cxxrunConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/cxxrunConfigVersion.cmake
        DESTINATION ${cxxrun_package_dir} COMPONENT dev)
