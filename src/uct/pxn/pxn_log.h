/*
 * Lines that must appear once per process however often their cause is met
 * (every context, md and iface of a process meets the same configuration):
 * the first time a text is logged it goes out, later identical texts are
 * dropped. For configuration and environment problems, not for events.
 */
#ifndef PXN_UCT_PXN_LOG_H_
#define PXN_UCT_PXN_LOG_H_

#include <ucs/pxn/strformat.h> /* for the texts */

#include <string>

namespace pxn {
namespace uct {

void error_once(const std::string &text);
void warn_once(const std::string &text);

} // namespace uct
} // namespace pxn

#endif
