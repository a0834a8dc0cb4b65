/*
 * printf into a std::string, for messages (at most 511 characters; longer
 * text is cut).
 */
#ifndef PXN_STRFORMAT_H_
#define PXN_STRFORMAT_H_

#include <string>

namespace pxn {

std::string strformat(const char *format, ...) __attribute__((format(printf, 1, 2)));

} // namespace pxn

#endif
