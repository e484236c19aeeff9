// Package functions is the Azure Functions host ↔ custom handler protocol
// in the default (non-forwarding) mode, for both sides: the handler decodes
// invocation requests and builds responses with it; the local host
// (subpackage funchost) builds the requests and judges the responses with
// it. The folders beside this file (MirrorTimer, CatchUp, Status, Offsets, Pause, Resume, Cutover) are the
// project's function folders, one function.json each; the repository's
// host.json completes the app that `make build` lays out.
//
// The protocol, with the host's source as evidence, is in
// shared/reference/functions-custom-handler.md. In short: the host POSTs
// {"Data":{…},"Metadata":{…}} to /<FunctionName> (Content-Type
// application/json; charset=utf-8, chunked, headers
// X-Azure-Functions-InvocationId and X-Azure-Functions-HostVersion) and
// expects a 2xx application/json answer {"Outputs":{…},"Logs":[…],
// "ReturnValue":…}; a non-2xx answer fails the invocation and the host
// drops its Logs.
//
// # Handler side
//
// Decode the body, then the trigger data of the binding named in
// function.json; every error is one line naming the field:
//
//	inv, err := functions.DecodeInvocation(r.Body, 1<<20)
//	if err != nil { … } // e.g. "invocation body: Data: want object, got string"
//	timer, err := inv.Timer("timer")   // MirrorTimer
//	req, err := inv.HTTP("req")        // CatchUp, Status
//	sys, _ := inv.Sys()                // MethodName, UtcNow, RandGuid
//	id := r.Header.Get(functions.HeaderInvocationID)
//
// Answer with a Response (always Content-Type application/json; with echo,
// c.JSON(status, resp) does it):
//
//	functions.WriteResponse(w, http.StatusOK, functions.NewResponse("drained 120 records"))
//	out, _ := functions.JSONOutput(http.StatusAccepted, run)
//	functions.WriteResponse(w, http.StatusOK, functions.HTTPResponse("res", out))
//
// An HTTP function's status code travels inside Outputs.res; the
// invocation response itself stays 200. To fail an invocation answer
// non-2xx; the host then discards the body, Logs included, so also write
// the reason to stderr (the host logs stderr lines at Error).
//
// Listen on 127.0.0.1:<port> with port from HandlerPort(os.LookupEnv).
//
// # Host side
//
// NewTimerInvocation and NewHTTPInvocation build request bodies;
// ParseInvocationResult, CheckOutputs and HTTPOutput's UnmarshalJSON read
// responses by the host's rules; LoadApp, ParseHostJSON and
// ParseFunctionJSON read an app folder; ExpandSettings resolves %SETTING%.
package functions
