/* thread.c: a name for the calling thread, as `top -H`, /proc/PID/task
 * and debuggers show it (Linux's PR_SET_NAME: at most 15 bytes). */
#include "base.h"

#include <sys/prctl.h>

void thread_set_name(const char *name)
{
    prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}
