// The key-design guide (KeysAndCodecs.md).

import Foundation
import YashimaShared

// sample: keys
/// A chart rendered from a dataset. The dataset is too large for a key, so the key holds its digest.
func chartKey(dataset: Data, width: Int, darkMode: Bool, locale: String) -> CacheKey {
    CacheKey(namespace: "charts", identity: "quarterly-sales")  // what the artifact is
        .variant("data", CacheKey.digest(of: dataset))  // a large input, summarised
        .variant("width", width)  // every input that changes the bytes
        .variant("appearance", darkMode ? "dark" : "light")
        .variant("locale", locale)
        .version("renderer", 4)  // bump when the rendering code changes
}
// end sample

/// Prints what the key guide promises: order does not matter, every input does.
func showKeys() {
    let dataset = Data("region,q1,q2\nnorth,10,12\n".utf8)
    let key = chartKey(dataset: dataset, width: 640, darkMode: false, locale: "en_GB")
    let sameInputsOtherOrder = CacheKey(namespace: "charts", identity: "quarterly-sales")
        .version("renderer", 4).variant("locale", "en_GB").variant("appearance", "light")
        .variant("width", 640).variant("data", CacheKey.digest(of: dataset))
    let otherData = chartKey(dataset: dataset + Data("south,9,8\n".utf8), width: 640, darkMode: false, locale: "en_GB")
    print("key", key.stableIdentifier)
    print("same key in any order:", key == sameInputsOtherOrder)
    print("other data, other key:", key != otherData)
}
