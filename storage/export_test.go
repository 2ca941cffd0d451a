package storage

// MessageContainsForTest exposes messageContains to the external tests.
var MessageContainsForTest = messageContains
