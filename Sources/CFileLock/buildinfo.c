// The commit the binary was built from, when the build says (`Scripts/package.sh` passes
// `-Xcc -DYASHIMA_COMMIT="\"<sha>\""`); empty for a plain `swift build`. Read by `yashima --version`.

#include "CFileLock.h"

#ifndef YASHIMA_COMMIT
#define YASHIMA_COMMIT ""
#endif

const char *ysh_build_commit(void) { return YASHIMA_COMMIT; }
