"""The gate's library that no deployment needs: the kernels under test and their planted defects
(registry, planted), lowering and building for a named target (lowering, builder), the checkout's
paths and the TileLang versions the gate supports. The runtime (tilegate.kernels, tilegate.runtime,
tilegate.platform, tilegate.serving) never imports it."""
