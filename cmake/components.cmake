# The dependency rule (launcher -> agent -> rendezvous -> store;
# examples -> worker_runtime -> store; common/ shared by agent and
# worker_runtime) is kept by the compiler, not by review: a target can
# include only the headers of the components it links.
#
# Sources spell includes from the project root ("store/client.h"), so a
# component cannot export the root itself: that would expose every other
# component too. Instead each gets a directory of its own holding one link,
# build/components/<dir>/<dir> -> <source>/<dir>, and exports that directory.
function(cxxrun_component target dir)
  set(root ${CMAKE_BINARY_DIR}/components/${dir})
  file(MAKE_DIRECTORY ${root})
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${dir} ${root}/${dir} SYMBOLIC)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${target} INTERFACE $<BUILD_INTERFACE:${root}>)
  else()
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${root}>)
  endif()
endfunction()
