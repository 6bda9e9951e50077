package plan

// Names of unexported identifiers for the external tests.
var AppendContainerSpecJSON = appendContainerSpecJSON
var ChangedFields = changedFields
