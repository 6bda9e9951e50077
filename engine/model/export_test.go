package model

// Names of unexported identifiers for the external tests.
var AppendContainerSpecJSON = appendContainerSpecJSON
