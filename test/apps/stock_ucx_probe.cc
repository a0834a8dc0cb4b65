/*
 * Lists the UCT components of whatever libuct the dynamic linker gives it,
 * and opens the pxn md when pxn is among them. Run by the LD_PRELOAD test
 * against a stock UCX (LD_LIBRARY_PATH) with and without the module
 * preloaded.
 */
#include <uct/api/uct.h>

#include <cstdio>
#include <cstring>

int main()
{
    uct_component_h *components;
    unsigned count;
    if (uct_query_components(&components, &count) != UCS_OK) {
        fprintf(stderr, "uct_query_components failed\n");
        return 2;
    }

    int rc = 0;
    printf("components:");
    for (unsigned i = 0; i < count; ++i) {
        uct_component_attr_t attr = {};
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
        uct_component_query(components[i], &attr);
        printf(" %s", attr.name);
        if (strcmp(attr.name, "pxn") != 0) {
            continue;
        }
        uct_md_resource_desc_t mds[8];
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        uct_component_query(components[i], &attr);
        attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        attr.md_resources = mds;
        uct_md_config_t *config;
        uct_md_h md;
        if ((attr.md_resource_count == 0) || (attr.md_resource_count > 8) ||
            (uct_component_query(components[i], &attr) != UCS_OK) ||
            (uct_md_config_read(components[i], NULL, NULL, &config) != UCS_OK) ||
            (uct_md_open(components[i], mds[0].md_name, config, &md) != UCS_OK)) {
            fprintf(stderr, "\npxn md failed to open\n");
            rc = 3;
            continue;
        }
        uct_config_release(config);
        uct_md_close(md);
        printf(" (md opened)");
    }
    printf("\n");
    uct_release_component_list(components);
    return rc;
}
