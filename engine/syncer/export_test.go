package syncer

// Names of unexported identifiers for the external tests.
var ResolveSubPath = resolveSubPath
