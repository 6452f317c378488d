// The one Catch2 main for every unit test file.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
