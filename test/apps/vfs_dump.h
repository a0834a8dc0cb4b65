/*
 * Reading this process's UCX VFS tree (the files ucx_vfs would show) through
 * UCS's in-process API, without FUSE.
 */
#ifndef PXN_TEST_UCP_VFS_DUMP_H_
#define PXN_TEST_UCP_VFS_DUMP_H_

#include <cstdio>
#include <string>

/* Prints "vfs <path> = <content>" for every file whose path contains
 * `part`; returns how many. Refreshes every object on the way, like a
 * directory listing of ucx_vfs does. */
unsigned print_vfs_files(const std::string &part, FILE *out);

#endif
