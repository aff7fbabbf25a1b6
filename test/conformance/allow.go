package main

// allowList: the differences our shim must show. Each is documented in docs/conformance.md (same
// scenario and key) and asserted: both values must match, else the row fails.
var allowList = []allowance{}
