// Package emulator is an Azure Event Hubs emulator: an AMQP 1.0 server that
// the unmodified azeventhubs SDK (v2) talks to over a real TCP socket, with a
// UseDevelopmentEmulator=true connection string.
//
// It implements what the SDKs use: SASL ANONYMOUS, sessions and links with
// flow control, multi-frame transfers, CBS put-token with SAS validation,
// $management READ of event hub and partition properties, producer links to
// a hub or a partition (Microsoft's batch format, partition keys placed with
// the service's hash from package partitionkey, round-robin otherwise),
// consumer links with every selector filter the SDK sends, owner levels
// (epochs), long polling and receiver runtime metrics, retention by time and
// by size. Tokens: SAS with shared access policies per namespace and hub
// (Listen, Send, Manage) and Entra ID JWTs with role assignments ([EntraID]).
// Transports: plain AMQP, amqps and AMQP over WebSockets. An optional data
// directory keeps events across restarts. An optional [Quota] throttles the
// namespace's ingress to its throughput units with the service's
// server-busy answer, counted in [Stats].ThrottledRequests.
//
// A test starts a server on a free port and points the SDK at it:
//
//	srv, err := emulator.Start(ctx, emulator.Config{
//		Listen: "127.0.0.1:0",
//		Hubs:   []emulator.HubConfig{{Name: "hub1", PartitionCount: 4}},
//	})
//	...
//	producer, err := azeventhubs.NewProducerClientFromConnectionString(srv.ConnectionString(), "hub1", nil)
//
// [Server.Faults] injects failures (rejected sends, dropped connections,
// detached links, delayed dispositions); [Server.Stats] and [Server.Events]
// let tests assert on what the emulator stored.
//
// The wire contract the emulator follows is described in
// shared/reference/eventhubs-amqp-contract.md.
package emulator
