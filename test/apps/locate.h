/*
 * Where the test and benchmark programs find the trees they need, at run
 * time: binaries carry no source or build path, so a build tree can be
 * moved or copied (the GPU machine runs a copy).
 *
 * build_dir():  $PXN_BUILD_DIR, else the nearest directory above the
 *               running program that holds config.status.
 * source_dir(): $PXN_SOURCE_DIR, else the abs_top_srcdir that the build
 *               tree's Makefile names.
 * make_var():   a variable of the build tree's Makefile (UCX_PREFIX,
 *               UCX_MODULEDIR, STOCK_UCX_LIBDIR, ...).
 * All return "" when they cannot tell.
 */
#ifndef PXN_TEST_APPS_LOCATE_H_
#define PXN_TEST_APPS_LOCATE_H_

#include <string>

namespace pxn_tools {

std::string build_dir();
std::string source_dir();
std::string make_var(const std::string &name);

} // namespace pxn_tools

#endif
