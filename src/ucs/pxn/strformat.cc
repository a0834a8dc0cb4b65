#include "strformat.h"

#include <cstdarg>
#include <cstdio>

namespace pxn {

std::string strformat(const char *format, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, format);
    vsnprintf(text, sizeof(text), format, ap);
    va_end(ap);
    return text;
}

} // namespace pxn
