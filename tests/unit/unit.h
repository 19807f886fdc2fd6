/* SPDX-License-Identifier: MIT */
/* Common includes for the cmocka unit tests (no privileges needed). */
#ifndef AGENTBOX_UNIT_H
#define AGENTBOX_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#ifndef AB_SRCDIR
#define AB_SRCDIR "."
#endif

#endif
