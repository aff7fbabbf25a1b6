package main

// allowList: the differences our shim must show. Each is documented in docs/conformance.md (same
// scenario and key) and asserted: both values must match, else the row fails (ALLOW-MISMATCH).
var allowList = []allowance{
	// A GPU request on a host without a GPU (the conformance machines have none): runc's shim
	// ignores NVIDIA_VISIBLE_DEVICES and runs the container; ours refuses to create the task,
	// so nothing after Create happens.
	{Scenario: "gpu_request", Key: "c0 create", Runc: "ok", Ours: "FailedPrecondition",
		Why: "NVIDIA_VISIBLE_DEVICES=all on a host without a GPU: ours refuses Create (no device to inject)"},
	{Scenario: "gpu_request", Key: "c1 create", Runc: "ok", Ours: "InvalidArgument",
		Why: "NVIDIA_VISIBLE_DEVICES with an invalid entry: ours refuses Create"},
	{Scenario: "gpu_request", Key: "c[01] events", Runc: "create\\(.*", Ours: "\\(none\\)",
		Why: "no task was created by ours, so it sent no /tasks/* event"},
	{Scenario: "gpu_request", Key: "c[01] (create pid|status .*|wait|start|start pid|exit|io|delete)",
		Runc: ".*", Ours: "\\(not observed\\)",
		Why: "the steps after a refused Create do not run"},
}
