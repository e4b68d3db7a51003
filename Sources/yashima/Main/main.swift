// The `yashima` executable: everything is in the YashimaCommandLine target (Sources/yashima), which the tests
// import; this target only starts it, and is linked with the Swift standard library, Foundation and
// Dispatch statically (Package.swift), which the test bundle, linking the rest, must not be.

import Foundation
import YashimaCommandLine

runAndExit()
