#!/usr/bin/env python3
"""What a UCX says about itself, read through its own libraries with ctypes:
for a UCX without ucx_info (a NIXL wheel's private UCX, whose libraries are
renamed libucp-<suffix>-<hash>.so...).

    python3 contrib/ucx_query.py LIBUCP [LIBUCT]

prints "version: X.Y.Z" (ucp_get_version) and, given LIBUCT, "components:
NAME ..." (uct_query_components). libucp is loaded first, so that pxn's
version guard, run when libuct loads its modules, sees the version.
Used by contrib/wheel_install.sh and contrib/nixl_check.sh.
"""
import ctypes
import sys

UCT_COMPONENT_ATTR_FIELD_NAME = 1
NAME_OFFSET, NAME_MAX = 8, 16  # uct_component_attr_t: field_mask, then name[16]


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit("usage: ucx_query.py LIBUCP [LIBUCT]")
    ucp = ctypes.CDLL(argv[1])
    v = [ctypes.c_uint() for _ in range(3)]
    ucp.ucp_get_version(*[ctypes.byref(x) for x in v])
    print("version:", ".".join(str(x.value) for x in v))
    if len(argv) == 2:
        return
    uct = ctypes.CDLL(argv[2])
    comps, n = ctypes.POINTER(ctypes.c_void_p)(), ctypes.c_uint()
    if uct.uct_query_components(ctypes.byref(comps), ctypes.byref(n)) != 0:
        sys.exit("uct_query_components failed")
    names = []
    for i in range(n.value):
        attr = ctypes.create_string_buffer(512)  # uct_component_attr_t and more
        ctypes.c_uint64.from_buffer(attr, 0).value = UCT_COMPONENT_ATTR_FIELD_NAME
        uct.uct_component_query(ctypes.c_void_p(comps[i]), attr)
        names.append(attr.raw[NAME_OFFSET:NAME_OFFSET + NAME_MAX].split(b"\0")[0].decode())
    print("components:", " ".join(names))


if __name__ == "__main__":
    main(sys.argv)
