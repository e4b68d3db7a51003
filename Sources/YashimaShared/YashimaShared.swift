// Placeholder; replaced as the engine lands.
enum YashimaSharedPlaceholder {}
