# The dependency rule (launcher -> agent -> rendezvous -> store;
# examples -> worker_runtime -> store; common/ shared by agent and
# worker_runtime) is kept by the compiler, not by review: a target can
# include only the headers of the components it links.
#
# Sources spell includes from the project root ("store/client.h"), so a
# component cannot export the root itself: that would expose every other
# component too. Instead each target gets a directory of its own holding one
# link, build/components/<target>/<dir> -> <source>/<dir>, and exports that
# directory. <dir> may be nested ("agent/hang": one of the agent's wings,
# agent/CMakeLists.txt). With FILES, the link is made for those files of
# <dir> only, not the directory: the agent's root headers that every wing
# may include (agent/config.h), without the wings above them.
function(cxxrun_component target dir)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "FILES")
  set(root ${CMAKE_BINARY_DIR}/components/${target})
  if(arg_FILES)
    file(MAKE_DIRECTORY ${root}/${dir})
    foreach(f ${arg_FILES})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${dir}/${f} ${root}/${dir}/${f} SYMBOLIC)
    endforeach()
  else()
    get_filename_component(parent ${root}/${dir} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${dir} ${root}/${dir} SYMBOLIC)
  endif()
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${target} INTERFACE $<BUILD_INTERFACE:${root}>)
  else()
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${root}>)
  endif()
endfunction()
