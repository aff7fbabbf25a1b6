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
	{Scenario: "gpu_request", Key: "c[01] (create pid|status .*|wait|start|start pid|exit|io|delete|/tasks/delete)",
		Runc: ".*", Ours: "\\(not observed\\)",
		Why: "the steps after a refused Create do not run"},

	// A restore that fails at Start: ours ends the task (stopped, exit 255) so that the force delete
	// (Kill, then Wait for the exit) finishes; runc's shim leaves it created with no exit to come,
	// and the delete waits until its deadline (the scenario then deletes the created task plainly).
	{Scenario: "restore_failed", Key: "c0 status after failed start", Runc: "created", Ours: "stopped code=255 exited_at=set",
		Why: "ours ends a task whose restore failed as a process that ended; runc's shim leaves it created"},
	// runc's shim mostly hangs here; under load its Kill sometimes fails first (seen once in CI on
	// containerd 1.7: "error Unknown" after 5 s). Ours is held to the one value.
	{Scenario: "restore_failed", Key: "c0 force delete", Runc: "error TIMEOUT|error Unknown", Ours: "code=255 exited_at=set",
		Why: "Delete(WithProcessKill) waits for an exit: ours published one, runc's shim never does (it hangs)"},
	{Scenario: "restore_failed", Key: "c0 exit", Runc: "none", Ours: "code=255 exited_at=set err=ok",
		Why: "the client's Wait returns for ours; with runc's shim it never does"},
	{Scenario: "restore_failed", Key: "c0 /tasks/delete", Runc: "last: delete\\(init,pid=0,code=0,exited_at=zero\\)|missing",
		Ours: "last: delete\\(init,pid=0,code=255,exited_at=set\\)",
		Why:  "the delete carries the exit ours published; runc's shim reports none (code 0, no exit time)"},
	{Scenario: "restore_failed", Key: "c0 events", Runc: "create\\(pid=0,[^)]*\\)",
		Ours: "create\\(pid=0,[^)]*\\) exit\\(init,pid=0,code=255,exited_at=set\\)",
		Why:  "ours publishes the /tasks/exit of the task whose restore failed"},

	// Tolerances for the reference: containerd 2.3's runc shim sometimes loses what ours must
	// deliver. Ours is held to the complete value.
	{Scenario: ".*", Key: "c[0-9]+ /tasks/delete", Runc: "missing", Ours: "last: .*",
		Why: "containerd 2.3's runc shim sometimes never sends the init's /tasks/delete (shut down before its event queue drains); ours must send it, as the last event"},
	{Scenario: "init_logfile|init_loguri|exec_logfile", Key: "(exec )?log lines \\(sorted\\)", Runc: "out|err",
		Ours: "err\\|out",
		Why:  "containerd 2.3's runc shim sometimes loses a line of a file:// log that stdout and stderr share; ours must keep both"},
}
